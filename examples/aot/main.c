/* Calls F-smooth code compiled ahead of time: the dot product of
 * examples/dot.fsm and its reverse-mode gradient with respect to `u`.
 *
 *   ./dot_demo U V      U, V: comma-separated numbers, e.g. 1,2,3 4,5,6
 *
 * Prints one line per entry: `NAME: ok VALUE [GRADIENT...]`, or
 * `NAME: error CODE a=A b=B` when the program reaches an error (bottom),
 * CODE being the evaluator's stable error code. Build: see README.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dot.h"
#include "dot_rev.h"

/* Parses comma-separated doubles; returns how many (0 for ""). */
static int64_t parse(const char *s, double **out) {
    int64_t n = (*s != '\0');
    for (const char *p = s; *p; p++) {
        n += (*p == ',');
    }
    *out = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (*out == NULL) {
        exit(3);
    }
    char *end = (char *)s;
    for (int64_t i = 0; i < n; i++) {
        (*out)[i] = strtod(end, &end);
        if (*end == ',') {
            end++;
        }
    }
    return n;
}

static int report_error(const char *name, int64_t status, const fsmooth_ctx *ctx) {
    printf("%s: error %s a=%" PRId64 " b=%" PRId64 "\n", name,
           fsmooth_status_name(status), ctx->a, ctx->b);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s U V (comma-separated numbers)\n", argv[0]);
        return 2;
    }
    double *u, *v;
    int64_t nu = parse(argv[1], &u);
    int64_t nv = parse(argv[2], &v);
    int failed = 0;
    fsmooth_ctx ctx = FSMOOTH_CTX_INIT;

    /* dot u v */
    double value;
    int64_t status = dot(&ctx, u, nu, v, nv, &value);
    if (status == FSMOOTH_OK) {
        printf("dot: ok %.17g\n", value);
    } else {
        failed |= report_error("dot", status, &ctx);
    }

    /* rev'dot u v = (dot u v, the gradient with respect to u) */
    const double *gradient;
    int64_t n;
    status = dot_rev(&ctx, u, nu, v, nv, &value, &gradient, &n);
    if (status == FSMOOTH_OK) {
        printf("dot_rev: ok %.17g", value);
        for (int64_t i = 0; i < n; i++) {
            printf(" %.17g", gradient[i]);
        }
        printf("\n");
    } else {
        failed |= report_error("dot_rev", status, &ctx);
    }

    /* Frees every array the calls returned (`gradient` included). */
    fsmooth_ctx_release(&ctx);
    free(u);
    free(v);
    return failed;
}
