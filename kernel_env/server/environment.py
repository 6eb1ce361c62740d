"""The OpenEnv environment: one instance per WebSocket session, one multi-turn episode at a time.

reset(task_id, split) checks the task and its split and returns the problem prompt; each step sends
the code to the shared judge, turns the Verdict into an observation and a reward, and appends a
history entry; the episode ends after `max_turns` judged turns.

Only the async methods are used (OpenEnv 0.10 awaits reset_async/step_async on the server's event
loop): the judge is async, so nothing here blocks the loop. Every error raised to the client is an
EnvError whose message is safe to show; anything unexpected is logged here and reported vaguely.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Optional

from openenv.core.env_server.interfaces import Environment

from ..judge.verdict import ErrorKind, Verdict
from ..models import KernelAction, KernelObservation, KernelState, TurnResult
from ..tasks import Task, TaskError, TaskSet
from .prompts import build_problem
from .reward import RewardConfig, compute_reward

log = logging.getLogger("kernel_env.server")

SPLITS = ("train", "eval")
GONE_CHECK_S = 15.0    # a step cancelled for its client that has not ended by then is logged
PROFILE_RETRY_S = 60.0  # a task whose profile failed gets a prompt without numbers until then


class EnvError(RuntimeError):
    """A refusal whose message goes to the client as is (OpenEnv sends str(e) in an error frame)."""


class DisconnectWatch:
    """One per WebSocket connection (app.py sets it in WATCH). OpenEnv 0.10 handles one message at
    a time and only notices a closed socket at its next receive, so a client that leaves mid-step
    would keep its judge work (and its session slot) running. A session's long await runs inside
    `cancelled_on_disconnect()`; app.py calls client_gone() when the socket closes, which cancels
    exactly that await and nothing else (never OpenEnv's own session bookkeeping)."""

    def __init__(self):
        self.gone = False
        self._task: Optional[asyncio.Task] = None

    def client_gone(self) -> None:
        if self.gone:  # once: a second cancel would cut the step's own clean-up short
            return
        self.gone = True
        if self._task is not None:
            self._task.cancel()
            asyncio.get_running_loop().call_later(GONE_CHECK_S, self._check_ended, self._task)

    def _check_ended(self, task: asyncio.Task) -> None:
        """A step cancelled for its client ends within a second or so (its processes killed, its
        files removed); one that has not is reported with where it is."""
        if not task.done() and self._task is task:
            log.error("a step whose client left %.0f s ago has not ended; it is at:\n%s", GONE_CHECK_S, where(task))


def where(task: asyncio.Task) -> str:
    """The awaits a pending task is in, outermost first, down to the future it waits on (Task.get_stack
    shows a suspended task's outermost frame only)."""
    lines = [repr(task)[:300]]
    aw = task.get_coro()
    while aw is not None:
        frame = getattr(aw, "cr_frame", None) or getattr(aw, "gi_frame", None) or getattr(aw, "ag_frame", None)
        if frame is None:
            lines.append(f"  waiting on {aw!r}"[:300])
            break
        lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        aw = getattr(aw, "cr_await", None) or getattr(aw, "gi_yieldfrom", None) or getattr(aw, "ag_await", None)
    return "\n".join(lines)


WATCH: ContextVar[Optional[DisconnectWatch]] = ContextVar("kernel_env_disconnect_watch", default=None)


@contextmanager
def cancelled_on_disconnect():
    watch = WATCH.get()
    if watch is None:  # not under app.py (e.g. a unit test): nothing to watch
        yield
        return
    if watch.gone:
        raise asyncio.CancelledError()
    watch._task = asyncio.current_task()
    try:
        yield
    finally:
        watch._task = None


@dataclass
class EnvSettings:
    max_turns: int = 4
    device: str = "cpu"           # shapes the prompt (kernel language, example)
    reward: RewardConfig = field(default_factory=RewardConfig)

    def __post_init__(self):
        if self.max_turns < 1:
            raise ValueError("max_turns must be >= 1")


class Shared:
    """What all sessions share: the judge (set at server startup), the tasks, settings, counters,
    and the prompt cache (coalesced, so 64 sessions resetting on one new task profile it once)."""

    def __init__(self, tasks: TaskSet, settings: EnvSettings, judge=None):
        self.tasks = tasks
        self.settings = settings
        self.judge = judge
        self.counters: Counter = Counter()
        self.step_seconds_total = 0.0
        self.step_seconds_max = 0.0
        self.steps_in_flight = 0
        self._prompts: dict[str, str] = {}
        self._pending: dict[str, asyncio.Future] = {}
        self._failed: dict[str, tuple[float, str]] = {}

    async def problem(self, task: Task) -> str:
        if task.task_id in self._prompts:
            return self._prompts[task.task_id]
        failed = self._failed.get(task.task_id)
        if failed and time.monotonic() - failed[0] < PROFILE_RETRY_S:  # don't respawn a failing profile per reset
            return failed[1]
        fut = self._pending.get(task.task_id)
        if fut is None:
            fut = asyncio.ensure_future(self._make_problem(task))
            self._pending[task.task_id] = fut
            fut.add_done_callback(lambda _f, k=task.task_id: self._pending.pop(k, None))
        # shield: one impatient client must not cancel the profile the others are waiting on
        return await asyncio.shield(fut)

    async def _make_problem(self, task: Task) -> str:
        profile, cache = None, True
        try:
            profile = await self.judge.task_profile(task.task_id)
        except Exception:  # the prompt still works without numbers; steps will report the cause
            log.exception("task_profile(%s) failed; prompt without roofline numbers", task.task_id)
            cache = False
        text = build_problem(task.task_id, task.source, profile, self.settings.device, self.settings.max_turns,
                             self.judge.policy_for(task.task_id))
        if cache:
            self._prompts[task.task_id] = text
            self._failed.pop(task.task_id, None)
        else:
            self._failed[task.task_id] = (time.monotonic(), text)
        return text

    async def aclose(self) -> None:
        """Stop profiles still running for prompts (their processes are killed by the judge)."""
        for fut in list(self._pending.values()):
            fut.cancel()
        await asyncio.gather(*self._pending.values(), return_exceptions=True)

    def stats(self) -> dict:
        c = self.counters
        steps = c["steps"]
        return {"episodes": c["episodes"], "steps": steps, "steps_in_flight": self.steps_in_flight,
                "steps_cancelled": c["steps_cancelled"], "judge_errors": c["judge_errors"],
                "refused": c["refused"], "correct": c["correct"],
                "stages": {k[6:]: v for k, v in c.items() if k.startswith("stage:")},
                "step_seconds_mean": self.step_seconds_total / steps if steps else None,
                "step_seconds_max": self.step_seconds_max}


def _internal_verdict(task_id: str) -> Verdict:
    # stage "run" + INTERNAL, as the judge itself reports its own failures
    return Verdict(task_id=task_id, stage="run", error_kind=ErrorKind.INTERNAL.value,
                   feedback="The judge failed internally on this submission (not your fault); "
                            "it was logged on the server. Try again.")


class KernelEnvironment(Environment[KernelAction, KernelObservation, KernelState]):
    SUPPORTS_CONCURRENT_SESSIONS = True  # sessions share only the judge, which queues fairly

    def __init__(self, shared: Shared):
        super().__init__()
        self._shared = shared
        self._state = KernelState()
        self._task: Optional[Task] = None
        self._done = False

    # -- OpenEnv API -------------------------------------------------------------------------
    async def reset_async(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
                          task_id: Optional[str] = None, split: Optional[str] = None,
                          **kwargs: Any) -> KernelObservation:
        sh = self._shared
        try:
            if kwargs:
                raise EnvError(f"unknown reset argument(s) {sorted(kwargs)[:5]}: "
                               "reset takes task_id, split and optionally episode_id")
            if task_id is None:
                raise EnvError("reset needs task_id (e.g. 'level1/19_ReLU') and split ('train' or 'eval')")
            split = "train" if split is None else split  # the safe default: never hands out held-out tasks
            if split not in SPLITS:
                raise EnvError(f"unknown split {str(split)[:40]!r}: use 'train' or 'eval'")
            if episode_id is not None and (not isinstance(episode_id, str) or not 0 < len(episode_id) <= 255):
                raise EnvError("episode_id must be a non-empty string of at most 255 characters")
            try:
                task = sh.tasks.get(task_id)
            except TaskError as e:
                raise EnvError(str(e)) from None
            if task.split != split:
                raise EnvError(f"task {task_id} belongs to the {task.split} split: "
                               f"a {split} session cannot use it")
        except EnvError:
            sh.counters["refused"] += 1
            raise
        with cancelled_on_disconnect():
            problem = await sh.problem(task)
        # the new episode starts only once everything it needs exists (a cancelled reset changes nothing)
        self._task, self._done = task, False
        self._state = KernelState(episode_id=episode_id or uuid.uuid4().hex, step_count=0,
                                  task_id=task.task_id, split=split, history=[])
        sh.counters["episodes"] += 1
        return KernelObservation(problem=problem, done=False, reward=None,
                                 metadata={"task_id": task.task_id, "split": split,
                                           "episode_id": self._state.episode_id,
                                           "max_turns": sh.settings.max_turns})

    async def step_async(self, action: KernelAction, timeout_s: Optional[float] = None,
                         **kwargs: Any) -> KernelObservation:
        sh = self._shared
        max_turns = sh.settings.max_turns
        if self._task is None:
            sh.counters["refused"] += 1
            raise EnvError("no episode: call reset(task_id=..., split=...) before step")
        if self._done:
            sh.counters["refused"] += 1
            raise EnvError(f"the episode is over (all {max_turns} turns used): call reset to start a new one")
        task_id = self._task.task_id
        t0 = time.monotonic()
        sh.steps_in_flight += 1
        try:
            with cancelled_on_disconnect():
                verdict = await sh.judge.evaluate(task_id, action.code)
        except asyncio.CancelledError:  # client gone: the judge kills its processes, removes its files
            sh.counters["steps_cancelled"] += 1
            raise
        except Exception:
            log.exception("judge.evaluate failed on %s", task_id)
            sh.counters["judge_errors"] += 1
            verdict = _internal_verdict(task_id)
        finally:
            sh.steps_in_flight -= 1
        dt = time.monotonic() - t0
        sh.step_seconds_total += dt
        sh.step_seconds_max = max(sh.step_seconds_max, dt)

        reward, reason = compute_reward(verdict, sh.settings.reward)
        turn = self._state.step_count + 1
        self._done = turn >= max_turns
        self._state.step_count = turn
        result = TurnResult.from_verdict(turn, verdict, reward, reason)
        self._state.history.append(result.judged())
        sh.counters["steps"] += 1
        sh.counters["stage:" + str(verdict.stage)] += 1
        sh.counters["correct"] += bool(verdict.correct)
        return result.observation(done=self._done, max_turns=max_turns, task_id=task_id)

    @property
    def state(self) -> KernelState:
        return self._state

    # The sync API is required by the base class but never used: the server awaits the async one.
    def reset(self, seed=None, episode_id=None, **kwargs):
        raise EnvError("kernel_env is async-only: connect with KernelEnv (WebSocket /ws)")

    def step(self, action, timeout_s=None, **kwargs):
        raise EnvError("kernel_env is async-only: connect with KernelEnv (WebSocket /ws)")
