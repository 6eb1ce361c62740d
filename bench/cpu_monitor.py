"""The machine's CPU time over a window, from /proc/stat (Linux; elsewhere None).

A thread reads the first line of /proc/stat every 0.5 s; usage(t0, t1) takes the two samples nearest
the window's ends. "niced" is the time of processes at a positive niceness: on this project's server
that is the candidate builds (JudgeConfig.build_nice, SCHED_IDLE), so it tells the builds' share of the
CPUs from everyone else's (run processes, reference worker, server, clients).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

STAT = Path("/proc/stat")


def _read() -> list[int] | None:
    try:
        fields = STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    return [int(x) for x in fields[1:9]] if fields and fields[0] == "cpu" else None


class CpuMonitor:
    def __init__(self, enabled: bool = True, every_s: float = 0.5):
        self.samples: list[tuple[float, list[int]]] = []  # (monotonic time, user nice system idle iowait irq softirq steal)
        self._stop = threading.Event()
        if enabled and _read() is not None:
            threading.Thread(target=self._run, args=(every_s,), daemon=True).start()

    def _run(self, every_s: float) -> None:
        while not self._stop.is_set():
            x = _read()
            if x is not None:
                self.samples.append((time.monotonic(), x))
            self._stop.wait(every_s)

    def usage(self, t0: float, t1: float) -> dict | None:
        """{"busy_pct": all CPUs' busy share, "niced_pct": the niced processes' share} over [t0, t1]."""
        if len(self.samples) < 2:
            return None
        a = min(self.samples, key=lambda s: abs(s[0] - t0))[1]
        b = min(self.samples, key=lambda s: abs(s[0] - t1))[1]
        d = [y - x for x, y in zip(a, b)]
        total = sum(d)
        if total <= 0:
            return None
        idle = d[3] + d[4]  # idle + iowait
        return {"busy_pct": 100 * (total - idle) / total, "niced_pct": 100 * d[1] / total}

    def stop(self) -> None:
        self._stop.set()
