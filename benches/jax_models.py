"""The JAX side of the benchmarks, written once for `benches/jax_compare.py`
and `benches/dense.py`: ADBench's GMM objective (as examples/adbench/gmm.fsm
computes it), NNMF's objective (examples/nnmf.fsm) and BA's `project`
(examples/ba_project.fsm), and the reader of ADBench's GMM files.

Import it only where JAX is installed (both scripts do so inside the
functions that time JAX); float64 must be on (`jax_enable_x64`).
"""

import math
import time

import jax
import jax.numpy as jnp
import numpy as np


def best_time(f, args, repeat):
    """The fastest of `repeat` calls of `f(*args)` in milliseconds, after a
    warm-up call (which compiles it), each waited for."""
    jax.block_until_ready(f(*args))
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def read_gmm(path):
    """An ADBench GMM file: (theta, x, d, k, n, gamma, m), theta the flat
    [alphas, means, icf] vector. Replicated-point files (one point line)
    repeat their point n times."""
    with open(path) as fh:
        toks = fh.read().split()
    d, k, n = int(toks[0]), int(toks[1]), int(toks[2])
    t = d * (d + 1) // 2
    vals = [float(x) for x in toks[3:]]
    head = k + k * d + k * t
    theta = np.array(vals[:head])
    rest = len(vals) - head - 2
    x = vals[head:head + n * d] if rest >= n * d else vals[head:head + d] * n
    gamma, m = float(vals[-2]), int(vals[-1])
    return theta, np.array(x).reshape(n, d), d, k, n, gamma, m


def gmm(d, k, n, gamma, m, wishart=True):
    """GMM's objective as a function of (theta, x). With `wishart`, k times
    the Wishart normalising constant (C's lgamma for log Γ) as gmm.fsm
    computes it; it does not change the gradient."""
    t = d * (d + 1) // 2
    # Strictly lower entries, column by column (gmm.fsm lowerTriangle).
    rows, cols = [], []
    for s in range(d):
        for r in range(s + 1, d):
            rows.append(r)
            cols.append(s)
    rows, cols = np.array(rows, dtype=int), np.array(cols, dtype=int)
    big_n = d + m + 1
    constant = 0.0
    if wishart:
        constant = big_n * d * (math.log(gamma) - 0.5 * math.log(2.0)) - (
            0.25 * d * (d - 1) * math.log(3.14159265359)
            + sum(math.lgamma((big_n - j) / 2) for j in range(d)))

    def objective(theta, x):
        alphas = theta[:k]
        means = theta[k:k + k * d].reshape(k, d)
        icf = theta[k + k * d:].reshape(k, t)
        qd = jnp.exp(icf[:, :d])
        sum_qs = jnp.sum(icf[:, :d], axis=1)
        ls = jnp.zeros((k, d, d)).at[:, rows, cols].set(icf[:, d:])
        xc = x[:, None, :] - means[None, :, :]
        lx = qd[None] * xc + jnp.einsum("krs,nks->nkr", ls, xc)
        inner = alphas[None] + sum_qs[None] - 0.5 * jnp.sum(lx * lx, axis=2)
        lse = jax.scipy.special.logsumexp
        prior = (0.5 * gamma * gamma * (jnp.sum(qd * qd) + jnp.sum(icf[:, d:] ** 2))
                 - m * jnp.sum(sum_qs))
        # gmm.fsm's constants: ADBench's π in log(2π).
        const = -n * d * 0.5 * math.log(2 * 3.14159265359)
        return const + jnp.sum(lse(inner, axis=1)) - n * lse(alphas) + prior - k * constant

    return objective


def nnmf(u, v, a):
    """D(A | u vᵀ) = Σ log(u vᵀ) + A / (u vᵀ)."""
    r = jnp.outer(u, v)
    return jnp.sum(jnp.log(r) + a / r)


def project(cam, x):
    """ADBench's `project` of one point."""
    rot = cam[0:3]
    y = x - cam[3:6]
    theta = jnp.sqrt(jnp.sum(rot * rot))
    wv = rot * (1.0 / theta)
    xcam = (y * jnp.cos(theta) + jnp.cross(wv, y) * jnp.sin(theta)
            + wv * (jnp.dot(wv, y) * (1.0 - jnp.cos(theta))))
    proj = xcam[0:2] * (1.0 / xcam[2])
    rsq = jnp.sum(proj * proj)
    dist = proj * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
    return cam[7:9] + dist * cam[6]


def project_all(cam, xs):
    """`project` of every point, flattened (examples/ba_project.fsm's
    `projectAll`)."""
    return jax.vmap(project, in_axes=(None, 0))(cam, xs).reshape(-1)
