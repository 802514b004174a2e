#!/bin/bash
# The 128-bit ceiling behind benches/README.md's "Why the rest is missed":
# C reference loops for what Cranelift's two-Double vectors can do on this
# machine, against what 256-bit vectors do. Not run by CI.
#
#   benches/ceiling/run.sh [OUT]
#
# - divide: the throughput of `vdivpd` on 128-bit (xmm) and 256-bit (ymm)
#   registers, eight independent chains of divisions;
# - nnmf_scalar: NNMF's objective (examples/nnmf.fsm, m = n = 1000) with
#   glibc's `log`, in the evaluator's order: what `--fp strict` computes;
# - nnmf_sse: the same sum with fdlibm's `log` in SSE2 lanes (the method
#   of src/codegen/lower/vmath.rs), two Doubles per instruction, as
#   `--fp relaxed` computes it; built without and with FMA contraction.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../target/ceiling}
mkdir -p "$out"
gcc -O2 -mavx2 "$here/divide.c" -o "$out/divide"
gcc -O2 "$here/nnmf_scalar.c" -o "$out/nnmf_scalar" -lm
gcc -O2 -mavx "$here/nnmf_sse.c" -o "$out/nnmf_sse" -lm
gcc -O2 -mavx2 -mfma "$here/nnmf_sse.c" -o "$out/nnmf_sse_fma" -lm
for b in divide nnmf_scalar nnmf_sse nnmf_sse_fma; do
  echo "== $b"
  "$out/$b"
done
