"""A Triton submission's first launch in a fresh run process, with and without the run process's
warm-up (candidate/triton_warm.py), side by side in one run.

Each row is a fresh Python process with an empty Triton cache (as a fresh box): torch and Triton
imported, the CUDA context made (what an idle run process of the judge's pool has done), then
optionally the warm-up, then the first and second call of a kernel no process has compiled before
(a unique comment inside it), then a second unique kernel.

    python experiments/bench_triton_first_call.py --device cuda [--repeats 3]
    python experiments/bench_triton_first_call.py --device cpu     # Triton's interpreter; no warm-up there
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import importlib.util, json, os, sys, tempfile, time, uuid
import torch, triton
dev = torch.device(sys.argv[1])
if dev.type == "cuda":
    torch.cuda.init(); torch.zeros(1, device=dev)
sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
SRC = """
import torch, triton, triton.language as tl
@triton.jit
def relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # TAG
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)
def run(x):
    y = torch.empty_like(x)
    relu[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
"""
def module(tag):
    p = os.path.join(tempfile.mkdtemp(), f"k_{tag}.py")
    open(p, "w").write(SRC.replace("TAG", tag))
    spec = importlib.util.spec_from_file_location(f"k_{tag}", p)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
out = {}
x = torch.randn(1 << 16, device=dev)
if sys.argv[2] == "warmed" and dev.type == "cuda":
    t = time.perf_counter(); from kernel_env.candidate import triton_warm; triton_warm.warm(dev)
    out["warm_up_s"] = time.perf_counter() - t
for name in ("first_kernel", "second_kernel"):
    m = module(uuid.uuid4().hex)
    t = time.perf_counter(); m.run(x); sync(); out[name + "_first_call_s"] = time.perf_counter() - t
    t = time.perf_counter(); m.run(x); sync(); out[name + "_second_call_s"] = time.perf_counter() - t
print(json.dumps(out))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per mode")
    args = ap.parse_args()
    rows = {"cold": [], "warmed": []}
    for i in range(args.repeats):
        for mode in rows:  # interleaved: both modes see the same box
            env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="tcache-"),
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
            if args.device == "cpu":
                env["TRITON_INTERPRET"] = "1"
            r = subprocess.run([sys.executable, "-c", CHILD, args.device, mode], capture_output=True, text=True,
                               env=env, timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"{mode} process failed:\n{r.stderr[-3000:]}")
            rows[mode].append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(f"[{i + 1}/{args.repeats}] {mode:<6} " + "  ".join(f"{k} {v:.3f}" for k, v in rows[mode][-1].items()),
                  flush=True)
    keys = ["first_kernel_first_call_s", "first_kernel_second_call_s", "second_kernel_first_call_s"]
    print(f"\n{'median over ' + str(args.repeats) + ' processes':<32} {'cold':>9} {'warmed':>9} {'ratio':>7}")
    for k in keys:
        c = statistics.median(r[k] for r in rows["cold"])
        w = statistics.median(r[k] for r in rows["warmed"])
        print(f"{k:<32} {c:>8.3f}s {w:>8.3f}s {c / w if w else float('nan'):>6.1f}x")
    if rows["warmed"] and "warm_up_s" in rows["warmed"][0]:
        print(f"{'warm-up (idle pool process)':<32} {'':>9} {statistics.median(r['warm_up_s'] for r in rows['warmed']):>8.3f}s")


if __name__ == "__main__":
    main()
