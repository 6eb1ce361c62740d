"""Ordered timing (kernel_env/ordered_timing.py, the judge's) against the old way, side by side in
fresh processes: how far the medians of one kernel spread across processes, and what work put on a
side stream gets away with.

Each of `--procs` fresh processes times every kernel with harness.time_calls twice, the old way
(ordered=False: start event on an idle GPU, end after a device-wide synchronize) and ordered, with the
judge's rules (fresh perturbed inputs, L2 flushed, 1.5 s warm-up on cuda, retimed when disturbed), in
the judge's environment (CUDA_DEVICE_MAX_CONNECTIONS=1). Kernels:
  relu         torch.relu on a ~16 MB tensor (~10 us on an H200)
  triton_relu  the same in Triton (a slower launch from the host)
  matmul       torch.mm, 4096^2 fp32 on cuda (~2.7 ms)
  side_nowait  the ReLU on a side stream, returned without a wait (cuda only)
  side_wait    the ReLU on a side stream, joined with wait_stream (cuda only)
  side_triton  the Triton ReLU on a high-priority side stream, no wait (cuda only)
A side_* median well below relu's means the side stream's work escaped the timer.
`--unset-connections` adds one process without the variable: its ordered rows must say why they
could not be ordered (more than one work queue) and time the old way.

    python experiments/bench_timing_order.py --device cuda --procs 4 --unset-connections
    python experiments/bench_timing_order.py --device cpu --procs 2     # the CPU's clock: same code path
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from experiments.bench_timing_noise import _child, _env  # noqa: E402  (a fresh process, its last line JSON)

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
    import triton, triton.language as tl

    @triton.jit
    def _relu(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        m = o < n
        tl.store(y + o, tl.maximum(tl.load(x + o, mask=m), 0.0), mask=m)

    def trelu(t):
        y = torch.empty_like(t)
        _relu[(triton.cdiv(t.numel(), 1024),)](t, y, t.numel(), B=1024)
        return y

    side, high = torch.cuda.Stream(), torch.cuda.Stream(priority=-1)

    def nowait(t):
        with torch.cuda.stream(side):
            return torch.relu(t)

    def wait(t):
        with torch.cuda.stream(side):
            y = torch.relu(t)
        torch.cuda.current_stream().wait_stream(side)
        return y

    def side_triton(t):
        with torch.cuda.stream(high):
            return trelu(t)

    K.update(triton_relu=(trelu, [x]), side_nowait=(nowait, [x]), side_wait=(wait, [x]),
             side_triton=(side_triton, [x]))
flusher = harness.L2Flusher(dev, 256 << 20)
out = {}
for name, (f, base) in K.items():
    for ordered in (False, True):
        st = {"salt": 0, "a": None}
        def before():
            st["salt"] += 1
            st["a"] = harness.perturb_inputs(base, st["salt"])
        def fn():
            with torch.no_grad():
                f(*st["a"])
        r = harness.time_calls(fn, dev, warmup=3, min_calls=20, max_calls=500, budget_s=2.0, stable_rel=0.01,
                               flusher=flusher, before=before, warmup_s=1.5 if cuda else 0.1, retime_spread=0.25,
                               attempts=3, min_wall_s=0.5 if cuda else 0.0, ordered=ordered)
        out[f"{name}|{'ordered' if ordered else 'old way'}"] = {
            "us": r["median_ms"] * 1e3, "timing": r["timing"], "hold_us": r["hold_us"], "late": r.get("late", 0),
            "why": r["unordered_why"]}
print(json.dumps(out))
'''


def _run(device: str, env: dict | None = None) -> dict:
    """CHILD in a fresh process, from a file: Triton reads a kernel's source from its file."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "timing_order_child.py"
        path.write_text(CHILD)
        return _child(f"import runpy, sys; sys.argv = [{str(path)!r}] + sys.argv[1:]; "
                      f"runpy.run_path({str(path)!r}, run_name='__main__')", device, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--unset-connections", action="store_true",
                    help="one more process without CUDA_DEVICE_MAX_CONNECTIONS=1 (shown apart)")
    ap.add_argument("--json", default=None, help="also write the per-process results here")
    args = ap.parse_args()
    rows: dict = {}
    for i in range(args.procs):
        for k, v in _run(args.device).items():
            rows.setdefault(k, []).append(v)
        print(f"[process {i + 1}/{args.procs} done]", flush=True)
    print(f"\n{'kernel':12s} {'method':8s} {'median us per process':>34s} {'max/min':>8s}  timing, hold us (late calls)")
    for k, vs in rows.items():
        name, method = k.split("|")
        us = [v["us"] for v in vs]
        how = ", ".join(sorted({v["timing"] for v in vs}))
        hold = ", ".join(f"{v['hold_us']:.0f} ({v['late']})" for v in vs if v["hold_us"] is not None)
        print(f"{name:12s} {method:8s} {min(us):15.2f} - {max(us):15.2f} {max(us) / min(us):8.4f}  {how} {hold}")
    unset = None
    if args.unset_connections:
        env = {k: v for k, v in _env().items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
        unset = _run(args.device, env=env)
        print("\nwithout CUDA_DEVICE_MAX_CONNECTIONS=1 (one process):")
        for k, v in unset.items():
            print(f"{k:22s} {v['us']:12.2f} us  {v['timing']}  {v['why'] or ''}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": args.device, "procs": args.procs, "rows": rows,
                                               "unset_connections": unset}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
