/* Plain C, no fsmooth: what the order of GMM's additions costs.
 *
 * The hot part of GMM's objective and gradient on d10_K25 (n = 1000
 * points, K = 25 components, d = 10) is, per point and component, the
 * triangular product (Q y)_r = sum_{s <= r} Q[r][s] y[s] and, in the
 * gradient, its reverse: per row r, ybar[s] += t_r Q[r][s] and
 * Qbar[r][s] += t_r y[s]. fsmooth keeps the evaluator's order of every
 * addition (each sum a chain, s ascending), so its native code returns
 * the evaluator's bits; it overlaps chains of different rows (Note
 * [Jamming]: two rows at a time). This driver times the same loops in C:
 *
 *   fwd1  one row at a time        (the order, no overlap)
 *   fwd2  two rows at a time       (fsmooth's forward, Note [Jamming])
 *   fwd4  four rows at a time      (the order, more overlap)
 *   grad  fwd2 and the reverse sweep row by row (fsmooth's gradient loops)
 *
 * run.sh builds it twice: `gmm_order` with -O2 -fno-tree-vectorize (the
 * order kept), `gmm_order_fast` with -O3 -march=native -ffast-math (gcc
 * may reassociate the sums and use the widest vectors, as XLA does).
 * Usage: gmm_order ROUNDS; the best of ROUNDS calls of each, alternating. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define D 10
#define K 25
#define N 1000
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static double *Q[K][D], *QB[K][D], X[N][D], M[K][D], MB[K][D];

static double row(const double *q, const double *y, int r) {
  double t = 0; for (int s = 0; s <= r; s++) t += q[s] * y[s]; return t;
}

/* (Q y)_r of every row into qy, `jam` rows at a time; returns ||Q y||^2. */
static double products(int c, const double *y, double *qy, int jam) {
  double acc = 0; int r = 0;
  if (jam == 4) for (; r + 3 < D; r += 4) {
    const double *a = Q[c][r], *b = Q[c][r+1], *e = Q[c][r+2], *f = Q[c][r+3];
    double t0 = 0, t1 = 0, t2 = 0, t3 = 0; int s = 0;
    for (; s <= r; s++) { t0 += a[s]*y[s]; t1 += b[s]*y[s]; t2 += e[s]*y[s]; t3 += f[s]*y[s]; }
    for (int u = s; u <= r + 1; u++) t1 += b[u]*y[u];
    for (int u = s; u <= r + 2; u++) t2 += e[u]*y[u];
    for (int u = s; u <= r + 3; u++) t3 += f[u]*y[u];
    qy[r] = t0; qy[r+1] = t1; qy[r+2] = t2; qy[r+3] = t3;
    acc += t0*t0; acc += t1*t1; acc += t2*t2; acc += t3*t3;
  }
  if (jam >= 2) for (; r + 1 < D; r += 2) {
    const double *a = Q[c][r], *b = Q[c][r+1]; double t0 = 0, t1 = 0; int s = 0;
    for (; s <= r; s++) { t0 += a[s]*y[s]; t1 += b[s]*y[s]; }
    for (; s <= r + 1; s++) t1 += b[s]*y[s];
    qy[r] = t0; qy[r+1] = t1; acc += t0*t0; acc += t1*t1;
  }
  for (; r < D; r++) { qy[r] = row(Q[c][r], y, r); acc += qy[r]*qy[r]; }
  return acc;
}

static double run(int jam, int reverse) {
  double tot = 0;
  for (int i = 0; i < N; i++) for (int c = 0; c < K; c++) {
    double y[D], qy[D], yb[D] = {0};
    for (int s = 0; s < D; s++) y[s] = X[i][s] - M[c][s];
    double sq = products(c, y, qy, jam);
    tot += sq;
    if (!reverse) continue;
    double w = 1e-3 * sq;
    for (int r = 0; r < D; r++) {
      double t = -2 * w * qy[r]; const double *q = Q[c][r]; double *qb = QB[c][r];
      for (int s = 0; s <= r; s++) { yb[s] += t * q[s]; qb[s] += t * y[s]; }
    }
    for (int s = 0; s < D; s++) MB[c][s] -= yb[s];
  }
  return tot;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 200; srand(1);
  for (int c = 0; c < K; c++) {
    for (int r = 0; r < D; r++) {
      Q[c][r] = malloc(sizeof(double) * (r + 1)); QB[c][r] = calloc(r + 1, sizeof(double));
      for (int s = 0; s <= r; s++) Q[c][r][s] = (double)rand() / RAND_MAX;
    }
    for (int s = 0; s < D; s++) M[c][s] = (double)rand() / RAND_MAX;
  }
  for (int i = 0; i < N; i++) for (int s = 0; s < D; s++) X[i][s] = (double)rand() / RAND_MAX;
  const char *name[4] = {"fwd1", "fwd2", "fwd4", "grad"};
  int jam[4] = {1, 2, 4, 2}, rev[4] = {0, 0, 0, 1};
  double best[4] = {1e9, 1e9, 1e9, 1e9}, value[4];
  for (int k = 0; k < rounds; k++) for (int v = 0; v < 4; v++) {
    double t0 = now(); value[v] = run(jam[v], rev[v]); double t = now() - t0;
    if (t < best[v]) best[v] = t;
  }
  for (int v = 0; v < 4; v++) printf("%s %.3f ms (%.17g)  ", name[v], best[v] * 1e3, value[v]);
  printf("\n");
  return 0;
}
