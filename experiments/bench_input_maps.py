"""The trials' input maps (harness.transform_input) and the output scale (harness.rms_finite): the
torch passes against the one-pass forms (kernel_env/fused_maps.py; the norm), side by side in one
run, with the same bits from both.

    python experiments/bench_input_maps.py            # CUDA, 6.4 GB float32 inputs (KernelBench 19_ReLU's size)
    python experiments/bench_input_maps.py --numel 4194304 --dtypes float32 float16 bfloat16

Exits 1 when a one-pass map differs from the torch passes in any bit (NaN payloads aside): a run
process without the kernel makes its inputs with the torch passes, and the reference worker must
get the same inputs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--numel", type=int, default=4096 * 393216)
    ap.add_argument("--dtypes", nargs="+", default=["float32"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch
    from kernel_env import fused_maps, harness

    dev = torch.device("cuda")
    t = time.perf_counter()
    harness.warm_kernels(dev)
    fused_maps.warm(dev, [harness.DTYPES[d] for d in args.dtypes])
    print(f"warm-up (the kernels compiled or loaded) {time.perf_counter() - t:.2f} s")
    applies = fused_maps.applies

    def timed(fn):
        best = float("inf")
        for _ in range(args.repeats):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        return out, best * 1e3

    rows, ok = [], True
    g = torch.Generator(device=dev).manual_seed(0)
    for name in args.dtypes:
        dtype = harness.DTYPES[name]
        x = torch.randn(args.numel, generator=g, device=dev).to(dtype)
        x[:8] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30, 3e38, -1.0]).to(dtype)
        for dist in fused_maps.CODES:
            one, t_one = timed(lambda: harness.transform_input(x, dist))
            fused_maps.applies = lambda *a: False  # the torch passes, as a process without the kernel runs them
            try:
                ref, t_ref = timed(lambda: harness.transform_input(x, dist))
            finally:
                fused_maps.applies = applies
            nan = torch.isnan(ref)
            ints = {torch.float32: torch.int32}.get(dtype, torch.int16)
            same = bool(torch.equal(nan, torch.isnan(one))) and bool(torch.equal(
                torch.where(nan, torch.zeros_like(ref), ref).view(ints), torch.where(nan, torch.zeros_like(one), one).view(ints)))
            ok &= same
            rows.append({"what": f"{dist} {name}", "torch_ms": round(t_ref, 2), "one_pass_ms": round(t_one, 2),
                         "ratio": round(t_ref / t_one, 1), "same_bits": same})
            del one, ref
        if dtype == torch.float32:
            import math
            fast, t_fast = timed(lambda: harness.rms_finite(x[8:]))
            slow, t_slow = timed(lambda: harness._rms_in(x[8:], harness._CHUNK, torch.float32))
            rows.append({"what": f"rms_finite {name}", "torch_ms": round(t_slow, 2), "one_pass_ms": round(t_fast, 2),
                         "ratio": round(t_slow / t_fast, 1), "same_bits": math.isclose(fast, slow, rel_tol=1e-5)})
        del x
    print(f"{torch.cuda.get_device_name()}  numel {args.numel}")
    print(f"{'what':<22} {'torch passes ms':>16} {'one pass ms':>12} {'ratio':>6}  same")
    for r in rows:
        print(f"{r['what']:<22} {r['torch_ms']:>16} {r['one_pass_ms']:>12} {r['ratio']:>6}  {r['same_bits']}")
    print(json.dumps(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
