#!/usr/bin/env python3
"""Prints the benchmark table of benches/README.md (issue 7) as Markdown.

Reads the medians criterion wrote for `cargo bench --bench table`
(target/criterion/<group>/<mode>/<n>/new/{benchmark,estimates}.json),
the compile times, arena sizes and the fastest of repeated single calls
the bench wrote to target/bench-table-extra.json (the single calls for
the JAX comparison, whose figures are the fastest of repeated single
calls; without them, the fastest of criterion's samples, sample.json's
least time per iteration of a batch). Standard library only; CI never runs it.

    cargo bench --bench table -- --warm-up-time 1 --measurement-time 2
    python3 benches/table.py > /tmp/table.md
"""

import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRITERION = os.path.join(ROOT, "target", "criterion")
EXTRA = os.path.join(ROOT, "target", "bench-table-extra.json")

GROUPS = [
    ("dot", "dot-product gradient (∂/∂v1)"),
    ("vmax", "vector-max gradient"),
    ("vadd", "vector-addition Jacobian (∂/∂v1, n×n)"),
    ("smul", "scalar–vector Jacobian (∂/∂s, n×1)"),
    ("nnmf", "NNMF gradient (∂/∂v, m = n)"),
    ("ba", "BA `project` Jacobian (2N×11, ∂/∂cam)"),
    ("gmm_d2_K5", "GMM gradient, 1k/gmm_d2_K5"),
    ("gmm_d10_K25", "GMM gradient, 1k/gmm_d10_K25"),
]
MODES = ["fwd", "fwd-opt", "fwd-vec", "fwd-rows", "rev"]

# JAX jit on CPU, same machine kind (issue 7): (group, n) -> (F ms, J ms).
JAX = {
    ("dot", 1_000_000): (0.58, 0.40),
    ("vmax", 1_000_000): (0.53, 3.39),
    ("nnmf", 1000): (1.64, 3.74),
    ("ba", 100_000): (1.89, 36.1),
    ("gmm_d2_K5", 1000): (0.10, 0.19),
    ("gmm_d10_K25", 1000): (0.69, 2.36),
}


JAX_MEASURED = os.path.join(ROOT, "target", "bench-jax.json")


def jax_figures():
    """The JAX figures: measured here by benches/jax_compare.py when it has
    run, else the issue's published ones. Returns (figures, where from)."""
    if not os.path.exists(JAX_MEASURED):
        return JAX, "the issue's figures (benches/jax_compare.py has not run here)"
    with open(JAX_MEASURED) as f:
        data = json.load(f)
    out = {}
    for (group, n) in JAX:
        r = data["results"].get(f"{group}/{n}")
        if r is not None:
            out[(group, n)] = (round(r["objective_ms"], 3), round(r["gradient_ms"], 3))
    return out, f"measured on this machine by benches/jax_compare.py (JAX {data['jax']})"


def medians(fastest=False):
    """(group, mode, n) -> median in ns, or with `fastest` the least time
    per iteration among criterion's samples (each sample times a batch of
    iterations; the fastest batch is the figure least disturbed by other
    work on the machine, and the one comparable to JAX's minimum)."""
    out = {}
    if not os.path.isdir(CRITERION):
        sys.exit(f"no criterion results under {CRITERION}: run the bench first")
    for dirpath, _, files in os.walk(CRITERION):
        if os.path.basename(dirpath) != "new" or "benchmark.json" not in files:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            b = json.load(f)
        with open(os.path.join(dirpath, "estimates.json")) as f:
            e = json.load(f)
        if b.get("value_str") is None:
            continue
        key = (b["group_id"], b["function_id"], int(b["value_str"]))
        out[key] = e["median"]["point_estimate"]
        sample = os.path.join(dirpath, "sample.json")
        if fastest and os.path.exists(sample):
            with open(sample) as f:
                sm = json.load(f)
            out[key] = min(t / i for t, i in zip(sm["times"], sm["iters"]) if i > 0)
    return out


def extra():
    compile_ms, memory, single = {}, {}, {}
    if os.path.exists(EXTRA):
        with open(EXTRA) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                if r["kind"] == "compile":
                    compile_ms[(r["program"], r["mode"])] = r["ms"]
                elif r["kind"] == "fastest":
                    single[(r["program"], r["mode"], r["n"])] = r["ns"]
                else:
                    memory[(r["program"], r["mode"], r["n"])] = r["arena_bytes"]
    return compile_ms, memory, single


def t(ns):
    if ns is None:
        return "—"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.3g} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.3g} ms"
    return f"{ns / 1e9:.3g} s"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "—"
    r = a / b
    return f"{r:.2g}" if r < 10 else f"{r:.0f}"


def size(n):
    for k, sup in [(6, "⁶"), (5, "⁵"), (4, "⁴"), (3, "³"), (2, "²")]:
        if n == 10**k:
            return f"10{sup}"
    return str(n)


def mb(b):
    if b is None:
        return "—"
    if b < 1 << 20:
        return f"{b / 1024:.0f} KiB"
    return f"{b / (1 << 20):.1f} MiB"


def main():
    m = medians()
    compile_ms, memory, single = extra()
    print("| benchmark | n | objective | fwd | fwd-opt | fwd-vec | fwd-rows | rev | J/F fwd-opt "
          "| J/F rev | hand F | hand J | best ÷ hand J | arena of best |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    best = {}
    for group, title in GROUPS:
        sizes = sorted({n for (g, _, n) in m if g == group})
        for i, n in enumerate(sizes):
            get = lambda mode: m.get((group, mode, n))
            f = get("objective")
            js = {mode: get(mode) for mode in MODES}
            avail = [(v, k) for k, v in js.items() if v is not None]
            b = min(avail) if avail else (None, None)
            best[(group, n)] = (f, b)
            hf, hj = get("hand-objective"), get("hand")
            cells = [
                title if i == 0 else "",
                size(n),
                t(f),
                t(js["fwd"]),
                t(js["fwd-opt"]),
                t(js["fwd-vec"]),
                t(js["fwd-rows"]),
                t(js["rev"]),
                ratio(js["fwd-opt"], f),
                ratio(js["rev"], f),
                t(hf),
                t(hj),
                f"{ratio(b[0], hj)} ({b[1]})" if hj and b[0] else "—",
                f"{mb(memory.get((group, b[1], n)))} ({b[1]})" if b[1] else "—",
            ]
            print("| " + " | ".join(cells) + " |")
    print()
    figures, source = jax_figures()
    print(f"JAX: {source}. Both sides are the fastest of repeated single calls "
          "(fsmooth: the fastest of the single calls the bench times before criterion's "
          "samples, or the fastest sample's mean per call when that is less; the table "
          "above has medians).")
    print()
    fast = medians(fastest=True)
    # The fastest call observed: a sample's mean is never below its
    # fastest call, so the lesser of the two is still one call's time.
    for key, ns in single.items():
        fast[key] = min(ns, fast.get(key, ns))
    for (group, n) in figures:
        f = fast.get((group, "objective", n))
        js = [(fast[(group, mode, n)], mode) for mode in MODES if (group, mode, n) in fast]
        best[(group, n)] = (f, min(js) if js else (None, None))
    print("| JAX target | JAX F | JAX J | fsmooth F | fsmooth J (best mode) "
          "| F ÷ JAX | J ÷ JAX | J/F fsmooth | J/F JAX |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (group, n), (jf, jj) in figures.items():
        f, (j, mode) = best.get((group, n), (None, (None, None)))
        title = dict(GROUPS)[group]
        cells = [
            f"{title}, n = {size(n)}",
            f"{jf} ms",
            f"{jj} ms",
            t(f),
            f"{t(j)} ({mode})" if mode else "—",
            ratio(f, jf * 1e6),
            ratio(j, jj * 1e6),
            ratio(j, f),
            ratio(jj, jf),
        ]
        print("| " + " | ".join(cells) + " |")
    print()
    print("| compile (parse → native code) | objective | fwd | fwd-opt | fwd-vec | fwd-rows | rev |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    programs = []
    for (p, _) in compile_ms:
        if p not in programs:
            programs.append(p)
    for p in programs:
        cells = [p] + [
            f"{compile_ms[(p, mode)]:.0f} ms" if (p, mode) in compile_ms else "—"
            for mode in ["objective"] + MODES
        ]
        print("| " + " | ".join(cells) + " |")
    print()
    print("| arena bytes at the largest n | n | objective | fwd | fwd-opt | fwd-vec | fwd-rows "
          "| rev |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for group, _ in GROUPS:
        ns = [n for (g, _, n) in memory if g == group]
        if not ns:
            continue
        n = max(ns)
        cells = [group, size(n)] + [
            mb(memory.get((group, mode, n)))
            for mode in ["objective"] + MODES
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
