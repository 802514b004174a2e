/* Plain C, no fsmooth: the vector maximum's gradient in two passes (argmax,
 * then a fill) against one (the fill inside the argmax loop), best of 100.
 * Build: gcc -O2 -fno-tree-vectorize fill.c -o fill. See run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
__attribute__((noinline)) void two(const double*v,long n,double*o){double s=v[0];long k=0;for(long i=0;i<n;i++){if(v[i]>s){s=v[i];k=i;}} for(long i=0;i<n;i++)o[i]=0; o[k]=1;}
__attribute__((noinline)) void one(const double*v,long n,double*o){double s=v[0];long k=0;for(long i=0;i<n;i++){o[i]=0;if(v[i]>s){s=v[i];k=i;}} o[k]=1;}
int main(){long n=1000000; double*v=malloc(8*n),*o=malloc(8*n); srand(9); for(int i=0;i<n;i++) v[i]=(double)rand()/RAND_MAX*2-1;
 double b1=1e9,b2=1e9; for(int r=0;r<100;r++){double t=now(); two(v,n,o); t=now()-t; if(t<b1)b1=t; t=now(); one(v,n,o); t=now()-t; if(t<b2)b2=t;}
 printf("two-pass %.3f ms  one-pass %.3f ms\n",b1*1e3,b2*1e3);}
