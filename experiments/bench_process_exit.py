"""How long a killed process holding device memory takes to be gone: SIGKILL to its main thread being
a zombie, to every thread exited (reaped), and (CUDA) to its device memory being free again. The judge
waits for the whole process before the next evaluation (judge/deadlines.gone): a zombie main thread
says nothing of the threads still exiting, which hold the memory and the GPU context.

    python experiments/bench_process_exit.py --device cuda --gb 0.1 6.4 25
    python experiments/bench_process_exit.py --device cpu --gb 0.1

Prints one line per process and a JSON summary last.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

CHILD = r'''
import sys, torch
device, gb = sys.argv[1], float(sys.argv[2])
x = torch.empty(int(gb * (1 << 30)) // 4, device=device)
x.fill_(1.0)
y = (x * 2).sum()
if device == "cuda":
    torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
'''


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def one(device: str, gb: float, free) -> dict:
    p = subprocess.Popen([sys.executable, "-c", CHILD, device, str(gb)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    if p.stdout.readline().strip() != "ready":
        raise SystemExit(f"the child process did not start (rc {p.wait()})")
    base = free() if free else None
    t0 = time.perf_counter()
    os.kill(p.pid, signal.SIGKILL)
    zombie = reaped = memory = None
    while reaped is None or (free and memory is None):
        now = time.perf_counter() - t0
        if zombie is None and _state(p.pid) in ("Z", "X", None):
            zombie = now
        if reaped is None and p.poll() is not None:
            reaped = now
            zombie = now if zombie is None else zombie
        if free and memory is None and free() - base >= 0.9 * gb * (1 << 30):
            memory = now
        if now > 60:
            raise SystemExit("the killed process was not gone after 60 s")
        time.sleep(0.0005)
    ms = lambda s: None if s is None else round(1e3 * s, 1)  # noqa: E731
    return {"gb": gb, "zombie_ms": ms(zombie), "reaped_ms": ms(reaped), "memory_back_ms": ms(memory)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--gb", type=float, nargs="+", default=[0.1, 6.4, 25.0])
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    free = None
    if args.device == "cuda":
        import torch
        torch.cuda.init()
        free = lambda: torch.cuda.mem_get_info()[0]  # noqa: E731
    rows = []
    for gb in args.gb:
        for _ in range(args.repeats):
            r = one(args.device, gb, free)
            rows.append(r)
            print(f"{gb:g} GB held: main thread a zombie after {r['zombie_ms']} ms, reaped after "
                  f"{r['reaped_ms']} ms, device memory back after {r['memory_back_ms']} ms", flush=True)
    print(json.dumps({"device": args.device, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
