/* NNMF gradient (optimised forward mode, d/dv) of examples/nnmf.fsm, AOT:
 * m = n = 1000, random inputs. Usage: nnmf REPS. See run.sh. With
 * NNMF_REV defined (nnmf_rev.c), the reverse-mode program, which also
 * returns the value. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef NNMF_REV
#include "nnmf_rev.h"
#else
#include "nnmf.h"
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){
  int n=1000; int reps=argc>1?atoi(argv[1]):50; srand(5);
  double*u=malloc(8*n),*v=malloc(8*n); for(int i=0;i<n;i++){u[i]=0.5+(double)rand()/RAND_MAX; v[i]=0.5+(double)rand()/RAND_MAX;}
  fsmooth_array*a=malloc(sizeof(fsmooth_array)*n);
  for(int i=0;i<n;i++){double*r=malloc(8*n);for(int j=0;j<n;j++)r[j]=(double)rand()/RAND_MAX;a[i].data=r;a[i].len=n;}
  fsmooth_ctx ctx=FSMOOTH_CTX_INIT; const double*o; int64_t ol; double best=1e9;
  for(int r=0;r<reps;r++){double t0=now();
#ifdef NNMF_REV
    double val; int64_t s=nn(&ctx,u,n,v,n,a,n,&val,&o,&ol);
#else
    int64_t s=nn(&ctx,u,n,v,n,a,n,&o,&ol);
#endif
    double t=now()-t0;
    if(s){printf("status %ld\n",(long)s);return 1;} if(t<best)best=t; if(r<reps-1)fsmooth_ctx_reset(&ctx);}
  printf("g0 %.17g g9 %.17g best %.3f ms\n",o[0],o[9],best*1e3); return 0;}
