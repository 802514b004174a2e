/* Vector maximum (the objective, not its gradient), AOT: n = 10^6 random
 * Doubles, the data of vmax.c. Usage: vmax_objective REPS. See run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "vmax_objective.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){ int n=1000000, reps=argc>1?atoi(argv[1]):50; srand(9);
 double*v=malloc(8*n); for(int i=0;i<n;i++) v[i]=(double)rand()/RAND_MAX;
 fsmooth_ctx ctx=FSMOOTH_CTX_INIT; double m=0, best=1e9;
 for(int r=0;r<reps;r++){double t0=now(); int64_t st=vmo(&ctx,v,n,&m); double t=now()-t0; if(st){printf("status %ld\n",(long)st);return 1;}
  if(t<best)best=t; fsmooth_ctx_reset(&ctx);}
 printf("max %.17g best %.3f ms\n",m,best*1e3); return 0;}
