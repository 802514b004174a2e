/* The driver of the BA `project` Jacobian (d/dcam) over N = 10^5 random
 * points, AOT, for the entry BA_ENTRY (declared by the header included
 * before this one): the best of REPS calls, and the sum of the
 * Jacobian's entries (the same whether the entry returns its columns or
 * its rows) and the most memory the context held after a call. See ba_fwd_vec.c, ba_fwd_rows.c, ba_fwd_opt.c and run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){
  int n=100000; int reps=argc>1?atoi(argv[1]):20;
  double cam[11]={0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002};
  fsmooth_array*x=malloc(sizeof(fsmooth_array)*n); srand(3);
  for(int i=0;i<n;i++){double*r=malloc(sizeof(double)*3);for(int j=0;j<3;j++)r[j]=(double)rand()/RAND_MAX-0.5;x[i].data=r;x[i].len=3;}
  fsmooth_ctx ctx=FSMOOTH_CTX_INIT; const fsmooth_array*o; int64_t ol;
  double best=1e9; int64_t used=0;
  for(int r=0;r<reps;r++){double t0=now();
    int64_t s=BA_ENTRY(&ctx,cam,11,x,n,&o,&ol);
    double t=now()-t0; if(s){printf("status %ld\n",(long)s);return 1;}
    if(t<best)best=t; if(ctx.used>used)used=ctx.used;
    if(r<reps-1) fsmooth_ctx_reset(&ctx);}
  double sum=0;
  for(int64_t i=0;i<ol;i++){const double*r=o[i].data;for(int64_t j=0;j<o[i].len;j++)sum+=r[j];}
  printf("arrays %ld sum %.17g held %.1f MiB best %.3f ms\n",(long)ol,sum,used/1048576.0,best*1e3);
  return 0;}
