/* BA `project` Jacobian (optimised forward mode: one pass per camera
 * parameter, d/dcam) over N = 10^5 random points, AOT.
 * Usage: ba_fwd_opt REPS. See run.sh. */
#include "ba_fwd_opt.h"
#define BA_ENTRY ba_fwd_opt
#include "ba_jacobian.h"
