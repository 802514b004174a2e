#!/usr/bin/env python3
"""Dense-array speed against JAX in one command (issue "Dense array code at
machine speed"): GMM's objective and gradient on ADBench's 1k files, NNMF's
objective and gradient (m = n = 1000) and the Jacobian of BA's `project`
over N = 10^5 points, fsmooth and JAX measured in the same run, each with
one thread and with two. Writes the table between the markers
`dense:begin` and `dense:end` of benches/README.md, with the load average
before and after.

    cargo build --release
    python3 -m venv /tmp/jax && /tmp/jax/bin/pip install jax
    /tmp/jax/bin/python benches/dense.py [--repeat 100] [--rounds 3]

fsmooth (release binary, `--engine native`):
  - GMM: `adbench gmm FILE --mode rev --repeat N` (objective and gradient,
    the fastest call of each), and with `--batched` (the data term for all
    points at once, examples/adbench/gmm.fsm's `batchedDataTerm`: the same
    bits, checked; its rows are compared with the same JAX figures);
  - NNMF: `run examples/nnmf.fsm --entry nnmf --repeat N` (objective) and
    `grad … --wrt v --mode fwd-opt --repeat N` (gradient);
  - BA: `jacobian … --entry projectAll --wrt cam --mode fwd-rows --repeat N`.
  `--repeat` times compiled code on arguments converted once (the
  derivative program alone for `grad`, `jacobian` and, since 2026-11-28
  21:00, `adbench gmm`; before, `adbench gmm` also converted every point
  per call).
  One thread is measured under the default strict contract and under
  `--fp relaxed` (spec/semantics.md §7: innermost sums and `log`/`exp` in
  SIMD lanes, Note [Lane sums]); two threads is `--fp relaxed --threads 2`
  (builds of the entry's own block and folds that only add to their state
  run on both cores).
JAX (`jit`, float64, its arguments on the device once, the fastest of N
calls after a warm-up, with `block_until_ready`): one thread is `taskset -c 0` with XLA's Eigen pool off
(`--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`); two
threads is the default on this 2-core machine. The BA Jacobian is
`jacfwd` (11 directions).

Before timing, JAX's values are checked against fsmooth's (ρ ≤ 1e-9), so
both time the same functions on the same inputs. Rounds alternate the
tools and each figure is the fastest over the rounds. JAX is optional (CI
never runs this): without it the JAX columns say so.
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "adbench", "data", "gmm", "1k"))
FSMOOTH = os.path.join(ROOT, "target", "release", "fsmooth")
README = os.path.join(ROOT, "benches", "README.md")
FILES = ["d2_K5", "d2_K200", "d10_K25", "d20_K5", "d32_K5", "d64_K10"]
NNMF_M = 1000
BA_N = 100_000
CAM = [0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002]
# fsmooth's configurations: one thread strict, one thread relaxed, two
# threads relaxed.
CONFIGS = {"strict1": [], "relaxed1": ["--fp", "relaxed"],
           "relaxed2": ["--fp", "relaxed", "--threads", "2"]}


def rho(x, y):
    return abs(x - y) / max(1.0, abs(x) + abs(y))


def inputs(tmp):
    """The NNMF and BA inputs, as JSON files both tools read."""
    rnd = random.Random(33)
    u = [1.5 + rnd.uniform(-1, 1) for _ in range(NNMF_M)]
    v = [1.5 + rnd.uniform(-1, 1) for _ in range(NNMF_M)]
    a = [[1.5 + rnd.uniform(-1, 1) for _ in range(NNMF_M)] for _ in range(NNMF_M)]
    xs = [[rnd.uniform(-1, 1) for _ in range(3)] for _ in range(BA_N)]
    nnmf, ba = os.path.join(tmp, "nnmf.json"), os.path.join(tmp, "ba.json")
    with open(nnmf, "w") as fh:
        json.dump({"u": u, "v": v, "a": a}, fh)
    with open(ba, "w") as fh:
        json.dump({"cam": CAM, "xs": xs}, fh)
    program = os.path.join(tmp, "ba.fsm")
    with open(os.path.join(ROOT, "examples", "ba_project.fsm")) as src, open(program, "w") as dst:
        dst.write(src.read())
        dst.write("\nlet projectAll = fun (cam: Vector) (xs: Matrix) ->\n"
                  "  let ps = build (length xs) (fun i -> project cam xs[i])\n"
                  "  build (2 * length xs) (fun k -> ps[k / 2][k - 2 * (k / 2)])\n")
    return {"nnmf": nnmf, "ba": ba, "ba_fsm": program}


def synthetic_gmm(tmp, name):
    """An ADBench-format GMM input of the shape `name` (dD_KK, n = 1000) for
    the sizes this snapshot of ADBench's data lacks: drawn the way
    GradBench's gmm eval draws its inputs (α, q, l and x standard normal,
    μ uniform on [0, 1); γ = 1, m = 0), from a fixed seed, written with six
    decimals as ADBench's files are. Both tools read the same file."""
    d, k = (int(t) for t in re.fullmatch(r"d(\d+)_K(\d+)", name).groups())
    n = 1000
    rnd = random.Random(31337 + 1000 * d + k)
    fmt = lambda xs: " ".join(f"{x:.6f}" for x in xs)
    lines = [f"{d} {k} {n}"]
    lines += [fmt([rnd.gauss(0, 1)]) for _ in range(k)]
    lines += [fmt([rnd.random() for _ in range(d)]) for _ in range(k)]
    lines += [fmt([rnd.gauss(0, 1) for _ in range(d * (d + 1) // 2)]) for _ in range(k)]
    lines += [fmt([rnd.gauss(0, 1) for _ in range(d)]) for _ in range(n)]
    lines.append("1.000000 0")
    path = os.path.join(tmp, f"gmm_{name}.txt")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def fsm(args):
    p = subprocess.run([FSMOOTH] + args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"fsmooth {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout, p.stderr


def repeat_ms(stderr):
    for line in stderr.splitlines():
        if line.startswith("{") and "min_ms" in line:
            return json.loads(line)["min_ms"]
    sys.exit(f"no --repeat line in {stderr!r}")


def fsmooth_all(names, files, repeat, config):
    extra = CONFIGS[config]
    out = {}
    for name in names:
        path = files["gmm"][name]
        # The pointwise program, and the batched data term (the same bits).
        for key, batched in ((name, []), (f"{name}/batched", ["--batched"])):
            stdout, _ = fsm(["adbench", "gmm", path, "--mode", "rev", "--engine", "native",
                             "--repeat", str(repeat)] + batched + extra)
            j = json.loads(stdout)
            t = j["timings"]
            out[key] = {"value": j["objective"], "f_ms": t["objective_ms"],
                        "j_ms": t["gradient_ms"]}
    nnmf = os.path.join(ROOT, "examples", "nnmf.fsm")
    stdout, err = fsm(["run", nnmf, "--entry", "nnmf", "--input-file", files["nnmf"],
                       "--engine", "native", "--repeat", str(repeat)] + extra)
    f_ms, value = repeat_ms(err), json.loads(stdout)
    _, err = fsm(["grad", nnmf, "--entry", "nnmf", "--wrt", "v", "--mode", "fwd-opt",
                  "--input-file", files["nnmf"], "--engine", "native", "--no-gate",
                  "--repeat", str(repeat)] + extra)
    out["nnmf"] = {"value": value, "f_ms": f_ms, "j_ms": repeat_ms(err)}
    stdout, err = fsm(["jacobian", files["ba_fsm"], "--entry", "projectAll", "--wrt", "cam",
                       "--mode", "fwd-rows", "--input-file", files["ba"], "--engine", "native",
                       "--no-gate", "--repeat", str(max(3, repeat // 10))] + extra)
    jac = json.loads(stdout)["jacobian"]
    out["ba"] = {"value": jac[0][6], "f_ms": None, "j_ms": repeat_ms(err)}
    return out


def jax_worker(names, files, repeat):
    """Times JAX on every workload in this process (its threads set by the
    caller) and prints one JSON object."""
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jax_models

    def best(fn, *args):
        # On the device once, as a JAX user's arrays are: a NumPy argument
        # would be copied in on every call.
        return jax_models.best_time(fn, tuple(jax.device_put(a) for a in args), repeat)

    results = {}
    for name in names:
        theta, x, d, k, n, gamma, wm = jax_models.read_gmm(files["gmm"][name])
        gmm = jax_models.gmm(d, k, n, gamma, wm)
        f = jax.jit(gmm)
        g = jax.jit(jax.grad(gmm))
        results[name] = {"value": float(f(theta, x)), "f_ms": best(f, theta, x),
                         "j_ms": best(g, theta, x)}

    with open(files["nnmf"]) as fh:
        j = json.load(fh)
    u, v, a = np.array(j["u"]), np.array(j["v"]), np.array(j["a"])

    f = jax.jit(jax_models.nnmf)
    g = jax.jit(jax.grad(jax_models.nnmf, argnums=1))
    results["nnmf"] = {"value": float(f(u, v, a)), "f_ms": best(f, u, v, a),
                       "j_ms": best(g, u, v, a)}

    with open(files["ba"]) as fh:
        j = json.load(fh)
    cam, xs = np.array(j["cam"]), np.array(j["xs"])

    # `jacfwd`: 11 directions (`jacrev` would pull back 2N cotangents).
    jf = jax.jit(jax.jacfwd(jax_models.project_all, argnums=0))
    value = float(np.asarray(jf(cam, xs))[0, 6])
    results["ba"] = {"value": value, "f_ms": None, "j_ms": best(jf, cam, xs)}
    print(json.dumps({"jax": jax.__version__, "results": results}))


def run_jax(names, files, repeat, threads):
    env = dict(os.environ)
    cmd = [sys.executable, os.path.abspath(__file__), "--jax-worker", ",".join(names),
           "--files-json", json.dumps(files), "--repeat", str(repeat)]
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        cmd = ["taskset", "-c", "0"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def cell(ms):
    return "—" if ms is None else (f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms")


def fastest(old, new):
    if old is None:
        return new
    out = {}
    for k in new:
        if k.endswith("_ms") and old.get(k) is not None and new[k] is not None:
            out[k] = min(old[k], new[k])
        else:
            out[k] = new[k]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--jax-worker")
    ap.add_argument("--files-json")
    ap.add_argument("--no-write", action="store_true")
    o = ap.parse_args()
    if o.jax_worker is not None:
        jax_worker([n for n in o.jax_worker.split(",") if n], json.loads(o.files_json), o.repeat)
        return
    if not os.path.exists(FSMOOTH):
        sys.exit(f"{FSMOOTH}: missing (cargo build --release)")
    tmp = tempfile.mkdtemp(prefix="fsmooth-dense-")
    files = inputs(tmp)
    names = [n for n in o.files.split(",") if n]
    synthetic = [n for n in names if not os.path.exists(os.path.join(DATA, f"gmm_{n}.txt"))]
    files["gmm"] = {n: synthetic_gmm(tmp, n) if n in synthetic
                    else os.path.join(DATA, f"gmm_{n}.txt") for n in names}
    load_before = os.getloadavg()
    ours = {c: {} for c in CONFIGS}
    theirs = {1: {}, 2: {}}
    why = {}
    version = "(not installed)"
    for _ in range(o.rounds):
        for config in CONFIGS:
            for k, v in fsmooth_all(names, files, o.repeat, config).items():
                ours[config][k] = fastest(ours[config].get(k), v)
        for threads in (1, 2):
            got, err = run_jax(names, files, o.repeat, threads)
            if got is None:
                why[threads] = err
                continue
            version = got["jax"]
            for k, v in got["results"].items():
                theirs[threads][k] = fastest(theirs[threads].get(k), v)
    load_after = os.getloadavg()
    for config in ("relaxed1", "relaxed2"):
        for k, r in ours[config].items():
            f = ours["strict1"][k]
            if rho(r["value"], f["value"]) > 1e-9:
                sys.exit(f"{k}: {config}'s value {r['value']} is not strict's {f['value']}")
    for threads in (1, 2):
        for k, j in theirs[threads].items():
            f = ours["strict1"][k]
            if rho(j["value"], f["value"]) > 1e-9:
                sys.exit(f"{k}: JAX's value {j['value']} is not fsmooth's {f['value']}")

    # The batched program returns the pointwise one's bits under the strict
    # contract; under the relaxed one its products are fused (Note [Row
    # kernels]), within the contract's bound.
    for config in CONFIGS:
        for n in names:
            b, p = ours[config][f"{n}/batched"]["value"], ours[config][n]["value"]
            if (b != p) if config == "strict1" else rho(b, p) > 1e-9:
                sys.exit(f"{n}: the batched program's value is not the pointwise one's ({config})")

    def row(label, key, what):
        s1, r1 = ours["strict1"][key][what], ours["relaxed1"][key][what]
        r2 = ours["relaxed2"][key][what]
        peer = key.split("/")[0]
        j1 = theirs[1].get(peer, {}).get(what)
        j2 = theirs[2].get(peer, {}).get(what)
        ratio = lambda a, b: "—" if a is None or b is None else f"{a / b:.2f}"
        return (f"| {label} | {cell(s1)} | {cell(r1)} | {cell(j1)} | {ratio(s1, j1)} | "
                f"{ratio(r1, j1)} | {cell(r2)} | {cell(j2)} | {ratio(r2, j2)} |")

    lines = [
        f"`python3 benches/dense.py --repeat {o.repeat} --rounds {o.rounds}`, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; JAX {version}. "
        "Fastest call of each over the rounds; the ratio is fsmooth's time over "
        "JAX's at the same thread count (below 1: fsmooth is faster), for "
        "fsmooth's strict and relaxed contracts on one thread; its two threads are "
        "`--fp relaxed --threads 2`.",
        "",
        "| workload | fsmooth strict, 1 thread | fsmooth relaxed, 1 thread | JAX, 1 thread "
        "| ratio strict | ratio relaxed | fsmooth relaxed, 2 threads | JAX, 2 threads | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n in names:
        lines.append(row(f"GMM {n} objective", n, "f_ms"))
        lines.append(row(f"GMM {n} objective, batched", f"{n}/batched", "f_ms"))
        lines.append(row(f"GMM {n} gradient", n, "j_ms"))
        lines.append(row(f"GMM {n} gradient, batched", f"{n}/batched", "j_ms"))
    lines.append(row("NNMF objective, m = n = 1000", "nnmf", "f_ms"))
    lines.append(row("NNMF gradient (`fwd-opt`)", "nnmf", "j_ms"))
    lines.append(row("BA `project` Jacobian, N = 10⁵ (`fwd-rows`)", "ba", "j_ms"))
    lines += ["", "GMM J/F (gradient over objective):", "",
              "| file | fsmooth strict, 1 thread | fsmooth relaxed, 1 thread "
              "| fsmooth relaxed, 2 threads | JAX, 1 thread | JAX, 2 threads |",
              "| --- | --- | --- | --- | --- | --- |"]
    for n in names:
        jf = lambda d: "—" if not d else f"{d['j_ms'] / d['f_ms']:.2f}"
        for key, label in ((n, n), (f"{n}/batched", f"{n}, batched")):
            lines.append(f"| {label} | {jf(ours['strict1'][key])} | "
                         f"{jf(ours['relaxed1'][key])} | {jf(ours['relaxed2'][key])} | "
                         f"{jf(theirs[1].get(n))} | {jf(theirs[2].get(n))} |")
    if synthetic:
        lines += ["", "Not in this snapshot of ADBench's data, so generated (`synthetic_gmm` in "
                  "benches/dense.py: ADBench's format and shape, n = 1000, drawn as GradBench's "
                  "gmm eval draws its inputs, fixed seed): "
                  + ", ".join(f"gmm_{m}.txt" for m in synthetic) + "."]
    for threads, err in why.items():
        lines += ["", f"JAX ({threads} thread(s)): {err}"]
    table = "\n".join(lines)
    print(table)
    if o.no_write:
        return
    text = open(README).read()
    begin, end = "<!-- dense:begin -->", "<!-- dense:end -->"
    if begin in text:
        pre, rest = text.split(begin, 1)
        post = rest.split(end, 1)[1]
        text = pre + begin + "\n" + table + "\n" + end + post
    else:
        text += ("\n## Dense arrays against JAX (issue 33)\n\n" + begin + "\n" + table + "\n" + end + "\n")
    open(README, "w").write(text)


if __name__ == "__main__":
    main()
