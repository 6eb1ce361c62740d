"""GPU utilisation from nvidia-smi, sampled every 0.5 s for the whole run (absent on the CPU: None).

`nvidia-smi --query-gpu=index,utilization.gpu -lms 500` is one process; a thread reads its lines.
Utilisation is the share of the sample period in which some kernel ran (nvidia-smi's definition).
Indices are nvidia-smi's (physical) ones.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time


class GpuMonitor:
    def __init__(self, enabled: bool = True):
        self.samples: list[tuple[float, int, float]] = []  # (monotonic time, gpu index, util %)
        self.proc = None
        if enabled and shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu",
                                          "--format=csv,noheader,nounits", "-lms", "500"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                idx, util = (x.strip() for x in line.split(","))
                self.samples.append((time.monotonic(), int(idx), float(util)))
            except ValueError:
                continue

    def mean(self, t0: float, t1: float, gpus: list[int] | None = None) -> float | None:
        """Mean utilisation % over [t0, t1] (monotonic), over `gpus` (default: all)."""
        xs = [u for t, i, u in self.samples if t0 <= t <= t1 and (gpus is None or i in gpus)]
        return sum(xs) / len(xs) if xs else None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
