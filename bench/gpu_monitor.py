"""GPU utilisation from nvidia-smi, sampled every 0.5 s for the whole run (absent on the CPU: None).

`nvidia-smi --query-gpu=index,utilization.gpu,clocks.sm,temperature.gpu,power.draw -lms 500` is one
process; a thread reads its lines. Utilisation is the share of the sample period in which some kernel
ran (nvidia-smi's definition). The SM clock, temperature and power are kept to tell a slow timing from
a slow clock (spread under load). Indices are nvidia-smi's (physical) ones.
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time


class GpuMonitor:
    def __init__(self, enabled: bool = True):
        # (monotonic time, gpu index, util %, SM MHz, temperature C, power W); the last three None when unread
        self.samples: list[tuple[float, int, float, float | None, float | None, float | None]] = []
        self.proc = None
        if enabled and shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu,clocks.sm,temperature.gpu,power.draw",
                                          "--format=csv,noheader,nounits", "-lms", "500"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                idx, util, *rest = (x.strip() for x in line.split(","))
                self.samples.append((time.monotonic(), int(idx), float(util), *(_num(x) for x in (rest + ["", "", ""])[:3])))
            except ValueError:
                continue

    def mean(self, t0: float, t1: float, gpus: list[int] | None = None) -> float | None:
        """Mean utilisation % over [t0, t1] (monotonic), over `gpus` (default: all)."""
        xs = [u for t, i, u, *_ in self.samples if t0 <= t <= t1 and (gpus is None or i in gpus)]
        return sum(xs) / len(xs) if xs else None

    def clock_at(self, t0: float, t1: float) -> dict | None:
        """SM clock (min, mean MHz), temperature (max C) and power (max W) sampled in [t0, t1]."""
        xs = [e for e in self.samples if t0 - 0.5 <= e[0] <= t1 + 0.5]
        clk = [e[3] for e in xs if e[3] is not None]
        if not clk:
            return None
        temp, power = [e[4] for e in xs if e[4] is not None], [e[5] for e in xs if e[5] is not None]
        return {"sm_mhz_min": min(clk), "sm_mhz_mean": round(sum(clk) / len(clk)),
                "temp_c_max": max(temp) if temp else None, "power_w_max": max(power) if power else None}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)


def _num(x: str) -> float | None:
    try:
        return float(x)
    except ValueError:  # "[N/A]" and the like
        return None
