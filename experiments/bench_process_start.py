"""The CPU seconds a candidate process spends before its evaluation is known, piece by piece, side by side.

Each piece runs in fresh interpreters (`--repeats` of them; medians printed), as the judge's idle processes
start:

  torch            import torch
  watch, guarded   the runtime watch's first use with torch's dynamo guard left on its dispatch mode
                   (it imports torch._dynamo at the first call)
  watch, unguarded the same use as the runner makes it now (share.without_dynamo_guard)
  triton_key       Triton's hash of its install (each run process computed it at its first launch; now
                   the judge computes it once: environ.triton_key)
  build process    what a build process imports before it gets its submission (torch, its extension
                   module, Triton): the process an inert import no longer needs

    python experiments/bench_process_start.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEAD = "import os, json\ndef cpu():\n    t = os.times()\n    return t.user + t.system\n"
PIECES = {
    "torch": "c0 = cpu()\nimport torch\nout = cpu() - c0\n",
    "watch, guarded": ("import torch\nfrom kernel_env.candidate import watch\n"
                       "raw = watch.Watch.__dict__['__torch_dispatch__']\n"
                       "watch.Watch.__torch_dispatch__ = torch._disable_dynamo(raw, recursive=True)\n"
                       "c0 = cpu()\nwith watch.Watch():\n    torch.zeros(4).fill_(1)\nout = cpu() - c0\n"),
    "watch, unguarded": ("import torch\nfrom kernel_env.candidate import watch\n"
                         "c0 = cpu()\nwith watch.Watch():\n    torch.zeros(4).fill_(1)\nout = cpu() - c0\n"),
    "triton_key": ("import torch, triton\nimport triton.runtime.cache as c\n"
                   "c0 = cpu()\nc.triton_key()\nout = cpu() - c0\n"),
    "build process": ("c0 = cpu()\nimport torch\nimport torch.utils.cpp_extension\nimport triton\n"
                      "import triton.language\nout = cpu() - c0\n"),
}


def measure(code: str) -> float:
    r = subprocess.run([sys.executable, "-c", HEAD + code + "print(json.dumps(out))"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return float(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    runs = {name: [] for name in PIECES}
    for _ in range(args.repeats):  # interleaved: a busy moment of the machine falls on all alike
        for name, code in PIECES.items():
            runs[name].append(measure(code))
    print(f"{'piece':<18} CPU s p50 (min-max) over {args.repeats} fresh processes")
    for name, xs in runs.items():
        print(f"{name:<18} {statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})")
    g, u = statistics.median(runs["watch, guarded"]), statistics.median(runs["watch, unguarded"])
    print(f"the dynamo guard's cost per run process: {g - u:.2f} CPU-s")


if __name__ == "__main__":
    main()
