"""Timing with and without the launch gate (kernel_env/launch_gate.py, EXPERIMENTAL, off in the judge),
side by side in fresh processes: how far the medians of one kernel spread across processes, and
what work on a side stream gets away with.

Each of `--procs` fresh processes times every kernel with harness.time_calls twice, gate off (the
judge's timing) and gate on, with the judge's rules (fresh perturbed inputs, L2 flushed, 1.5 s
warm-up on cuda, retimed when disturbed). Kernels:
  relu         torch.relu on a ~16 MB tensor (~10 us on an H200)
  matmul       torch.mm, 4096^2 fp32 on cuda (~2.7 ms)
  side_nowait  the ReLU on a side stream, returned without a wait (cuda only)
  side_wait    the ReLU on a side stream, joined with wait_stream (cuda only)
Printed per kernel and method: the medians' range and max/min across processes, the gate's length
and late calls. A side_* median well below relu's means the side stream's work escaped the timer.

    python bench/bench_launch_gate.py --device cuda --procs 4
    python bench/bench_launch_gate.py --device cpu --procs 2     # no gate on the CPU: same code path
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.bench_timing_noise import _child  # noqa: E402  (a fresh process, its last line JSON)

CHILD = r'''
import json, sys
import torch
from kernel_env import harness
dev = harness.device_of(sys.argv[1])
cuda = dev.type == "cuda"
harness.warm_kernels(dev)
x = torch.rand(4096, 1024, device=dev) if cuda else torch.rand(1 << 16)
n = 4096 if cuda else 128
a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
K = {"relu": (torch.relu, [x]), "matmul": (torch.mm, [a, b])}
if cuda:
    side = torch.cuda.Stream()
    def nowait(t):
        with torch.cuda.stream(side):
            return torch.relu(t)
    def wait(t):
        with torch.cuda.stream(side):
            y = torch.relu(t)
        torch.cuda.current_stream().wait_stream(side)
        return y
    K.update(side_nowait=(nowait, [x]), side_wait=(wait, [x]))
flusher = harness.L2Flusher(dev, 256 << 20)
out = {}
for name, (f, base) in K.items():
    for gate in (False, True):
        st = {"salt": 0, "a": None}
        def before():
            st["salt"] += 1
            st["a"] = harness.perturb_inputs(base, st["salt"])
        def fn():
            with torch.no_grad():
                f(*st["a"])
        r = harness.time_calls(fn, dev, warmup=3, min_calls=20, max_calls=500, budget_s=2.0, stable_rel=0.01,
                               flusher=flusher, before=before, warmup_s=1.5 if cuda else 0.1, retime_spread=0.25,
                               attempts=3, min_wall_s=0.5 if cuda else 0.0, launch_gate=gate)
        out[f"{name}|{'gate' if gate else 'no gate'}"] = {"us": r["median_ms"] * 1e3, "gate_us": r["gate_us"],
                                                          "late": r.get("gate_late", 0)}
print(json.dumps(out))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--json", default=None, help="also write the per-process results here")
    args = ap.parse_args()
    rows: dict = {}
    for i in range(args.procs):
        for k, v in _child(CHILD, args.device).items():
            rows.setdefault(k, []).append(v)
        print(f"[process {i + 1}/{args.procs} done]", flush=True)
    print(f"\n{'kernel':12s} {'method':8s} {'median us per process':>34s} {'max/min':>8s}  gate us (late calls)")
    for k, vs in rows.items():
        name, method = k.split("|")
        us = [v["us"] for v in vs]
        gate = ", ".join(f"{v['gate_us']:.0f} ({v['late']})" for v in vs if v["gate_us"] is not None) or "-"
        print(f"{name:12s} {method:8s} {min(us):15.2f} - {max(us):15.2f} {max(us) / min(us):8.4f}  {gate}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "procs": args.procs, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
