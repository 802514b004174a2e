// The 128-bit ceiling (benches/ceiling/run.sh): NNMF's objective with
// glibc's log, one element at a time in order (what --fp strict computes).
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  int n=1000; double *u=malloc(8*n),*v=malloc(8*n),*A=malloc(8*n*n);
  srand(1); for(int i=0;i<n;i++){u[i]=1.5+rand()/(double)RAND_MAX-0.5; v[i]=1.5+rand()/(double)RAND_MAX-0.5;}
  for(int i=0;i<n*n;i++)A[i]=1.5+rand()/(double)RAND_MAX-0.5;
  double best=1e9,res=0;
  for(int rep=0;rep<50;rep++){ double t=now(); double tot=0;
    for(int i=0;i<n;i++){ double s=0; for(int j=0;j<n;j++){ double w=u[i]*v[j]; s+= log(w)+A[i*n+j]/w; } tot+=s; }
    double e=now()-t; if(e<best)best=e; res=tot; }
  printf("C scalar strict: %.3f ms (%.10g)\n", best*1e3,res);
}
