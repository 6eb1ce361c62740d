"""TRUSTED: the device slots. One measurement per device at a time, and the windows that keep a run
process's first GPU work out of another candidate's timing.

Per device: a lock (the slot: one candidate run and timed at a time), how many
evaluations are headed there (to pick the least loaded device and to know when nobody waits), how
long the slot was held, and a gate with three counts: candidates being run or timed ("timing"),
timings about to start ("want"), run processes with a warm-up step under way ("warming").

A warm-up step begun between two slots may still be under way when the next slot's timing begins (no
step begins inside a candidate's run). Its process is then stopped (SIGSTOP) until that run ends: the
process is the judge's own code still (no submission is loaded before it has warmed up), and a
stopped process puts no GPU work beside the timed calls. Signals reach a process from user space only
between system calls, so none is stopped inside a driver call.

An evaluation's end (its candidate killed and gone, the reference worker's compare of the rechecks)
is its tail. A holder may hand its tail on (`Turn.hand_on`): the slot then goes to the next
evaluation as soon as its own candidate is timed, and the next one's trials and their check run while
the tail does; its timing waits for the tail to end (`Turn.after_previous`). No timing ever has other
evaluations' GPU work beside it: the tail's candidate is gone and its compare done before it starts.
The tail's first part, its candidate's end, is a moment of its own (`Turn.after_previous_candidate`):
the device memory that candidate held is back then, while the compare still runs. A next evaluation
waiting for that moment asks the reference worker for its slots before the compare is asked
(`Turn.next_asks_first`): the worker answers one request at a time, and the compare would otherwise
hold the next evaluation's trials back until it ends.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import asynccontextmanager

from .deadlines import start_time


NEXT_ASK_WAIT_S = 1.0  # the longest a compare waits for the next evaluation's PREPARE to be asked first


class Turn:
    """One holding of a device's slot, and the evaluation's tail after it. `previous`: the turn before
    (its `tail` ends once its candidate is gone and its compare done); `label`: what the holder
    evaluates (a task id), so the next one knows what it runs beside."""

    def __init__(self, previous: "Turn | None", label: str | None = None):
        self.previous, self.label = previous, label
        self.tail = asyncio.get_running_loop().create_future()
        self.candidate_ended = asyncio.get_running_loop().create_future()  # its candidate has exited
        self.handed_on = False
        # the next turn waits for this one's candidate to end, then asks the worker for its slots:
        # this one's compare is asked after that (next_asked), within NEXT_ASK_WAIT_S
        self.next_waits = False
        self.next_asked = asyncio.get_running_loop().create_future()

    def hand_on(self) -> None:
        """This holder ends its tail after the slot (end_tail): the next holder starts beside it."""
        self.handed_on = True

    def previous_running(self) -> bool:
        p = self.previous
        # a turn of another event loop (a Judge used from several loops, evaluate_sync) ended with its loop
        return p is not None and not p.tail.done() and p.tail.get_loop() is asyncio.get_running_loop()

    def previous_candidate_running(self) -> bool:
        return self.previous_running() and not self.previous.candidate_ended.done()

    async def after_previous_candidate(self) -> float:
        """Wait until the previous evaluation's candidate has exited (its tail may go on: the compare).
        The previous evaluation then waits for this one's asked_beside before it asks for its compare.
        Returns the seconds waited."""
        t = time.monotonic()
        if self.previous_candidate_running():
            self.previous.next_waits = True
            await asyncio.wait({self.previous.candidate_ended, self.previous.tail}, return_when=asyncio.FIRST_COMPLETED)
        return time.monotonic() - t

    def asked_beside(self) -> None:
        """Said right before this evaluation's request to the worker beside the previous one's tail, with
        no await between (the worker's lock is then taken, or queued for, before the previous one's
        compare), or when it will ask nothing beside it any more."""
        p = self.previous
        if p is not None and p.next_waits and not p.next_asked.done():
            p.next_asked.set_result(None)

    def candidate_gone(self) -> None:
        if not self.candidate_ended.done():
            self.candidate_ended.set_result(None)

    async def next_asks_first(self) -> None:
        """Once this evaluation's candidate is gone: let a next one that waited for that ask the worker
        first (bounded: a next evaluation that never asks does not hold this compare back)."""
        if self.next_waits and not self.next_asked.done():
            await asyncio.wait({self.next_asked}, timeout=NEXT_ASK_WAIT_S)

    async def after_previous(self) -> float:
        """Wait until the previous evaluation's tail has ended (not cancelled by our own cancellation).
        Returns the seconds waited."""
        t = time.monotonic()
        if self.previous_running():
            await asyncio.wait({self.previous.tail})
        return time.monotonic() - t

    def end_tail(self) -> None:
        self.candidate_gone()
        if not self.tail.done():
            self.tail.set_result(None)


class DeviceSlots:
    def __init__(self, devices: tuple):
        self.locks = {g: asyncio.Lock() for g in devices}
        # the device's last holder (Turn): the next holder's timing waits for its tail
        self.turns: dict = {g: None for g in devices}
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
    async def slot(self, gpu: int, label: str | None = None):
        """The device's exclusive slot, as a Turn; the time it is held counts as busy. A holder that
        did not hand its tail on has ended it when the slot is let go."""
        async with self.locks[gpu]:
            t = time.monotonic()
            self.free_before_s[gpu] = t - self.released_at[gpu]
            turn = self.turns[gpu] = Turn(self.turns[gpu], label)
            if turn.previous is not None:
                turn.previous.previous = None  # the chain is one turn long: nothing older is kept
            try:
                yield turn
            finally:
                if not turn.handed_on:
                    turn.end_tail()
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
        async with slot as held:
            stats[counter] -= 1
            waiting = False
            yield held
    finally:
        if waiting:
            stats[counter] -= 1
