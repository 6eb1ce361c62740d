"""The judge's output comparison: the chunked torch passes against the one-pass Triton kernel
(judge/compare._fused_maxima), side by side in one run, and the same verdict from both.

    python experiments/bench_compare.py --device cuda            # 6.4 GB float32 outputs (KernelBench 19_ReLU's size)
    python experiments/bench_compare.py --device cpu             # small; the kernel under Triton's interpreter

On the CPU the one-pass side is the same kernel run by Triton's interpreter (slow: it shows the code
path works, not its speed).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--numel", type=int, default=None, help="elements per output (default 4096*393216 cuda, 1<<16 cpu)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch
    from kernel_env.judge import JudgeConfig
    from kernel_env.judge import compare as C

    dev = torch.device(args.device)
    n = args.numel or (4096 * 393216 if args.device == "cuda" else 1 << 16)
    cfg = JudgeConfig()  # the judge's own tolerances
    tol = {k: getattr(cfg, k) for k in ("atol_fp32", "rtol_fp32", "atol_half", "rtol_half", "tiny_output_frac")}
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def compare_with(maxima):
        """compare_outputs with _fused_maxima replaced by `maxima` (None: as the judge has it)."""
        def run(r, g):
            saved = C._fused_maxima
            C._fused_maxima = maxima or saved
            try:
                return C.compare_outputs([r], [g], tol)
            finally:
                C._fused_maxima = saved
        return run

    # on the CPU the kernel runs under the interpreter, past _fused_maxima's device check
    one_pass = compare_with(None if dev.type == "cuda" else
                            lambda r, g, rtol: C._fused_verdict(*C._run_fused(r.contiguous(), g.contiguous(), rtol, 8)))
    torch_passes = compare_with(lambda *a: None)

    t = time.perf_counter()
    if dev.type == "cuda":
        C.warm_fused(dev)
    sync()
    print(f"{args.device}: outputs of {n} elements; one-pass kernel compiled in {time.perf_counter() - t:.2f} s")

    def best(fn, r, g):
        ts, out = [], None
        for _ in range(args.repeats):
            sync()
            t0 = time.perf_counter()
            out = fn(r, g)
            sync()
            ts.append(time.perf_counter() - t0)
        return min(ts), out

    r = torch.randn(n, device=dev)
    g = r + 1e-6 * torch.randn(n, device=dev)
    print(f"{'case':<24} {'torch passes':>14} {'one pass':>12} {'ratio':>7}  same verdict")
    rows = [("float32 match", r, g)]
    for label, idx, val in (("float32 NaN", n - 3, math.nan), ("float32 +inf", 7, math.inf),
                            ("float32 out of tol", n // 2, 5.0)):
        bad = g.clone()
        bad[idx] = val
        rows.append((label, r, bad))
    h = r[: n // 4].half()
    rows.append(("float16 match", h, (h.float() + 1e-3).half()))
    for label, a, b in rows:
        t_torch, v_torch = best(torch_passes, a, b)
        t_one, v_one = best(one_pass, a, b)
        print(f"{label:<24} {t_torch * 1e3:>11.1f} ms {t_one * 1e3:>9.1f} ms {t_torch / t_one:>6.1f}x  "
              f"{'yes' if v_torch == v_one else 'NO: ' + str(v_torch) + ' vs ' + str(v_one)}")


if __name__ == "__main__":
    main()
