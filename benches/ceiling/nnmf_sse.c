// The 128-bit ceiling (benches/ceiling/run.sh): NNMF's objective,
// sum of log(u_i v_j) + a_ij / (u_i v_j), with fdlibm's log in SSE2 lanes
// (two Doubles per instruction; the method of src/codegen/lower/vmath.rs),
// best of 50 calls. Built with and without FMA contraction.
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define C(x) _mm_set1_pd(x)
#define CI(x) _mm_set1_epi64x(x)
static inline __m128d vlog(__m128d x){
  __m128i xi=_mm_castpd_si128(x);
  __m128i u=_mm_add_epi64(xi,CI(0x3FF0000000000000ULL-0x3FE6A09E00000000ULL));
  __m128i e=_mm_or_si128(_mm_srli_epi64(u,52),CI(0x4330000000000000ULL));
  __m128d k=_mm_sub_pd(_mm_castsi128_pd(e),C(4503599627370496.0+1023.0));
  __m128i m=_mm_add_epi64(_mm_and_si128(u,CI((1ULL<<52)-1)),CI(0x3FE6A09E00000000ULL));
  __m128d f=_mm_sub_pd(_mm_castsi128_pd(m),C(1.0));
  __m128d hfsq=_mm_mul_pd(_mm_mul_pd(C(0.5),f),f);
  __m128d s=_mm_div_pd(f,_mm_add_pd(C(2.0),f));
  __m128d z=_mm_mul_pd(s,s), w=_mm_mul_pd(z,z);
  __m128d t1=_mm_mul_pd(w,_mm_add_pd(C(3.999999999940941908e-01),_mm_mul_pd(w,_mm_add_pd(C(2.222219843214978396e-01),_mm_mul_pd(w,C(1.531383769920937332e-01))))));
  __m128d t2=_mm_mul_pd(z,_mm_add_pd(C(6.666666666666735130e-01),_mm_mul_pd(w,_mm_add_pd(C(2.857142874366239149e-01),_mm_mul_pd(w,_mm_add_pd(C(1.818357216161805012e-01),_mm_mul_pd(w,C(1.479819860511658591e-01))))))));
  __m128d r=_mm_add_pd(t2,t1);
  __m128d a=_mm_mul_pd(s,_mm_add_pd(hfsq,r));
  a=_mm_add_pd(a,_mm_mul_pd(k,C(1.90821492927058770002e-10)));
  a=_mm_sub_pd(a,hfsq); a=_mm_add_pd(a,f);
  return _mm_add_pd(a,_mm_mul_pd(k,C(6.93147180369123816490e-01)));
}
int main(){
  int n=1000; double *u=malloc(8*n),*v=malloc(8*n),*A=malloc(8*n*n);
  srand(1); for(int i=0;i<n;i++){u[i]=1.5+rand()/(double)RAND_MAX-0.5; v[i]=1.5+rand()/(double)RAND_MAX-0.5;}
  for(int i=0;i<n*n;i++)A[i]=1.5+rand()/(double)RAND_MAX-0.5;
  double best=1e9, res=0;
  for(int rep=0;rep<50;rep++){
    double t=now(); double tot=0;
    for(int i=0;i<n;i++){ __m128d acc=_mm_set1_pd(-0.0); __m128d ui=_mm_set1_pd(u[i]); int bad=0;
      for(int j=0;j+1<n;j+=2){ __m128d w=_mm_mul_pd(ui,_mm_loadu_pd(v+j));
        __m128d ok=_mm_and_pd(_mm_cmpge_pd(w,C(2.2250738585072014e-308)),_mm_cmplt_pd(w,C(INFINITY)));
        bad|= _mm_movemask_pd(ok)!=3;
        acc=_mm_add_pd(acc,_mm_add_pd(vlog(w),_mm_div_pd(_mm_loadu_pd(A+i*n+j),w))); }
      tot+=acc[0]+acc[1]+bad; }
    double e=now()-t; if(e<best)best=e; res=tot; }
  printf("C sse: %.3f ms (%.10g)\n", best*1e3, res);
}
