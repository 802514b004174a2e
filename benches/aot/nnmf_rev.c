/* NNMF's reverse-mode gradient, AOT: nnmf.c with NNMF_REV. See run.sh. */
#define NNMF_REV 1
#include "nnmf.c"
