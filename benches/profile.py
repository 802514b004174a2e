#!/usr/bin/env python3
"""Where native code spends its time, instruction by instruction.

    cargo build --release
    python3 benches/profile.py [--top 12] [--context 24] -- \\
        target/release/fsmooth adbench gmm FILE --mode rev --engine native --repeat 2000

The command must run compiled code for a few seconds (`--repeat`). The
script runs it under `perf record` with `PERF_BUILDID_DIR` set, so that
Cranelift's JIT writes `/tmp/perf-PID.map` (every function it defines,
its address and size, all named `fsmooth_entry`); while the command runs,
`gdb` copies those functions' machine code out of the process. Then the
samples that fell into each function are counted per 64-byte window of
its code, and the hottest windows are printed with their share of the
function's samples and their disassembly (`objdump`), with `--context`
bytes before each. The rest of the profile (the runtime, libm, the
allocator) is printed by symbol.

Needs perf, gdb and objdump (binutils); not run by the tests or CI.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time


def functions(pid):
    """The JIT's functions of `pid`: (start, size), from its perf map."""
    path = f"/tmp/perf-{pid}.map"
    out = []
    if os.path.exists(path):
        for line in open(path):
            start, size, _ = line.split(maxsplit=2)
            out.append((int(start, 16), int(size, 16)))
    return out


def dump(pid, funcs, tmp):
    """Each function's code, copied out of the running process by gdb."""
    codes = {}
    for start, size in funcs:
        path = os.path.join(tmp, f"{start:x}.bin")
        cmd = ["gdb", "-p", str(pid), "-batch", "-ex",
               f"dump binary memory {path} {start:#x} {start + size:#x}"]
        subprocess.run(cmd, capture_output=True, text=True)
        if os.path.exists(path) and os.path.getsize(path) == size:
            codes[start] = path
    return codes


def disassemble(path):
    """(offset, text) of each instruction of a raw x86-64 code file."""
    p = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                        "--no-show-raw-insn", path], capture_output=True, text=True)
    out = []
    for line in p.stdout.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--context", type=int, default=24)
    ap.add_argument("--wait", type=float, default=1.5,
                    help="seconds before the code is copied (after compilation)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    o = ap.parse_args()
    cmd = o.command[1:] if o.command[:1] == ["--"] else o.command
    if not cmd:
        sys.exit("give the command after --")
    for tool in ("perf", "gdb", "objdump"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            sys.exit(f"{tool}: not installed")
    tmp = tempfile.mkdtemp(prefix="fsmooth-profile-")
    data = os.path.join(tmp, "perf.data")
    env = dict(os.environ, PERF_BUILDID_DIR=tmp)
    rec = subprocess.Popen(["perf", "record", "-q", "-o", data, "--"] + cmd, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # The command is perf's child; wait for its map, then for its code.
    pid, funcs, deadline = None, [], time.time() + 60
    while time.time() < deadline and rec.poll() is None:
        kids = subprocess.run(["pgrep", "-P", str(rec.pid)], capture_output=True, text=True)
        if kids.stdout.split():
            pid = int(kids.stdout.split()[0])
            funcs = functions(pid)
            if funcs:
                break
        time.sleep(0.05)
    if not funcs:
        rec.wait()
        sys.exit("no JIT code seen: does the command run native code long enough?")
    time.sleep(o.wait)
    codes = dump(pid, functions(pid), tmp)
    _, err = rec.communicate()
    if rec.returncode != 0:
        sys.exit(f"perf record: {err.strip()}")
    script = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"],
                            capture_output=True, text=True).stdout
    # The map is complete once the command has ended: read it once.
    funcs = dict(functions(pid))
    per_fn = collections.defaultdict(collections.Counter)
    others = collections.Counter()
    total = 0
    for line in script.splitlines():
        parts = line.split(maxsplit=1)
        if not parts:
            continue
        total += 1
        ip = int(parts[0], 16)
        home = next((s for s, n in funcs.items() if s <= ip < s + n), None)
        if home is None:
            others[parts[1] if len(parts) > 1 else "?"] += 1
        else:
            per_fn[home][ip - home] += 1
    print(f"{total} samples; native code {sum(sum(c.values()) for c in per_fn.values())}")
    for start, counts in sorted(per_fn.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(counts.values())
        size = funcs[start]
        print(f"\n== JIT function at {start:#x} ({size} bytes): {n} samples "
              f"({100 * n / total:.1f}% of all)")
        windows = collections.Counter()
        for off, k in counts.items():
            windows[off // 64 * 64] += k
        code = disassemble(codes[start]) if start in codes else []
        for w, k in windows.most_common(o.top):
            print(f"\n-- +{w:#x}: {k} samples, {100 * k / n:.1f}% of the function")
            for off, text in code:
                if w - o.context <= off < w + 64:
                    mark = f"{counts.get(off, 0):6d}" if off >= w else "      "
                    print(f"{mark}  {off:6x}  {text}")
    print("\n== elsewhere")
    for sym, k in others.most_common(12):
        print(f"{k:8d}  {100 * k / total:5.1f}%  {sym}")


if __name__ == "__main__":
    main()
