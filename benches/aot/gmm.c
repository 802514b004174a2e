/* GMM gradient (reverse mode) of examples/adbench/gmm.fsm, AOT: n = 1000
 * random points, d and K from the command line (default 10 25).
 * Usage: gmm REPS [D K]; prints the value, a gradient entry and the best
 * time of REPS calls (the context reset between calls). See run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "gmm.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){
  int reps=argc>1?atoi(argv[1]):200; int d=argc>2?atoi(argv[2]):10, K=argc>3?atoi(argv[3]):25, n=1000;
  int tl=K+K*d+K*(d*(d+1)/2);
  double*theta=malloc(sizeof(double)*tl); srand(1);
  for(int i=0;i<tl;i++) theta[i]=((double)rand()/RAND_MAX-0.5)*0.2;
  fsmooth_array*x=malloc(sizeof(fsmooth_array)*n);
  for(int i=0;i<n;i++){double*r=malloc(sizeof(double)*d);for(int j=0;j<d;j++)r[j]=(double)rand()/RAND_MAX;x[i].data=r;x[i].len=d;}
  fsmooth_ctx ctx=FSMOOTH_CTX_INIT; double v; const double*g; int64_t gl;
  double best=1e9, sum=0;
  for(int r=0;r<reps;r++){double t0=now();
    int64_t s=gmm_rev(&ctx,theta,tl,x,n,1.0,0,&v,&g,&gl);
    double t=now()-t0; if(s){printf("status %ld\n",(long)s);return 1;}
    if(t<best)best=t; sum+=g[3]; fsmooth_ctx_reset(&ctx);}
  printf("value %.17g g0 %.17g best %.3f ms\n",v,g[0],best*1e3);
  return 0;}
