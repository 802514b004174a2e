// The 128-bit ceiling (benches/ceiling/run.sh): the throughput of vdivpd
// on xmm and on ymm registers, eight independent chains of divisions.
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(){
  __m128d a[8]; for(int i=0;i<8;i++)a[i]=_mm_set1_pd(1.0+i*0.1);
  __m128d d=_mm_set1_pd(1.0000001);
  long N=100000000; double t=now();
  for(long i=0;i<N;i++){ for(int k=0;k<8;k++) a[k]=_mm_div_pd(a[k],d); __asm__ volatile(""::"x"(a[0]),"x"(a[1]),"x"(a[2]),"x"(a[3]),"x"(a[4]),"x"(a[5]),"x"(a[6]),"x"(a[7])); }
  double e=now()-t; printf("xmm div: %.3f ns per divpd\n", e/N/8*1e9);
  __m256d b[8]; for(int i=0;i<8;i++)b[i]=_mm256_set1_pd(1.0+i*0.1);
  __m256d d2=_mm256_set1_pd(1.0000001);
  t=now();
  for(long i=0;i<N;i++){ for(int k=0;k<8;k++) b[k]=_mm256_div_pd(b[k],d2); __asm__ volatile(""::"x"(b[0]),"x"(b[1]),"x"(b[2]),"x"(b[3]),"x"(b[4]),"x"(b[5]),"x"(b[6]),"x"(b[7])); }
  e=now()-t; printf("ymm div: %.3f ns per divpd\n", e/N/8*1e9);
  double s=0; for(int k=0;k<8;k++) s+=a[k][0]+b[k][0]; printf("%g\n",s);
}
