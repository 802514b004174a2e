/* ReLU of 10^6 random-sign Doubles (relu.fsm), AOT: Note [Selects].
 * Usage: relu REPS. See run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "relu.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){ int n=1000000, reps=argc>1?atoi(argv[1]):50; srand(9);
 double*v=malloc(8*n); for(int i=0;i<n;i++) v[i]=(double)rand()/RAND_MAX*2-1;
 fsmooth_ctx ctx=FSMOOTH_CTX_INIT; const double*o; int64_t ol; double best=1e9, s=0;
 for(int r=0;r<reps;r++){double t0=now(); int64_t st=relu(&ctx,v,n,&o,&ol); double t=now()-t0; if(st)return 1; if(t<best)best=t; s=0; for(int i=0;i<n;i++) s+=o[i]; fsmooth_ctx_reset(&ctx);}
 printf("sum %.17g best %.3f ms\n",s,best*1e3); return 0;}
