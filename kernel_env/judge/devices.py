"""TRUSTED: the device slots. One measurement per device at a time, and the windows that keep a run
process's first GPU work out of another candidate's timing.

Per device: a lock (the slot: candidate code runs on a GPU only while it holds it), how many
evaluations are headed there (to pick the least loaded device and to know when nobody waits), how
long the slot was held, and a gate with three counts: candidates being run or timed ("timing"),
timings about to start ("want"), run processes with a warm-up step under way ("warming").

A warm-up step begun between two slots may still be under way when the next slot's timing begins (no
step begins inside a candidate's run). Its process is then stopped (SIGSTOP) until that run ends: the
process is the judge's own code still (no submission is loaded before it has warmed up), and a
stopped process puts no GPU work beside the timed calls. Signals reach a process from user space only
between system calls, so none is stopped inside a driver call.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import asynccontextmanager

from .deadlines import start_time


class DeviceSlots:
    def __init__(self, devices: tuple):
        self.locks = {g: asyncio.Lock() for g in devices}
        self.pending = {g: 0 for g in devices}  # evaluations headed to the device, the one measuring included
        self.busy_s = {g: 0.0 for g in devices}
        # when the device's slot was last let go, and how long it stood free before its holder took it:
        # a slot taken right after another one finds the GPU busy until now (JudgeConfig.busy_warmup_s)
        self.released_at = {g: float("-inf") for g in devices}
        self.free_before_s = {g: float("inf") for g in devices}
        self.gate = {g: {"timing": 0, "want": 0, "warming": 0} for g in devices}
        # the processes (PID -> start time, /proc/PID/stat) of each warm-up step under way, and those
        # stopped for a timing; how many steps were stopped, in all
        self.warmers: dict = {g: {} for g in devices}
        self.stopped: dict = {g: {} for g in devices}
        self.warmers_stopped = 0

    def pick(self) -> int:
        """The device with the fewest evaluations headed to it."""
        return min(self.pending, key=lambda g: self.pending[g])

    @asynccontextmanager
    async def slot(self, gpu: int):
        """The device's exclusive slot; the time it is held counts as busy."""
        async with self.locks[gpu]:
            t = time.monotonic()
            self.free_before_s[gpu] = t - self.released_at[gpu]
            try:
                yield
            finally:
                self.released_at[gpu] = time.monotonic()
                self.busy_s[gpu] += self.released_at[gpu] - t

    @asynccontextmanager
    async def warm_window(self, gpu: int, pids: dict | None = None):
        """A run process's first GPU work waits while a candidate on the device runs or is about to: on
        the H200, run processes starting beside a timing slowed its calls (docs/design/timing.md).
        `pids`: the step's processes (PID -> start time), stopped if a timing begins meanwhile."""
        g = self.gate[gpu]
        while g["timing"] or g["want"]:
            await asyncio.sleep(0.01)
        g["warming"] += 1
        key = object()
        if pids:
            self.warmers[gpu][key] = pids
        try:
            yield
        finally:
            g["warming"] -= 1
            self.warmers[gpu].pop(key, None)

    @asynccontextmanager
    async def timing_window(self, gpu: int, wait_s: float):
        """A candidate runs and is timed: no warm-up starts meanwhile; those under way are waited for,
        up to wait_s (0 under load: the slot does not wait for the pool)."""
        g = self.gate[gpu]
        g["want"] += 1
        try:
            await self.warmers_done(gpu, wait_s)
        finally:
            g["want"] -= 1
        g["timing"] += 1
        try:
            yield
        finally:
            g["timing"] -= 1
            self.resume_warmers(gpu)

    def stop_warmers(self, gpu: int) -> bool:
        """Stop the processes of every warm-up step under way on the device, until the timing window
        ends. True if every step's processes are stopped (or gone); False if a step has none known or
        one could not be signalled: its GPU work may then still come."""
        ok = self.gate[gpu]["warming"] == len(self.warmers[gpu])
        for pids in self.warmers[gpu].values():
            for pid, start in pids.items():
                if pid in self.stopped[gpu]:
                    continue
                if start_time(pid) != start:  # gone (its PID maybe someone else's now)
                    continue
                try:
                    os.kill(pid, signal.SIGSTOP)
                    self.stopped[gpu][pid] = start
                except ProcessLookupError:
                    pass
                except OSError:
                    ok = False
            self.warmers_stopped += 1
        return ok

    def resume_warmers(self, gpu: int) -> None:
        for pid, start in self.stopped[gpu].items():
            if start_time(pid) == start:
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
        self.stopped[gpu].clear()

    async def warmers_done(self, gpu: int, wait_s: float) -> float:
        """Wait, up to wait_s, until no run process has a warm-up step under way on the device (one begun
        before this slot's timing window: none begins inside it). Returns the seconds waited."""
        g, t = self.gate[gpu], time.monotonic()
        while g["warming"] and time.monotonic() - t < wait_s:
            await asyncio.sleep(0.005)
        return time.monotonic() - t


@asynccontextmanager
async def queued(stats: dict, counter: str, slot):
    """Hold `slot`; while waiting for it, count in stats[counter] (also when cancelled)."""
    stats[counter] += 1
    waiting = True
    try:
        async with slot:
            stats[counter] -= 1
            waiting = False
            yield
    finally:
        if waiting:
            stats[counter] -= 1
