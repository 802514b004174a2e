#!/bin/bash
# AOT drivers behind the A/B figures in benches/README.md and the issue
# notes: each program compiled by `fsmooth compile` into an object file,
# linked with a C loop (best of REPS calls, fsmooth_ctx_reset between
# them). Not run by CI.
#
#   benches/aot/run.sh [FSMOOTH] [OUT]
#
# FSMOOTH: the binary (default target/release/fsmooth; build it first);
# OUT: the directory for objects and drivers (default target/aot). For an
# A/B comparison, run it with two binaries (say, a worktree of the old
# commit built into its own target) and alternate the drivers: the
# machine is shared, so take the best of several rounds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fsm=${1:-$root/target/release/fsmooth}
out=${2:-$root/target/aot}
mkdir -p "$out"
here=$root/benches/aot
ba=$out/ba.fsm
cat "$root/examples/ba_project.fsm" > "$ba"
printf '\nlet projectAll = fun (cam: Vector) (xs: Matrix) ->\n  let ps = build (length xs) (fun i -> project cam xs[i])\n  build (2 * length xs) (fun k -> ps[k / 2][k - 2 * (k / 2)])\n' >> "$ba"
printf 'let f = fun (v: Vector) -> vectorMax v\n' > "$out/vmax.fsm"
build() { # name file entry mode wrt symbol
  "$fsm" compile "$2" --entry "$3" --mode "$4" --wrt "$5" --symbol "$6" \
    -o "$out/$1.o" --header "$out/$1.h"
  gcc -O2 -I"$out" "$here/$1.c" "$out/$1.o" -o "$out/$1" -lm
}
build gmm "$root/examples/adbench/gmm.fsm" gmmObjectiveFlat rev theta gmm_rev
build nnmf "$root/examples/nnmf.fsm" nnmf fwd-opt v nn
build nnmf_rev "$root/examples/nnmf.fsm" nnmf rev v nn
build vmax "$out/vmax.fsm" f fwd-opt v vm
build ba_fwd_vec "$ba" projectAll fwd-vec cam ba_fwd_vec
build ba_fwd_rows "$ba" projectAll fwd-rows cam ba_fwd_rows
build ba_fwd_opt "$ba" projectAll fwd-opt cam ba_fwd_opt
build_objective() { # name file entry symbol
  "$fsm" compile "$2" --entry "$3" --symbol "$4" -o "$out/$1.o" --header "$out/$1.h"
  gcc -O2 -I"$out" "$here/$1.c" "$out/$1.o" -o "$out/$1" -lm
}
build_objective gmm_objective "$root/examples/adbench/gmm.fsm" gmmObjectiveFlat go
build_objective relu "$here/relu.fsm" relu relu
build_objective vmax_objective "$out/vmax.fsm" f vmo
# Plain C, no fsmooth: loop placement, a fused fill, a skipping argmax,
# GMM's loops in their order and reassociated
# (benches/README.md).
gcc -O2 "$here/align.c" -o "$out/align"
gcc -O2 -fno-tree-vectorize "$here/fill.c" -o "$out/fill"
gcc -O2 -fno-tree-vectorize "$here/argmax.c" -o "$out/argmax"
gcc -O2 -fno-tree-vectorize "$here/gmm_order.c" -o "$out/gmm_order"
gcc -O3 -march=native -ffast-math "$here/gmm_order.c" -o "$out/gmm_order_fast"
gmm1k=$root/tests/data/adbench/data/gmm/1k
echo "gmm d10_K25: $("$out/gmm" 200 "$gmm1k/gmm_d10_K25.txt")"
echo "gmm d2_K5:   $("$out/gmm" 1000 "$gmm1k/gmm_d2_K5.txt")"
echo "nnmf:        $("$out/nnmf" 30)"
echo "nnmf rev:    $("$out/nnmf_rev" 10)"
echo "vmax:        $("$out/vmax" 50)"
echo "vmax objective: $("$out/vmax_objective" 200)"
echo "ba fwd-vec:  $("$out/ba_fwd_vec" 10)"
echo "ba fwd-rows: $("$out/ba_fwd_rows" 10)"
echo "ba fwd-opt:  $("$out/ba_fwd_opt" 10)"
echo "gmm objective d10_K25: $("$out/gmm_objective" 200 "$gmm1k/gmm_d10_K25.txt")"
echo "gmm objective d2_K5:   $("$out/gmm_objective" 1000 "$gmm1k/gmm_d2_K5.txt")"
echo "relu:        $("$out/relu" 50)"
echo "align:       $("$out/align")"
echo "fill:        $("$out/fill")"
echo "argmax:      $("$out/argmax")"
echo "gmm order:   $("$out/gmm_order" 200)"
echo "  fast-math: $("$out/gmm_order_fast" 200)"
