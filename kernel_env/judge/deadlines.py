"""TRUSTED: how long each step of a candidate process may take, on the judge's own clock.

A candidate's steps get deadlines from what the task needs, not one flat limit (docs/design/pipeline.md,
deadlines):

  import       the submission's import (build process; run process): at most `import_timeout_s` of
               time outside its compilers, and `build_timeout_s` in all. Compiling is what the judge
               sees, never what the candidate says: a real compiler (ninja, c++/gcc, nvcc and its
               tools, ptxas, ld) among the process's descendants, run from an executable the candidate
               cannot have written, that used CPU or was runnable in the interval. Python spinning at
               import shows no such process.
  construct    ModelNew(...): `run_construct_s` (its cost follows the parameter count, not a call).
  trial i      run_step_floor_s + run_ref_factor x the reference's time per call; trial 1 also
               run_first_call_s (a first call: Triton's JIT, lazy module loads, library handles).
  timing       the timing rule's own bound: its warm-up, each attempt's budget or minimum wall time,
               and per call the reference-scaled allowance plus run_call_overhead_s.
  after timing, the kernel-share calls: the floor plus a few calls.

Every step's clock stops while the candidate's compilers work (a kernel built at its first call),
and no step lasts longer than its budget plus build_timeout_s, compiling included. The run as a whole has run_timeout_s outside
compilers as a ceiling. A step starts when the judge sends its command or reads the runner's step
message, and steps come in one fixed order: a forged or repeated step message gets no time that the
sequence did not already grant.
"""
from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import protocol as P
from .config import JudgeConfig
from .sandbox import Proc, threads_exited

POLL_S = 1.0  # how often a long step looks at the candidate's processes (a /proc scan: ~10 ms)
_COMPILER = re.compile(r"(?:[\w.+-]*-)?(?:g\+\+|gcc|c\+\+|cc|clang\+\+|clang)(?:-[\d.]+)?|cc1|cc1plus|cc1obj|lto1|"
                       r"lto-wrapper|collect2|as|ld|ld\.bfd|ld\.gold|ld\.lld|ninja|nvcc|cicc|ptxas|cudafe\+\+|"
                       r"fatbinary|nvlink|nvptxas|ptxas-blackwell|llc")
PROFILE_CALLS = 5  # calls of the kernel-share measurement allowed for (candidate/share.py: 3 on a GPU)
AUDIT_CALLS = 8    # watched, untimed calls of the timing phase (candidate/runner.py MAX_AUDITS)


@dataclass
class _Stat:
    ppid: int
    state: str
    ticks: int  # user + system CPU, its own and its reaped children's
    start: int


def _stat(pid: str) -> _Stat | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return _Stat(int(rest[1]), rest[0].decode(), sum(int(x) for x in rest[11:15]), int(rest[19]))
    except (OSError, IndexError, ValueError):
        return None


def _waited_ns(pid: int) -> int | None:
    """Nanoseconds this process's main thread has spent runnable but waiting for a CPU (schedstat)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(root: int) -> dict[int, _Stat]:
    """The processes below `root` (its sandbox's too: a PID namespace's processes have PIDs out here)."""
    stats = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if name.isdigit():
            st = _stat(name)
            if st is not None:
                stats[int(name)] = st
    kids: dict[int, list] = {}
    for pid, st in stats.items():
        kids.setdefault(st.ppid, []).append(pid)
    out, todo = {}, list(kids.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid not in out:
            out[pid] = stats[pid]
            todo.extend(kids.get(pid, ()))
    return out


def start_time(pid: int) -> int | None:
    """A process's start time (clock ticks since boot), None once it is gone: with its PID it names one
    process, not whichever takes the PID next."""
    st = _stat(str(pid))
    return None if st is None or _exited(pid, st) else st.start


def process_tree(root: int) -> dict[int, int]:
    """`root` and the processes below it, PID -> start time."""
    tree = {pid: st.start for pid, st in descendants(root).items()}
    start = start_time(root)
    if start is not None:
        tree[root] = start
    return tree


def is_compiler(pid: int, untrusted_roots: tuple[str, ...]) -> bool:
    """A compiler by its executable (not its name: a process names itself), one the candidate could
    not have written (not under the folders it may write)."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    if exe.endswith(" (deleted)") or any(exe == r or exe.startswith(r + "/") for r in untrusted_roots):
        return False
    return bool(_COMPILER.fullmatch(os.path.basename(exe)))


class CompileClock:
    """How much of a candidate process's time its compilers worked, by the judge's sampling of its
    process tree. An interval counts as compiling when a compiler below it used CPU in it (its own
    or its reaped children's ticks grew) or is runnable at its end (waiting for a CPU counts too).
    Besides, `starved_s`: time its other processes were runnable but got no CPU (the kernel's
    schedstat), the most of any one process per interval: a build process runs under SCHED_IDLE, and
    on a loaded box its Python waited > 10 s for a CPU while loading a cached build. A process that
    spins or sleeps waits for no CPU on an idle core, so neither gains time this way."""

    def __init__(self, proc: Proc, untrusted_roots: tuple = ()):
        self.root = proc.proc.pid
        self.roots = tuple(os.path.realpath(r) for r in untrusted_roots)
        self.compile_s = 0.0
        self.starved_s = 0.0
        self._seen: dict[tuple, int] = {}
        self._waited: dict[tuple, int] = {}
        self._t = time.monotonic()

    def _active(self) -> tuple[bool, float]:
        seen, waited, active, starved = {}, {}, False, 0.0
        for pid, st in descendants(self.root).items():
            if not is_compiler(pid, self.roots):
                w = _waited_ns(pid)
                if w is not None:
                    waited[(pid, st.start)] = w
                    before = self._waited.get((pid, st.start))
                    if before is not None:
                        starved = max(starved, (w - before) / 1e9)
                continue
            key = (pid, st.start)
            before = self._seen.get(key)
            seen[key] = st.ticks
            if st.state in ("R", "D") or st.ticks > (before if before is not None else 0):
                active = True
        self._seen, self._waited = seen, waited
        return active, starved

    async def sample(self) -> None:
        active, starved = await asyncio.to_thread(self._active)
        now = time.monotonic()
        if active:
            self.compile_s += now - self._t
        else:  # an interval spent compiling is not counted twice
            self.starved_s += min(starved, now - self._t)
        self._t = now

    def restart(self) -> None:
        """A new step starts now: the interval before it was accounted to the step before."""
        self._t = time.monotonic()


@dataclass
class Step:
    """One step of a candidate process: its name for the feedback, its budget outside compilers and
    its wall time in all (compiling included)."""
    name: str
    budget_s: float
    wall_s: float
    t0: float = field(default_factory=time.monotonic)
    compile0: float = 0.0   # the time not the process's (Deadline._not_its) when the step started


class Deadline:
    """The judge's clock over a candidate process's steps (see the module's docstring)."""

    def __init__(self, proc: Proc, cfg: JudgeConfig, ceiling_s: float | None = None, untrusted_roots: tuple = ()):
        self.proc, self.cfg = proc, cfg
        self.clock = CompileClock(proc, untrusted_roots)
        self.t0 = time.monotonic()
        self.ceiling_s = ceiling_s  # of the whole, outside compilers (None: the steps' budgets only)
        self.judge_s = 0.0          # the judge's own work, not a compile, the process waited for (not its time)
        self.step: Step | None = None
        self.expired: str | None = None  # "step", "wall" or "ceiling"

    def start(self, name: str, budget_s: float, wall_s: float | None = None) -> None:
        """A step starts now: `budget_s` outside compilers, `wall_s` in all (default: the budget plus
        build_timeout_s, for a kernel built at its first call)."""
        self.clock.restart()
        self.step = Step(name, budget_s, budget_s + self.cfg.build_timeout_s if wall_s is None else wall_s,
                         compile0=self._not_its())

    def excuse(self, seconds: float, compiling: bool = True) -> None:
        """The process waited `seconds` for the judge's own work: not its time (the wall limit still
        counts it). A compile it asked for counts as compiling (the feedback says how much); other work
        (the check of its trials, the device made quiet for its timing) does not: then neither its step
        nor the run's ceiling runs down for it either."""
        if compiling:
            self.clock.compile_s += seconds
        else:
            self.judge_s += seconds
        self.clock.restart()

    def wall_left(self) -> float:
        """Seconds before the current step's wall limit."""
        return self.step.wall_s - (time.monotonic() - self.step.t0)

    def _not_its(self) -> float:
        return self.clock.compile_s + self.clock.starved_s + self.judge_s

    def spent(self) -> float:
        """The current step's seconds outside compilers (and outside waits for a CPU)."""
        s = self.step
        return (time.monotonic() - s.t0) - (self._not_its() - s.compile0)

    def _left(self) -> tuple[float, str]:
        s = self.step
        left, why = s.budget_s - self.spent(), "step"
        wall = s.wall_s - (time.monotonic() - s.t0)
        if wall < left:
            left, why = wall, "wall"
        if self.ceiling_s is not None:
            whole = self.ceiling_s - ((time.monotonic() - self.t0) - self._not_its())
            if whole < left:
                left, why = whole, "ceiling"
        return left, why

    async def next_message(self) -> dict:
        """The process's next message, or {"event": TIMEOUT} once the step (or the whole) is past its
        deadline; then `expired` says which."""
        while True:
            left, why = self._left()
            if left <= 0:
                self.expired = why
                return {"event": P.TIMEOUT}
            msg = await self.proc.next_message(min(left, POLL_S))
            if msg.get("event") != P.TIMEOUT:
                return msg
            await self.clock.sample()

    def describe(self, t_ref_ms: float | None = None) -> str:
        """Which deadline passed, for the feedback."""
        s = self.step
        ref = f" (reference {t_ref_ms:.3g} ms per call)" if t_ref_ms else ""
        comp = f"; {self.clock.compile_s:.0f} s of compiling not counted" if self.clock.compile_s >= 1 else ""
        if self.expired == "wall":
            return f"{s.name} took more than {s.wall_s:.0f} s, compiling included"
        if s.name == IMPORT:
            return (f"{s.name} ran past its {s.budget_s:.0f} s deadline for time outside compilers{comp} "
                    "(an infinite loop at import?)")
        if self.expired == "ceiling":
            return f"{s.name} ran past the run's {self.ceiling_s:.0f} s limit{comp}"
        return f"{s.name} ran past its {s.budget_s:.2g} s deadline{ref}{comp}"

    def details(self, t_ref_ms: float | None = None) -> dict:
        return {"step": self.step.name, "deadline_s": round(self.step.budget_s, 3), "wall_s": round(self.step.wall_s, 1),
                "expired": self.expired, "compile_s": round(self.clock.compile_s, 1),
                "starved_s": round(self.clock.starved_s, 1), "t_ref_ms": t_ref_ms}


IMPORT = "the import of the submission"


def import_step(dl: Deadline, cfg: JudgeConfig, limit_s: float | None = None) -> None:
    """The import: import_timeout_s (or `limit_s`) outside compilers, build_timeout_s in all."""
    dl.start(IMPORT, min(cfg.import_timeout_s if limit_s is None else limit_s, cfg.build_timeout_s), cfg.build_timeout_s)


def untrusted_roots(cfg: JudgeConfig, work_root: Path) -> tuple:
    """Folders a candidate can write (its own and the caches under bwrap or unshare; /dev/shm; the
    temporary folders without a sandbox): an executable there is not a compiler."""
    import tempfile
    return (str(work_root), str(cfg.cache_dir), "/dev", "/tmp", "/var/tmp", tempfile.gettempdir())


# ---------------------------------------------------------------- the budgets
def per_call_s(cfg: JudgeConfig, t_ref_ms: float | None) -> float:
    """What one call of the candidate may take: a multiple of the reference's time per call."""
    return cfg.run_ref_factor * (t_ref_ms or 0.0) / 1e3


def trial_s(cfg: JudgeConfig, t_ref_ms: float | None, i: int) -> float:
    """Trial i (0-based): inputs made, one watched forward, outputs copied."""
    return cfg.run_step_floor_s + per_call_s(cfg, t_ref_ms) + (cfg.run_first_call_s if i == 0 else 0.0)


def timing_s(cfg: JudgeConfig, t_ref_ms: float | None, timing: dict | None = None) -> float:
    """The timing phase, from the judge's word to the times: harness.time_calls' own bound (a warm-up
    of warmup_s and warmup_calls; per attempt, measured calls until the budget or the minimum wall time,
    at most max_timed_calls; the audits' watched calls), each call allowed its reference-scaled time."""
    t = timing or {}
    warmup_s = max(cfg.warmup_s, float(t.get("warmup_s", 0.0)))
    min_wall_s = max(cfg.timing_min_wall_s, float(t.get("min_wall_s", 0.0)))
    call = per_call_s(cfg, t_ref_ms) + cfg.run_call_overhead_s
    attempts = max(1, cfg.timing_attempts)
    per_attempt = max(cfg.timing_budget_s, min_wall_s) + cfg.max_timed_calls * cfg.run_call_overhead_s + 8 * call
    return (cfg.run_step_floor_s + warmup_s + (cfg.warmup_calls + 1 + AUDIT_CALLS) * call
            + attempts * per_attempt)


def after_timing_s(cfg: JudgeConfig, t_ref_ms: float | None) -> float:
    """From the times to the end: the last calls synchronised, the kernel-share calls (the profiler's
    start is a first call of its own)."""
    return cfg.run_step_floor_s + cfg.run_first_call_s + PROFILE_CALLS * (per_call_s(cfg, t_ref_ms)
                                                                          + cfg.run_call_overhead_s)


def spin_bound_s(cfg: JudgeConfig, t_ref_ms: float) -> float:
    """How long a kernel that never returns runs before the judge kills it: its first trial's deadline
    (the wait for messages ends at the deadline itself, not at the next poll)."""
    return trial_s(cfg, t_ref_ms, 0)


# ---------------------------------------------------------------- a killed process's exit
def _exited(pid: int, st: _Stat) -> bool:
    """A zombie whose threads have all exited: its memory, its GPU context included, is given back."""
    return st.state in ("Z", "X") and threads_exited(pid)


async def gone(pids: dict[int, _Stat], wait_s: float) -> bool:
    """Wait until every process of a snapshot (descendants()) has exited: none left running or
    exiting, none a zombie main thread whose other threads are still exiting. False after wait_s."""
    end = time.monotonic() + wait_s
    while True:
        alive = [p for p, st in pids.items() if (now := _stat(str(p))) is not None and now.start == st.start
                 and not _exited(p, now)]
        if not alive:
            return True
        if time.monotonic() >= end:
            return False
        await asyncio.sleep(0.005)  # the slot waits on this: a coarse poll is slot time


async def end_process(proc: Proc, wait_s: float) -> bool:
    """Kill a candidate process and everything below it, and wait until all of it has exited. A
    sandboxed process is not in its wrapper's process group (bwrap --new-session): the wrapper's exit
    says nothing of it, and a process still tearing down its CUDA context holds device memory (and a
    kernel still running) that the next evaluation would see. False if some remained after wait_s."""
    if getattr(proc, "ended", False):
        return True
    tree = await asyncio.to_thread(descendants, proc.proc.pid)
    tree[proc.proc.pid] = _stat(str(proc.proc.pid)) or _Stat(0, "X", 0, 0)
    await proc.close()
    proc.ended = await gone(tree, wait_s)
    return proc.ended
