#!/usr/bin/env python3
"""Dense-array speed against JAX in one command (issue "Dense array code at
machine speed"): GMM's objective and gradient on ADBench's 1k files, fsmooth
(`adbench gmm --mode rev --engine native --repeat N`, the fastest call) and
JAX (`jit`, `jax.grad`, float64, the fastest of N calls after a warm-up,
with `block_until_ready`) with one thread and with every thread, measured
in the same run. Writes the table between the markers `dense:begin` and
`dense:end` of benches/README.md, with the load average before and after.

    cargo build --release
    python3 -m venv /tmp/jax && /tmp/jax/bin/pip install jax
    /tmp/jax/bin/python benches/dense.py [--repeat 100] [--files d2_K5,…]

JAX is optional (CI never runs this): without it the JAX columns say so.
JAX's thread count: one thread is `taskset -c 0` with XLA's Eigen pool
off (`--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`);
all threads is the default on every core. fsmooth runs on one thread.
Before timing, JAX's objective is checked against fsmooth's (ρ ≤ 1e-9), so
both time the same function.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "adbench", "data", "gmm", "1k"))
FSMOOTH = os.path.join(ROOT, "target", "release", "fsmooth")
README = os.path.join(ROOT, "benches", "README.md")
FILES = ["d2_K5", "d2_K200", "d10_K25", "d20_K5", "d32_K5", "d64_K10"]


def rho(x, y):
    return abs(x - y) / max(1.0, abs(x) + abs(y))


def fsmooth_gmm(name, repeat):
    path = os.path.join(DATA, f"gmm_{name}.txt")
    out = subprocess.run(
        [FSMOOTH, "adbench", "gmm", path, "--mode", "rev", "--engine", "native",
         "--repeat", str(repeat)],
        check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    t = j["timings"]
    return {"objective": j["objective"], "f_ms": t["objective_ms"], "j_ms": t["gradient_ms"]}


def jax_worker(names, repeat):
    """Times JAX on `names` in this process (its threads set by the caller)
    and prints one JSON object."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    results = {}
    for name in names:
        with open(os.path.join(DATA, f"gmm_{name}.txt")) as fh:
            toks = fh.read().split()
        d, k, n = int(toks[0]), int(toks[1]), int(toks[2])
        t = d * (d + 1) // 2
        vals = [float(x) for x in toks[3:]]
        pos = 0

        def take(count):
            nonlocal pos
            out = vals[pos:pos + count]
            pos += count
            return out

        alphas, means, icf = take(k), take(k * d), take(k * t)
        rest = len(vals) - pos - 2
        x = take(n * d) if rest >= n * d else take(d) * n
        gamma, wm = float(vals[pos]), int(vals[pos + 1])
        theta = np.array(alphas + means + icf)
        x = np.array(x).reshape(n, d)
        rows, cols = [], []
        for s in range(d):
            for r in range(s + 1, d):
                rows.append(r)
                cols.append(s)
        rows, cols = np.array(rows, dtype=int), np.array(cols, dtype=int)

        def gmm(theta, x, d=d, k=k, n=n, rows=rows, cols=cols, gamma=gamma, wm=wm):
            a = theta[:k]
            mu = theta[k:k + k * d].reshape(k, d)
            ic = theta[k + k * d:].reshape(k, t)
            qd = jnp.exp(ic[:, :d])
            sum_qs = jnp.sum(ic[:, :d], axis=1)
            ls = jnp.zeros((k, d, d)).at[:, rows, cols].set(ic[:, d:])
            xc = x[:, None, :] - mu[None, :, :]
            lx = qd[None] * xc + jnp.einsum("krs,nks->nkr", ls, xc)
            inner = a[None] + sum_qs[None] - 0.5 * jnp.sum(lx * lx, axis=2)
            lse = jax.scipy.special.logsumexp
            prior = (0.5 * gamma * gamma * (jnp.sum(qd * qd) + jnp.sum(ic[:, d:] ** 2))
                     - wm * jnp.sum(sum_qs))
            # gmm.fsm's constants: ADBench's π in log(2π), and k times the
            # Wishart normalising constant (C's lgamma for log Γ).
            const = -n * d * 0.5 * math.log(2 * 3.14159265359)
            big_n = d + wm + 1
            wishart = big_n * d * (math.log(gamma) - 0.5 * math.log(2.0)) - (
                0.25 * d * (d - 1) * math.log(3.14159265359)
                + sum(math.lgamma((big_n - j) / 2) for j in range(d)))
            return const + jnp.sum(lse(inner, axis=1)) - n * lse(a) + prior - k * wishart

        f = jax.jit(gmm)
        g = jax.jit(jax.grad(gmm))

        def best(fn):
            jax.block_until_ready(fn(theta, x))
            b = math.inf
            for _ in range(repeat):
                s = time.perf_counter()
                jax.block_until_ready(fn(theta, x))
                b = min(b, time.perf_counter() - s)
            return b * 1e3

        results[name] = {"objective": float(f(theta, x)), "f_ms": best(f), "j_ms": best(g)}
    print(json.dumps({"jax": jax.__version__, "results": results}))


def run_jax(names, repeat, threads):
    env = dict(os.environ)
    cmd = [sys.executable, os.path.abspath(__file__), "--jax-worker", ",".join(names),
           "--repeat", str(repeat)]
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        cmd = ["taskset", "-c", "0"] + cmd
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"
    return json.loads(p.stdout.strip().splitlines()[-1]), None


def cell(ms):
    return "—" if ms is None else (f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--jax-worker")
    ap.add_argument("--no-write", action="store_true")
    o = ap.parse_args()
    if o.jax_worker:
        jax_worker(o.jax_worker.split(","), o.repeat)
        return
    names = []
    missing = []
    for n in o.files.split(","):
        (names if os.path.exists(os.path.join(DATA, f"gmm_{n}.txt")) else missing).append(n)
    if not os.path.exists(FSMOOTH):
        sys.exit(f"{FSMOOTH}: missing (cargo build --release)")
    load_before = os.getloadavg()
    # Rounds alternate the tools, and each figure is the fastest over the
    # rounds: a slow spell of a shared machine then hits both, not one.
    ours, jax1, jaxn, why1, whyn = {}, None, None, None, None

    def fastest(old, new):
        if old is None:
            return new
        return {k: (min(old[k], new[k]) if k.endswith("_ms") else new[k]) for k in new}

    for _ in range(o.rounds):
        for n in names:
            ours[n] = fastest(ours.get(n), fsmooth_gmm(n, o.repeat))
        for threads in (1, 0):
            got, why = run_jax(names, o.repeat, threads)
            if got is None:
                if threads == 1:
                    why1 = why
                else:
                    whyn = why
                continue
            best = jax1 if threads == 1 else jaxn
            if best is not None:
                for n in names:
                    got["results"][n] = fastest(best["results"][n], got["results"][n])
            if threads == 1:
                jax1 = got
            else:
                jaxn = got
    load_after = os.getloadavg()
    cores = os.cpu_count()
    lines = [
        f"GMM, ADBench 1k files, float64 (`python3 benches/dense.py --repeat {o.repeat} --rounds {o.rounds}`, "
        f"{time.strftime('%Y-%m-%d')}, {cores} cores, load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after). fsmooth: "
        "`adbench gmm --mode rev --engine native`, one thread; "
        f"JAX {(jax1 or jaxn or {}).get('jax', '(not installed)')}: `jit`, `jax.grad`. "
        "Fastest call of each, over the rounds.",
        "",
        "| file | fsmooth F | fsmooth ∇ | J/F | JAX F (1 thread) | JAX ∇ (1 thread) | JAX ∇ (all threads) | ∇ ÷ JAX ∇ (1 thread) | ∇ ÷ JAX ∇ (all) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n in names:
        f = ours[n]
        j1 = (jax1 or {}).get("results", {}).get(n)
        jn = (jaxn or {}).get("results", {}).get(n)
        for j in (j1, jn):
            if j and rho(j["objective"], f["objective"]) > 1e-9:
                sys.exit(f"{n}: JAX's objective {j['objective']} is not fsmooth's {f['objective']}")
        ratio = lambda j: "—" if not j else f"{f['j_ms'] / j['j_ms']:.2f}"
        lines.append(
            f"| {n} | {cell(f['f_ms'])} | {cell(f['j_ms'])} | {f['j_ms'] / f['f_ms']:.2f} | "
            f"{cell(j1 and j1['f_ms'])} | {cell(j1 and j1['j_ms'])} | {cell(jn and jn['j_ms'])} | "
            f"{ratio(j1)} | {ratio(jn)} |")
    if missing:
        lines.append("")
        lines.append("Not in this snapshot of ADBench's data, so not measured: "
                     + ", ".join(f"gmm_{m}.txt" for m in missing) + ".")
    if why1 or whyn:
        lines.append("")
        lines.append(f"JAX: {why1 or whyn}")
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
