/* GMM objective (examples/adbench/gmm.fsm, gmmObjectiveFlat), AOT: reads an
 * ADBench input file like gmm.c. Usage: gmm_objective REPS FILE. See run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "gmm_objective.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(int argc,char**argv){int reps=atoi(argv[1]); FILE*f=fopen(argv[2],"r"); int d,k,n; if(fscanf(f,"%d %d %d",&d,&k,&n)!=3)return 1;
 int T=d*(d+1)/2; int P=k*(1+d+T); double*th=malloc(8*P); double*al=th,*me=th+k,*ic=th+k+k*d;
 for(int c=0;c<k;c++) if(fscanf(f,"%lf",&al[c])!=1) return 1;
 for(int c=0;c<k;c++) for(int j=0;j<d;j++) if(fscanf(f,"%lf",&me[c*d+j])!=1) return 1;
 for(int c=0;c<k;c++) for(int j=0;j<T;j++) if(fscanf(f,"%lf",&ic[c*T+j])!=1) return 1;
 fsmooth_array*x=malloc(sizeof(fsmooth_array)*n); for(int i=0;i<n;i++){double*r=malloc(8*d); for(int j=0;j<d;j++) if(fscanf(f,"%lf",&r[j])!=1) return 1; x[i].data=r; x[i].len=d;}
 double g; int m; if(fscanf(f,"%lf %d",&g,&m)!=2) return 1;
 fsmooth_ctx ctx=FSMOOTH_CTX_INIT; double v=0,best=1e9;
 for(int r=0;r<reps;r++){double t0=now(); int64_t s=go(&ctx,th,P,x,n,g,m,&v); double t=now()-t0; if(s){printf("status %ld\n",(long)s);return 1;} if(t<best)best=t; fsmooth_ctx_reset(&ctx);}
 printf("value %.17g best %.3f ms\n",v,best*1e3); return 0;}
