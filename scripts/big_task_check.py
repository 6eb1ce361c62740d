"""Honest kernels on KernelBench's largest tasks (multi-GB inputs and outputs) on one GPU: each is
evaluated twice by one judge, and the verdict, the device memory in use at its peak (nvidia-smi,
every 0.1 s), the run process's own peaks and the reference worker's check of the trials (how many
batches: fewer trial slots than trials when memory is short) are printed, one JSON line each.

    PYTHONPATH=$PWD python3 scripts/big_task_check.py level1/19_ReLU examples/submissions/19_ReLU_cuda.py \\
        --kernelbench-dir .kb --idle-runners 16 > relu.log
"""
from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from kernel_env.judge import Judge, JudgeConfig  # noqa: E402
from kernel_env.tasks import TaskSet, task_folder  # noqa: E402
from tests.cases import submission  # noqa: E402


class PeakMemory:
    """The most device memory in use (MiB, nvidia-smi) since the last reset, sampled every 0.1 s."""

    def __init__(self):
        self.peak, self._stop = 0, False
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self):
        while not self._stop:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout.split()
            if out and out[0].isdigit():
                self.peak = max(self.peak, int(out[0]))
            time.sleep(0.1)

    def stop(self):
        self._stop = True


async def run(args) -> None:
    src = submission(Path(args.source))
    cfg = JudgeConfig(device="cuda", cache_dir=Path(args.cache_dir), idle_runners=args.idle_runners,
                      staged_builders=1, work_dir=tempfile.mkdtemp(prefix="kernel_env_big_"))
    judge = Judge(cfg, TaskSet(task_folder({args.task}, args.kernelbench_dir)))
    mem = PeakMemory()
    try:
        for i in range(args.repeats):
            mem.peak = 0
            t = time.monotonic()
            v = await judge.evaluate(args.task, src)
            ph = v.details.get("run_phases") or {}
            print(json.dumps({
                "task": args.task, "i": i, "s": round(time.monotonic() - t, 1), "stage": v.stage,
                "kind": v.error_kind, "t_new_ms": v.t_new_ms, "t_ref_ms": v.t_ref_ms, "peak_mib": mem.peak,
                "feedback": v.feedback[-3000:],
                "run_phases": {k: x for k, x in ph.items() if "peak" in k or k in ("trials_s", "timing_s", "gate_s")},
                "check": (v.details.get("ref_phases") or {}).get("check"), "timings": v.timings}, default=str), flush=True)
    finally:
        mem.stop()
        await judge.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task")
    ap.add_argument("source", help="the honest submission (a file; tests/cases.py fills in placeholders)")
    ap.add_argument("--kernelbench-dir", default=".kb")
    ap.add_argument("--cache-dir", default="/tmp/kc")
    ap.add_argument("--idle-runners", type=int, default=2, help="idle run processes (a server keeps 16)")
    ap.add_argument("--repeats", type=int, default=2)
    asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    main()
