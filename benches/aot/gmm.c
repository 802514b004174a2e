/* GMM gradient (reverse mode) of examples/adbench/gmm.fsm, AOT: n = 1000
 * random points, d and K from the command line (default 10 25), or an
 * ADBench GMM input file (d, K, n, the parameters, the points, gamma, m).
 * Usage: gmm REPS [D K | FILE]; prints the value, a gradient entry and
 * the best time of REPS calls (the context reset between calls). See
 * run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "gmm.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static double num(FILE*f){double v; if(fscanf(f,"%lf",&v)!=1){fprintf(stderr,"bad input\n");exit(2);} return v;}
int main(int argc,char**argv){
  int reps=argc>1?atoi(argv[1]):200; int d=10, K=25, n=1000; double gamma=1.0; long m=0;
  FILE*f=argc==3?fopen(argv[2],"r"):NULL;
  if(argc==3&&!f){fprintf(stderr,"cannot open %s\n",argv[2]);return 2;}
  if(f){d=(int)num(f);K=(int)num(f);n=(int)num(f);}
  else if(argc>3){d=atoi(argv[2]);K=atoi(argv[3]);}
  int tl=K+K*d+K*(d*(d+1)/2);
  double*theta=malloc(sizeof(double)*tl); srand(1);
  for(int i=0;i<tl;i++) theta[i]=f?num(f):((double)rand()/RAND_MAX-0.5)*0.2;
  fsmooth_array*x=malloc(sizeof(fsmooth_array)*n);
  for(int i=0;i<n;i++){double*r=malloc(sizeof(double)*d);for(int j=0;j<d;j++)r[j]=f?num(f):(double)rand()/RAND_MAX;x[i].data=r;x[i].len=d;}
  if(f){gamma=num(f);m=(long)num(f);fclose(f);}
  fsmooth_ctx ctx=FSMOOTH_CTX_INIT; double v; const double*g; int64_t gl;
  double best=1e9, sum=0;
  for(int r=0;r<reps;r++){double t0=now();
    int64_t s=gmm_rev(&ctx,theta,tl,x,n,gamma,m,&v,&g,&gl);
    double t=now()-t0; if(s){printf("status %ld\n",(long)s);return 1;}
    if(t<best)best=t; sum+=g[3]; fsmooth_ctx_reset(&ctx);}
  printf("value %.17g g0 %.17g best %.3f ms\n",v,g[0],best*1e3);
  return 0;}
