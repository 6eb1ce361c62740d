"""Where a timing's spread comes from: between processes, between allocations, and from other processes'
GPU work, side by side in one run (the goal: the same kernel evaluated 10 times within 1 %).

Part 1, between processes. `--procs` fresh processes one after the other, each timing the same two
kernels (an fp32 matmul, compute bound, and a ReLU, memory bound) the judge's way (harness.time_calls:
L2 flushed, fresh perturbed inputs every call). In each process the inputs are made `--allocs` times,
with an allocation of random size in between so that they land elsewhere in memory, and each time the
kernel is timed twice: with the judge's stop rule (min 20 calls, stop when the median moved < 1 %) and
with a fixed 200 calls. Printed: max/min of the medians across processes (first allocation), across the
allocations of one process, and of the two stop rules.

Part 2, other processes' work. One process times the matmul over and over while another kind of
process is started in a loop (4 at a time) or runs beside it:
  none            nothing else
  runner_start    what an idle run process of the judge does at start: import torch, make the CUDA
                  context, harness.warm_kernels, candidate/triton_warm.py, exit
  context_only    import torch, make the CUDA context, one tiny kernel, exit
  sparse_kernels  one process launching a tiny kernel every millisecond (synchronised each time)
Printed per scenario: median, (p90 - p10) / median, the share of calls 1.5x slower than alone.

Part 3 (`--after-idle N`): the matmul timed after the GPU idled 2 s, with three warm-ups.
Part 4 (`--paired N`): a standing "reference" process timed just before and after a fresh "candidate"
process, same kernels, after the device idled: whether a ratio to a reference timed beside the
candidate spreads less than the candidate's own time does.

    python experiments/bench_timing_noise.py --device cuda [--procs 6 --allocs 3 --seconds 8]
    python experiments/bench_timing_noise.py --device cpu     # small sizes, same code path
"""
from __future__ import annotations

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

TIMER = r'''
import json, random, statistics, sys, time
import torch
from kernel_env import harness
dev = harness.device_of(sys.argv[1])
mode, allocs, seconds = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
big = dev.type == "cuda"
n_mm, n_relu = (4096, 1 << 26) if big else (384, 1 << 20)
flusher = harness.L2Flusher(dev, 256 << 20)
KERNELS = {"matmul": (lambda a, b: torch.mm(a, b), lambda: [torch.randn(n_mm, n_mm, device=dev), torch.randn(n_mm, n_mm, device=dev)]),
           "relu": (lambda a: torch.relu(a), lambda: [torch.randn(n_relu, device=dev)])}
def timed(name, base, rule, warmup_s=0.2):
    f, _ = KERNELS[name]
    state = {"salt": 0, "args": None}
    def before():
        state["salt"] += 1
        state["args"] = harness.perturb_inputs(base, state["salt"])
    def fn():
        state["out"] = f(*state["args"])
    kw = dict(min_calls=20, max_calls=500, stable_rel=0.01) if rule == "judge" else dict(min_calls=200, max_calls=200, stable_rel=0.0)
    r = harness.time_calls(fn, dev, warmup=3, budget_s=2.0, flusher=flusher, before=before, warmup_s=warmup_s, **kw)
    return r["times_ms"]
out = {}
if mode == "between":
    pad = []
    for a in range(allocs):
        pad.append(torch.empty(random.randrange(1, 64) << 20, dtype=torch.uint8, device=dev))  # move the next allocations
        for name, (_, make) in KERNELS.items():
            base = make()
            for rule in ("judge", "fixed200"):
                t = timed(name, base, rule)
                out.setdefault(name, {}).setdefault(rule, []).append([statistics.median(t), len(t), harness.spread_of(t)])
            del base
elif mode == "idle":  # after 2 s of idling: the judge's warm-up, a heater first, or a long warm-up on the kernel itself
    base = KERNELS["matmul"][1]()
    res = {"warmup_0.2s": [], "fp16_heater_1.5s": [], "warmup_1.5s": []}
    for _ in range(allocs):
        for m in res:
            time.sleep(2.0)
            if m.startswith("fp16"):  # half-precision matmuls back to back: more power than the timed kernel
                n = 4096 if big else 128  # half-precision matmuls on the CPU are slow: a token size there
                h, t0 = torch.randn(n, n, device=dev, dtype=torch.float16), time.monotonic()
                while time.monotonic() - t0 < 1.5:
                    torch.mm(h, h)
                    harness.synchronize(dev)
            t = timed("matmul", base, "judge", warmup_s=1.5 if m == "warmup_1.5s" else 0.2)
            res[m].append(round(statistics.median(t), 4))
    out["after_idle"] = res
elif mode == "serve":  # one timing of each kernel per line read (the paired part drives two of these)
    bases = {name: make() for name, (_, make) in KERNELS.items()}
    print("ready", flush=True)
    for line in sys.stdin:
        r = {name: statistics.median(timed(name, bases[name], "judge")) for name in KERNELS}
        print(json.dumps(r), flush=True)
    raise SystemExit(0)
else:  # "stream": the matmul timed again and again for `seconds`, every call kept
    base = KERNELS["matmul"][1]()
    t0, calls, starts = time.monotonic(), [], []
    while time.monotonic() - t0 < seconds:
        starts.append(round(time.monotonic() - t0, 3))  # when each block of 200 calls began
        calls += timed("matmul", base, "fixed200")
    out["calls"], out["block_starts_s"] = calls, starts
print(json.dumps(out))
'''

RUNNER_START = r'''
import sys, torch
from kernel_env import harness
dev = harness.device_of(sys.argv[1])
if dev.type == "cuda":
    torch.cuda.init()
harness.warm_kernels(dev)
if dev.type == "cuda":
    from kernel_env.candidate import triton_warm
    triton_warm.warm(dev)
'''
CONTEXT_ONLY = r'''
import sys, torch
dev = torch.device(sys.argv[1])
torch.zeros(1, device=dev).add_(1)
'''
SPARSE = r'''
import sys, time, torch
dev = torch.device(sys.argv[1])
x = torch.zeros(64, device=dev)
t0 = time.monotonic()
while time.monotonic() - t0 < float(sys.argv[2]):
    x.add_(1)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    time.sleep(0.001)
'''


def _env() -> dict:
    # one work queue, as the judge's timed processes have it (ordered timing: kernel_env/ordered_timing.py)
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def _child(code: str, *args, timeout: float = 600, env: dict | None = None) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                       env=env or _env(), timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _ratio(xs) -> float:
    return max(xs) / min(xs) if xs else float("nan")


def between(device: str, procs: int, allocs: int) -> dict:
    runs = []
    for i in range(procs):
        t = time.monotonic()
        runs.append(_child(TIMER, device, "between", allocs, 0))
        print(f"  process {i + 1}/{procs}: {time.monotonic() - t:.1f} s", flush=True)
    res = {}
    for name in runs[0]:
        for rule in runs[0][name]:
            first = [r[name][rule][0][0] for r in runs]
            within = [_ratio([a[0] for a in r[name][rule]]) for r in runs]
            res[f"{name}/{rule}"] = {
                "medians_first_alloc_ms": [round(x, 4) for x in first],
                "across_processes": round(_ratio(first), 4),
                "within_process_across_allocs_max": round(max(within), 4),
                "medians_ms": [[round(a[0], 4) for a in r[name][rule]] for r in runs],  # per process, per allocation
                "calls": [a[1] for r in runs for a in r[name][rule]],
                "own_spread_max": round(max(a[2] for r in runs for a in r[name][rule]), 4)}
    return res


def disturbed(device: str, scenario: str, seconds: float, alone_ms: float | None) -> dict:
    stop = threading.Event()

    def loop(code, *args):
        while not stop.is_set():
            subprocess.run([sys.executable, "-c", code, device, *map(str, args)], env=_env(),
                           capture_output=True, timeout=300)

    threads = []
    if scenario in ("runner_start", "context_only"):
        code = RUNNER_START if scenario == "runner_start" else CONTEXT_ONLY
        threads = [threading.Thread(target=loop, args=(code,), daemon=True) for _ in range(4)]
    elif scenario == "sparse_kernels":
        threads = [threading.Thread(target=loop, args=(SPARSE, seconds + 5), daemon=True)]

    for t in threads:
        t.start()
    time.sleep(1.0 if threads else 0)  # the disturbers are running when the timing starts
    try:
        calls = _child(TIMER, device, "stream", 0, seconds)["calls"]
    finally:
        stop.set()
    for t in threads:
        t.join(timeout=120)
    q = sorted(calls)
    med = statistics.median(q)
    blocks = [round(statistics.median(calls[i:i + 50]), 4) for i in range(0, len(calls), 50)]  # 50 calls each
    ref = alone_ms or med
    return {"calls": len(calls), "median_ms": round(med, 4), "spread": round((q[len(q) * 9 // 10] - q[len(q) // 10]) / med, 4),
            "slow_share": round(sum(1 for c in calls if c > 1.5 * ref) / len(calls), 4), "max_ms": round(q[-1], 4),
            "medians_of_50_calls": blocks, "calls_ms": [round(c, 4) for c in calls]}


class _Server:
    """A TIMER process in "serve" mode: started, then asked for timings one at a time."""

    def __init__(self, device: str):
        self.p = subprocess.Popen([sys.executable, "-c", TIMER, device, "serve", "0", "0"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=_env())
        if self.p.stdout.readline().strip() != "ready":
            raise RuntimeError("the timing process did not start")

    def time(self) -> dict:
        self.p.stdin.write("t\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def paired(device: str, rounds: int, idles: list) -> dict:
    """Part 4: does timing the reference beside the candidate cancel the GPU's drift? A standing "reference"
    process (the judge's reference worker) and a fresh "candidate" process per round (an idle run process)
    time the same kernels; after the device idled `idle` s, the reference is timed just before and just
    after the candidate. Same kernels, so every ratio should be 1: max/min of the candidate's medians
    (what the judge's speedup does now, against a cached reference time) against max/min of the ratios."""
    ref, res = _Server(device), {}
    try:
        for idle in idles:
            rows = []
            for i in range(rounds):
                cand = _Server(device)
                try:
                    time.sleep(idle)
                    before, c = ref.time(), cand.time()
                    after = ref.time()
                finally:
                    cand.close()
                rows.append({"ref_before": before, "cand": c, "ref_after": after})
            for k in rows[0]["cand"]:
                cands = [r["cand"][k] for r in rows]
                res[f"{k}/idle_{idle}s"] = {
                    "cand_ms": [round(x, 4) for x in cands],
                    "unpaired": round(_ratio(cands), 4),
                    "paired_before": round(_ratio([r["ref_before"][k] / r["cand"][k] for r in rows]), 4),
                    "paired_after": round(_ratio([r["ref_after"][k] / r["cand"][k] for r in rows]), 4),
                    "ref_before_ms": [round(r["ref_before"][k], 4) for r in rows]}
    finally:
        ref.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--procs", type=int, default=6)
    ap.add_argument("--allocs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0, help="of timing per disturbance scenario")
    ap.add_argument("--scenarios", nargs="*", default=["none", "runner_start", "context_only", "sparse_kernels"])
    ap.add_argument("--after-idle", type=int, default=0, help="part 3: rounds of timing after the GPU idled")
    ap.add_argument("--paired", type=int, default=0, help="part 4: rounds of reference-beside-candidate timing "
                    "per idle length")
    ap.add_argument("--paired-idle", type=float, nargs="+", default=[0.3, 2.0], help="part 4: idle seconds before a round")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    out = {"device": args.device, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    print("part 1: the same kernels in fresh processes", flush=True)
    out["between"] = between(args.device, args.procs, args.allocs) if args.procs > 0 else {}
    for k, v in out["between"].items():
        print(f"  {k:18s} across processes {v['across_processes']:.4f}  within a process (allocations) "
              f"{v['within_process_across_allocs_max']:.4f}  own spread max {v['own_spread_max']:.3f}  "
              f"calls {min(v['calls'])}-{max(v['calls'])}  medians {v['medians_first_alloc_ms']}", flush=True)
    if args.after_idle:
        print("part 3: the matmul after the GPU idled 2 s, with three warm-ups", flush=True)
        out["after_idle"] = _child(TIMER, args.device, "idle", args.after_idle, 0)["after_idle"]
        for k, v in out["after_idle"].items():
            print(f"  {k:18s} medians {v}  max/min {_ratio(v):.4f}", flush=True)
    if args.paired:
        print("part 4: the reference timed beside the candidate (same kernels: every ratio should be 1)", flush=True)
        out["paired"] = paired(args.device, args.paired, args.paired_idle)
        for k, v in out["paired"].items():
            print(f"  {k:18s} max/min: candidate alone {v['unpaired']:.4f}, ratio to reference before "
                  f"{v['paired_before']:.4f}, after {v['paired_after']:.4f}  (candidate {v['cand_ms']})", flush=True)
    print("part 2: the matmul while other processes use the device", flush=True)
    out["disturbed"] = {}
    alone = None
    for s in args.scenarios:
        r = out["disturbed"][s] = disturbed(args.device, s, args.seconds, alone)
        if s == "none":
            alone = r["median_ms"]
        print(f"  {s:15s} median {r['median_ms']:.4f} ms  spread {r['spread']:.4f}  calls 1.5x slow "
              f"{r['slow_share']:.3f}  max {r['max_ms']:.3f} ms  ({r['calls']} calls)", flush=True)
        print(f"  {'':15s} medians of 50 calls in order: {' '.join(f'{x:.3f}' for x in r['medians_of_50_calls'])}",
              flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
