"""The machine's CPU time over a window, from /proc (Linux; elsewhere None).

A thread reads /proc/stat every 0.25 s; usage(t0, t1) takes the two samples nearest the window's ends.
"niced" is the time of processes at a positive niceness: on this project's server that is the candidate
builds and their compilers (JudgeConfig.build_nice, SCHED_IDLE), so it tells the builds' share of the
CPUs from everyone else's. At each read the thread also reads each process's CPU time
(/proc/PID/stat) and adds what it used since the last read to a kind of process (by_kind; niced
processes by their executable: the build and compile processes' Python, or the compilers and linker
they run): an approximation (a process that ends between two reads loses what it used since the
last one: a short compiler most of its time), so "unseen" is what /proc/stat counted busy and no
kind did.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

STAT = Path("/proc/stat")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# a process's kind from its command line (the first that matches); niced processes are "builds"
KINDS = (("kernel_env.candidate.runner run", "run processes"), ("kernel_env.judge.reference_worker", "reference worker"),
         ("kernel_env.server", "server"), ("kernel_env.judge.prebuild", "precompiled header"),
         ("bench/run_all.py", "benchmark clients"), ("nvidia-smi", "nvidia-smi"))
BUILD_KINDS = ("builds: Python", "builds: compilers and linker")
# every kind usage() may name
ALL_KINDS = {k for _, k in KINDS} | set(BUILD_KINDS) | {"kernel threads", "sandbox set-up", "other", "unseen"}


def _read() -> list[int] | None:
    try:
        fields = STAT.read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    return [int(x) for x in fields[1:9]] if fields and fields[0] == "cpu" else None


def _processes() -> dict[int, tuple[int, int, int, str]]:
    """pid -> (utime + stime in ticks, nice, parent pid, executable's name)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            comm, rest = head.split("(", 1)[1], rest.split()
        except (OSError, IndexError, ValueError):
            continue
        try:
            out[int(name)] = (int(rest[11]) + int(rest[12]), int(rest[16]), int(rest[1]), comm)
        except (IndexError, ValueError):
            continue
    return out


def _kind(pid: int, nice: int, ppid: int, comm: str) -> str:
    if ppid == 2 or pid == 2:
        return "kernel threads"
    if comm in ("bwrap", "unshare"):
        return "sandbox set-up"
    if nice > 0:  # the builds: the build and compile processes' Python, or what they run
        return BUILD_KINDS[0] if comm.startswith("python") else BUILD_KINDS[1]
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return "other"
    return next((k for pat, k in KINDS if pat in cmd), "other")


class CpuMonitor:
    def __init__(self, enabled: bool = True, every_s: float = 0.25):
        self.samples: list[tuple[float, list[int]]] = []  # (monotonic time, user nice system idle iowait irq softirq steal)
        self.by_kind: list[tuple[float, dict[str, float]]] = []  # (monotonic time, CPU seconds per kind since the last)
        self._stop = threading.Event()
        if enabled and _read() is not None:
            threading.Thread(target=self._run, args=(every_s,), daemon=True).start()

    def _run(self, every_s: float) -> None:
        seen: dict[int, tuple[int, str, str]] = {}  # pid -> (ticks at the last read, executable, kind)
        n = 0
        while not self._stop.is_set():
            x = _read()
            if x is not None:
                self.samples.append((time.monotonic(), x))
            now, used = _processes(), {}
            for pid, (ticks, nice, ppid, comm) in now.items():
                before, was, kind = seen.get(pid, (0, None, None))
                if comm != was:  # new, or it has exec'd another program since (a sandbox starts its Python)
                    kind = _kind(pid, nice, ppid, comm)
                if ticks > before:
                    used[kind] = used.get(kind, 0.0) + (ticks - before) / TICK
                seen[pid] = (ticks, comm, kind)
            for pid in set(seen) - set(now):
                del seen[pid]
            if n:  # the first read holds every process's whole past
                self.by_kind.append((time.monotonic(), used))
            n += 1
            self._stop.wait(every_s)

    def usage(self, t0: float, t1: float) -> dict | None:
        """{"busy_pct": all CPUs' busy share, "niced_pct": the niced processes' share, "by_kind": % of all
        CPUs per kind of process} over [t0, t1]."""
        if len(self.samples) < 2:
            return None
        a = min(self.samples, key=lambda s: abs(s[0] - t0))
        b = min(self.samples, key=lambda s: abs(s[0] - t1))
        d = [y - x for x, y in zip(a[1], b[1])]
        total = sum(d)
        if total <= 0:
            return None
        idle = d[3] + d[4]  # idle + iowait
        kinds: dict[str, float] = {}
        for t, used in self.by_kind:
            if a[0] < t <= b[0]:
                for k, s in used.items():
                    kinds[k] = kinds.get(k, 0.0) + s
        cpus = total / TICK / max(b[0] - a[0], 1e-9)  # CPUs seen in /proc/stat
        span = max(b[0] - a[0], 1e-9) * cpus
        kinds["unseen"] = max((total - idle) / TICK - sum(kinds.values()), 0.0)
        return {"busy_pct": 100 * (total - idle) / total, "niced_pct": 100 * d[1] / total,
                "by_kind": {k: round(100 * s / span, 1) for k, s in sorted(kinds.items(), key=lambda kv: -kv[1])}}

    def stop(self) -> None:
        self._stop.set()
