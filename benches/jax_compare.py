#!/usr/bin/env python3
"""Times JAX `jit` (CPU, float64) on the issue-7 JAX targets, on the same
inputs as `cargo bench --bench table`, and writes the figures to
target/bench-jax.json, where `benches/table.py` picks them up in place of
the issue's published ones.

    python3 -m venv /tmp/jax && /tmp/jax/bin/pip install jax
    /tmp/jax/bin/python benches/jax_compare.py [--repeat 50]

Optional: nothing in CI or `cargo test` needs JAX. Without it this script
says so and exits with status 2.

Each time is the minimum over `--repeat` calls of a `jax.jit`-compiled
function after one warm-up call (which compiles it), with
`block_until_ready`, as the issue's figures were measured. Before timing,
every JAX objective is checked against an independent NumPy evaluation
and every gradient against a central finite difference in one
coordinate, so the script times correct code.
"""

import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "target", "bench-jax.json")
GMM_DIR = os.path.join(ROOT, "..", "shared", "data", "adbench", "data", "gmm", "1k")

MASK = (1 << 64) - 1


def numbers(seed, count):
    """benches/common/mod.rs `numbers`: uniform in [-1, 1), an LCG."""
    s, out = seed, []
    for _ in range(count):
        s = (s * 6364136223846793005 + 1442695040888963407) & MASK
        out.append(((s >> 11) / float(1 << 53)) * 2.0 - 1.0)
    return out


def rho(x, y):
    return abs(x - y) / max(1.0, abs(x) + abs(y))


def check_gradient(obj, grad, args, k, flat_index, h=1e-6):
    """Central difference of `obj` in coordinate `flat_index` of argument k."""
    import numpy as np

    g = np.asarray(grad(*args)).reshape(-1)[flat_index]
    plus = [np.array(a, copy=True) for a in args]
    minus = [np.array(a, copy=True) for a in args]
    plus[k].reshape(-1)[flat_index] += h
    minus[k].reshape(-1)[flat_index] -= h
    fd = (float(obj(*plus)) - float(obj(*minus))) / (2 * h)
    if rho(float(g), fd) > 1e-5:
        sys.exit(f"JAX gradient disagrees with finite differences: {g} vs {fd}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=50)
    opts = ap.parse_args()
    try:
        import jax
    except ImportError:
        print("JAX is not installed: `pip install jax` (see this file's docstring); "
              "nothing measured", file=sys.stderr)
        sys.exit(2)
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jax_models

    results = {}

    def record(group, n, obj, grad, args, wrt, check):
        f = jax.jit(obj)
        g = jax.jit(grad(obj, wrt))
        check(f, g, args)
        # On the device once, as a JAX user's arrays are: a NumPy argument
        # would be copied in on every call (2.3 ms of the dot product's).
        args = tuple(jax.device_put(a) for a in args)
        tf = jax_models.best_time(f, args, opts.repeat)
        tg = jax_models.best_time(g, args, opts.repeat)
        results[f"{group}/{n}"] = {"objective_ms": tf, "gradient_ms": tg}
        print(f"{group:12} n = {n:>8}: objective {tf:8.3f} ms, gradient {tg:8.3f} ms",
              flush=True)

    grad = lambda f, k: jax.grad(f, argnums=k)

    # Micro benchmarks of seed 001 §7 (benches/table.rs: vector(n, seed)).
    n = 1_000_000
    v1 = np.array(numbers(1, n))
    v2 = np.array(numbers(2, n))
    dot = lambda a, b: jnp.dot(a, b)

    def check_dot(f, g, args):
        if rho(float(f(*args)), float(np.dot(*args))) > 1e-9:
            sys.exit("JAX dot disagrees with NumPy")
        check_gradient(f, g, args, 0, 7)

    record("dot", n, dot, grad, (v1, v2), 0, check_dot)
    v = np.array(numbers(1, n))

    def check_vmax(f, g, args):
        if float(f(*args)) != float(np.max(args[0])):
            sys.exit("JAX max disagrees with NumPy")
        if float(np.asarray(g(*args))[int(np.argmax(args[0]))]) != 1.0:
            sys.exit("JAX max gradient is not one-hot at the maximum")

    record("vmax", n, lambda a: jnp.max(a), grad, (v,), 0, check_vmax)

    # NNMF (benches/table.rs `nnmf`): D = Σ log(u vᵀ) + A / (u vᵀ), ∂/∂v.
    m = 1000
    u = np.array([1.5 + x for x in numbers(1, m)])
    w = np.array([1.5 + x for x in numbers(2, m)])
    a = np.array([[1.5 + x for x in numbers(100 + i, m)] for i in range(m)])

    def check_nnmf(f, g, args):
        r = np.outer(args[0], args[1])
        if rho(float(f(*args)), float(np.sum(np.log(r) + args[2] / r))) > 1e-9:
            sys.exit("JAX NNMF disagrees with NumPy")
        check_gradient(f, g, args, 1, 3)

    record("nnmf", m, jax_models.nnmf, grad, (u, w, a), 1, check_nnmf)

    # BA `project` over N points, Jacobian with respect to the camera
    # (examples/ba_project.fsm; benches/table.rs `ba`).
    cam = np.array([0.1, -0.2, 0.3, 0.5, -0.4, -3.0, 2.0, 0.25, -0.125, 0.01, -0.002])
    pts = 100_000
    xs = np.array([numbers(7 + i, 3) for i in range(pts)])

    def check_ba(f, g, args):
        jac = np.asarray(g(*args))
        if jac.shape != (2 * pts, 11):
            sys.exit(f"BA Jacobian has shape {jac.shape}")
        h = 1e-6
        plus, minus = args[0].copy(), args[0].copy()
        plus[6] += h
        minus[6] -= h
        fd = (np.asarray(f(plus, args[1])) - np.asarray(f(minus, args[1]))) / (2 * h)
        if max(rho(float(p), float(q)) for p, q in zip(jac[:50, 6], fd[:50])) > 1e-5:
            sys.exit("JAX BA Jacobian disagrees with finite differences")

    record("ba", pts, jax_models.project_all, lambda f, k: jax.jacfwd(f, argnums=k), (cam, xs), 0,
           check_ba)

    # GMM on ADBench's 1k files (shared/data/adbench/README.md, "GMM"),
    # the gradient with respect to θ = [alphas, means, icf].
    for name in ["gmm_d2_K5", "gmm_d10_K25"]:
        path = os.path.join(GMM_DIR, name + ".txt")
        if not os.path.exists(path):
            print(f"{path}: missing, GMM skipped", file=sys.stderr)
            continue
        theta, x, d, k, n, gamma, wm = jax_models.read_gmm(path)
        # The Wishart normalising constant does not change the gradient
        # and is left out of the timed objective.
        gmm = jax_models.gmm(d, k, n, gamma, wm, wishart=False)

        def check_gmm(f, g, args):
            check_gradient(f, g, args, 0, 1)

        record(name, n, gmm, grad, (theta, x), 0, check_gmm)

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        json.dump({"jax": jax.__version__, "repeat": opts.repeat, "results": results}, fh,
                  indent=1)
    print(f"wrote {OUT} (JAX {jax.__version__})")


if __name__ == "__main__":
    main()
