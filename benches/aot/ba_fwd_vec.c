/* BA `project` Jacobian (vector forward mode, d/dcam) over N = 10^5
 * random points, AOT. Usage: ba_fwd_vec REPS. See run.sh. */
#include "ba_fwd_vec.h"
#define BA_ENTRY ba_fwd_vec
#include "ba_jacobian.h"
