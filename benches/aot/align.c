/* Plain C and x86-64 assembly, no fsmooth: the compiled vector maximum's
 * five-instruction maxsd loop straddling a 32-byte boundary at offset 29
 * (f1, its placement in the compiled object) against gcc's loop of the
 * same chain 32-byte aligned (f2), best of 200 over 10^6 Doubles. Cranelift 0.135 aligns no
 * block on x86-64. Build: gcc -O2 align.c -o align. See run.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
double f1(const double*v,long n);
double f2(const double*v,long n);
__asm__(".text\n.globl f1\n.p2align 5\nf1:\n vmovsd (%rdi),%xmm0\n xor %rax,%rax\n.p2align 5\n .fill 29,1,0x90\n1: vmovsd (%rdi,%rax,8),%xmm1\n add $1,%rax\n vmaxsd %xmm0,%xmm1,%xmm0\n cmp %rsi,%rax\n jl 1b\n ret\n"
        ".globl f2\n.p2align 5\nf2:\n vmovsd (%rdi),%xmm2\n xor %rax,%rax\n.p2align 5\n1: vmovsd (%rdi,%rax,8),%xmm0\n add $1,%rax\n vmaxsd %xmm2,%xmm0,%xmm0\n vmovapd %xmm0,%xmm2\n cmp %rsi,%rax\n jl 1b\n ret\n");
int main(){int n=1000000; double*v=malloc(8*n); srand(9); for(int i=0;i<n;i++) v[i]=(double)rand()/RAND_MAX*2-1;
 double b1=1e9,b2=1e9,r1=0,r2=0; for(int r=0;r<200;r++){double t=now(); r1=f1(v,n); t=now()-t; if(t<b1)b1=t; t=now(); r2=f2(v,n); t=now()-t; if(t<b2)b2=t;}
 printf("f1 %g %.3f ms  f2 %g %.3f ms\n", r1,b1*1e3,r2,b2*1e3);}
