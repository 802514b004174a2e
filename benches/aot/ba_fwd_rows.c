/* BA `project` Jacobian as rows (vector forward mode, D-Vec-Rows,
 * d/dcam: 2N rows of 11) over N = 10^5 random points, AOT. Usage:
 * ba_fwd_rows REPS. See run.sh. */
#include "ba_fwd_rows.h"
#define BA_ENTRY ba_fwd_rows
#include "ba_jacobian.h"
