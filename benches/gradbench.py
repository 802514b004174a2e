#!/usr/bin/env python3
"""GradBench side by side (issue 32): fsmooth, GradBench's `manual` C++
tool and, when a Python with JAX is given, GradBench's JAX tool, on
GradBench's own evals, in one run on this machine, each tool pinned to one
core (`taskset -c 0`; JAX's XLA told to use one thread).

Each (eval, tool) pair runs the eval's `run.py` with its default workloads
(or `--quick` small ones) through a relay — what `gradbench run` does — with
validation on: every output is checked against `manual` by the eval. The
total is GradBench's: the sum over the eval's evaluate messages of the mean
of their `evaluate` timings (so, per workload, mean primal + mean
derivative time). Prints a Markdown table and, with `--write`, puts it in
benches/README.md between the `gradbench:begin` and `gradbench:end`
markers.

Usage (from fsmooth's repository, after `.ci/gradbench` and
`cargo build --release`):

    target/gradbench/venv/bin/python benches/gradbench.py [--quick] \
        [--jax-python /path/to/venv-with-jax/bin/python] [--evals gmm,ba] \
        [--min-seconds 0.5] [--timeout 900] [--write]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GB = ROOT / "target" / "gradbench"

# Quick workloads: small but not trivial, for a look in a few minutes.
QUICK = {
    "gmm": ["-d", "2", "10", "-k", "5", "10", "-n", "1000"],
    "ba": ["--min", "1", "--max", "2"],
    "lstm": ["-l", "2", "-c", "1024"],
    "ode": ["-n", "1000", "-s", "1", "10"],
    "lse": ["-n", "10000", "80000"],
    "kmeans": ["-k", "10", "-n", "1000", "-d", "8"],
    "llsq": ["-n", "256", "1024"],
    "det": ["-l", "5", "6", "7"],
    "ht": ["--min", "1", "--max", "3", "--model", "small"],
    "particle": [],
    "saddle": [],
}
# GradBench's nightly leaders (SNAPSHOT.md; GitHub runners, not this
# machine), printed as references.
LEADERS = {
    "gmm": "jax 0.37 s, manual 0.94 s",
    "ba": "enzyme 1.92 s, manual 2.10 s",
    "lstm": "codipack 0.55 s, futhark 0.71 s",
    "ode": "manual 0.047 s, jax 0.086 s",
    "particle": "enzyme 0.98 ms, futhark 3.9 ms",
    "saddle": "ad-hpp 1.57 ms, enzyme 1.58 ms",
}


def tools(args):
    out = {
        "fsmooth": [str(ROOT / "target" / "release" / "fsmooth"), "gradbench"],
        "manual": [sys.executable, "python/gradbench/gradbench/cpp.py", "manual"],
    }
    if args.jax_python:
        out["jax"] = [args.jax_python, "python/gradbench/gradbench/tools/jax/run.py"]
    return out


def relay(eval_name, eval_args, tool_cmd, timeout):
    """Runs one eval against one tool; returns (total seconds, valid, n
    evaluates, error)."""
    env = dict(os.environ, PYTHONPATH="python/gradbench")
    # One thread for XLA (JAX); fsmooth and manual are single-threaded.
    env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env["OMP_NUM_THREADS"] = "1"
    ev = subprocess.Popen(
        [sys.executable, f"python/gradbench/gradbench/evals/{eval_name}/run.py"] + eval_args,
        cwd=GB, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    tl = subprocess.Popen(
        ["taskset", "-c", "0"] + tool_cmd,
        cwd=GB, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    fired = []

    def stop():
        fired.append(True)
        tl.kill()
        ev.kill()

    timer = threading.Timer(timeout, stop)
    timer.start()
    total, valid, evaluates, error = 0.0, True, 0, None
    try:
        for line in ev.stdout:
            msg = json.loads(line)
            tl.stdin.write(line)
            tl.stdin.flush()
            answer = tl.stdout.readline()
            if not answer:
                error = "the tool stopped"
                break
            resp = json.loads(answer)
            if msg["kind"] == "evaluate":
                if not resp.get("success"):
                    error = resp.get("error", "failed")[:200]
                    valid = False
                ts = [t["nanoseconds"] for t in resp.get("timings", []) if t["name"] == "evaluate"]
                if ts:
                    total += statistics.mean(ts) / 1e9
                    evaluates += 1
            elif msg["kind"] == "define" and not resp.get("success"):
                # The tool does not implement this eval.
                error = "not implemented"
                valid = False
            elif msg["kind"] == "analysis" and not msg.get("valid"):
                valid = False
                error = (msg.get("error") or "invalid")[:200]
            ev.stdin.write(answer)
            ev.stdin.flush()
    except (BrokenPipeError, ValueError) as e:
        error = f"relay: {e}"
    finally:
        timer.cancel()
        for p in (tl, ev):
            try:
                p.kill()
            except OSError:
                pass
    if fired:
        error = f"timeout after {timeout} s"
        valid = False
    return total, valid, evaluates, error


def fmt(t):
    return f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.3f} s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--evals", default="gmm,ba,lstm,ode,lse,kmeans,llsq,det,particle,saddle")
    ap.add_argument("--jax-python")
    ap.add_argument("--min-seconds", default="0.5")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    if not (GB / ".ready").exists():
        sys.exit("run .ci/gradbench first (GradBench's evals and manual under target/gradbench)")
    ts = tools(args)
    rows = []
    load = os.getloadavg()
    for e in args.evals.split(","):
        eargs = (QUICK.get(e, []) if args.quick else []) + ["--min-runs", "1", "--min-seconds", args.min_seconds]
        cells = {}
        for name, cmd in ts.items():
            start = time.time()
            total, valid, n, error = relay(e, eargs, cmd, args.timeout)
            wall = time.time() - start
            cells[name] = (total, valid, n, error)
            print(f"{e} {name}: total {fmt(total)} over {n} evaluates, valid {valid}, wall {wall:.0f} s"
                  + (f" ({error})" if error else ""), file=sys.stderr, flush=True)
        rows.append((e, cells))
    names = list(ts)
    lines = [
        f"GradBench totals on this machine ({time.strftime('%Y-%m-%d')}, load average "
        f"{load[0]:.2f} at the start; {'quick' if args.quick else 'default'} workloads, "
        f"--min-seconds {args.min_seconds}; one core each; validated by the evals):",
        "",
        "| eval | " + " | ".join(names) + " | fsmooth ÷ best peer | nightly leaders (GitHub runners) |",
        "| --- | " + " | ".join("---" for _ in names) + " | --- | --- |",
    ]
    for e, cells in rows:
        def cell(n):
            total, valid, k, error = cells[n]
            if error == "not implemented":
                return "—"
            if not valid:
                return f"✗ {error}" if error else "✗"
            return fmt(total)
        peers = [cells[n][0] for n in names if n != "fsmooth" and cells[n][1] and cells[n][2]]
        ratio = ""
        if peers and cells["fsmooth"][1]:
            ratio = f"{cells['fsmooth'][0] / min(peers):.2f}"
        lines.append(f"| {e} | " + " | ".join(cell(n) for n in names) + f" | {ratio} | {LEADERS.get(e, '')} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        readme = ROOT / "benches" / "README.md"
        text = readme.read_text()
        begin, end = "<!-- gradbench:begin -->", "<!-- gradbench:end -->"
        block = f"{begin}\n{table}\n{end}"
        if begin in text and end in text:
            text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
        else:
            text += f"\n## GradBench, side by side\n\n`benches/gradbench.py` (see its docstring).\n\n{block}\n"
        readme.write_text(text)


if __name__ == "__main__":
    main()
