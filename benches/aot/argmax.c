/* Plain C, no fsmooth: the argmax of 10^6 random Doubles three ways, the
 * reference for Note [Skipping folds] (src/codegen/skip.rs). `one`: one
 * test and branch per element, as the fold is written; `skip4`: four
 * elements' tests against the current maximum in two pairs of SSE2
 * lanes, one branch, the four elements one by one only when a lane says
 * the maximum changes (what the lowering emits); `skip4-scalar`: the
 * same with four scalar comparisons. Best of 60 calls each. See run.sh. */
#include <emmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
__attribute__((noinline)) static long one(const double*v,long n){
  double s=v[0]; long k=0;
  for(long i=0;i<n;i++) if(v[i]>s){s=v[i];k=i;}
  return k;}
__attribute__((noinline)) static long skip4(const double*v,long n){
  double s=v[0]; long k=0, i=0;
  for(;i+3<n;i+=4){
    __m128d m=_mm_set1_pd(s);
    __m128d c=_mm_or_pd(_mm_cmplt_pd(m,_mm_loadu_pd(v+i)),_mm_cmplt_pd(m,_mm_loadu_pd(v+i+2)));
    if(_mm_movemask_pd(c)) for(long j=i;j<i+4;j++) if(v[j]>s){s=v[j];k=j;}}
  for(;i<n;i++) if(v[i]>s){s=v[i];k=i;}
  return k;}
__attribute__((noinline)) static long skip4_scalar(const double*v,long n){
  double s=v[0]; long k=0, i=0;
  for(;i+3<n;i+=4)
    if((v[i]>s)|(v[i+1]>s)|(v[i+2]>s)|(v[i+3]>s)) for(long j=i;j<i+4;j++) if(v[j]>s){s=v[j];k=j;}
  for(;i<n;i++) if(v[i]>s){s=v[i];k=i;}
  return k;}
typedef long (*argmax)(const double*,long);
static double best(argmax f,const double*v,long n,long*k){
  double b=1e9; for(int r=0;r<60;r++){double t0=now(); *k=f(v,n); double t=now()-t0; if(t<b)b=t;} return b*1e3;}
int main(void){
  long n=1000000; srand(9); double*v=malloc(8*n);
  for(long i=0;i<n;i++) v[i]=(double)rand()/RAND_MAX;
  long k1,k2,k3; double t1=best(one,v,n,&k1), t2=best(skip4,v,n,&k2), t3=best(skip4_scalar,v,n,&k3);
  printf("one %.3f ms  skip4 %.3f ms  skip4-scalar %.3f ms (argmax %ld %ld %ld)\n",t1,t2,t3,k1,k2,k3);
  return 0;}
