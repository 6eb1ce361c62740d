"""Env sessions that survive infrastructure failures: one episode on a kernel_env server."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional

log = logging.getLogger("kernel_env.agent")


class EnvFailure(RuntimeError):
    """The env could not be used (after retries). Never to be turned into a reward."""


class JudgeInternalError(RuntimeError):
    """The judge reported its own failure (error_kind 'internal') for a turn."""


def _transient(e: BaseException) -> bool:
    try:
        from websockets.exceptions import ConnectionClosed
    except ImportError:  # pragma: no cover
        ConnectionClosed = ()
    if isinstance(e, (OSError, TimeoutError, JudgeInternalError)) or (ConnectionClosed and isinstance(e, ConnectionClosed)):
        return True
    return isinstance(e, RuntimeError) and "CAPACITY_REACHED" in str(e)


class EnvSession:
    """One episode on a kernel_env server, robust to the server's infrastructure failing.

    reset() opens a WebSocket session and returns the reset observation (its `problem` is the first
    user message). step(code) submits one turn. On a connection error, a timeout, a full server or a
    judge-internal verdict, the session is dropped and a fresh one replays the episode (reset with
    the same episode id, then the earlier submissions, so the env's turn count is right) before the
    turn is sent again; after `retries` such attempts (backoff doubling from `backoff_s`) it raises
    EnvFailure. Refusals that retrying cannot fix (unknown task, wrong split) raise EnvFailure at once.
    Not thread-safe: one thread drives a session at a time.
    """

    def __init__(self, base_url: str, task_id: str, split: str, *, token: Optional[str] = None,
                 timeout_s: float = 900.0, retries: int = 3, backoff_s: float = 5.0):
        self.base_url, self.task_id, self.split = base_url, task_id, split
        self.token, self.timeout_s, self.retries, self.backoff_s = token, timeout_s, retries, backoff_s
        self.codes: list[str] = []
        self.episode_id: Optional[str] = None
        self.problem: str = ""
        self.reconnects = 0
        self._env = None

    def _open(self):
        from kernel_env import KernelEnv
        return KernelEnv(base_url=self.base_url, token=self.token, message_timeout_s=self.timeout_s).sync()

    def _drop(self):
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception:
                pass

    def _fresh(self):
        """A new server session at the episode's current turn."""
        from kernel_env import KernelAction
        self._drop()
        env = self._env = self._open()
        kw = {"episode_id": self.episode_id} if self.episode_id else {}
        obs = env.reset(task_id=self.task_id, split=self.split, **kw).observation
        self.episode_id = self.episode_id or (obs.metadata or {}).get("episode_id")
        for code in self.codes:
            self._check(env.step(KernelAction(code=code)))
        return obs

    @staticmethod
    def _check(result):
        if (result.observation.metadata or {}).get("error_kind") == "internal":
            raise JudgeInternalError(f"judge failed internally: {result.observation.feedback[:200]}")
        return result

    def _retrying(self, what: str, fn: Callable[[], Any]):
        last = None
        for attempt in range(self.retries + 1):
            try:
                if self._env is None:
                    if attempt or self.codes or self.episode_id:
                        self.reconnects += 1
                    obs = self._fresh()
                    if what == "reset":
                        return obs
                return fn()
            except Exception as e:
                if not _transient(e):
                    self._drop()
                    raise EnvFailure(f"env refused {what} on {self.task_id} ({self.base_url}): {e}") from e
                last = e
                self._drop()
                if attempt < self.retries:
                    wait = self.backoff_s * 2**attempt
                    log.warning("env %s on %s failed (%s: %s); retry %d/%d in %.0fs with a fresh session",
                                what, self.task_id, type(e).__name__, str(e)[:200], attempt + 1, self.retries, wait)
                    time.sleep(wait)
        raise EnvFailure(f"env {what} on {self.task_id} failed {self.retries + 1} times ({self.base_url}); "
                         f"last error {type(last).__name__}: {last}") from last

    def reset(self):
        self._drop()
        self.codes, self.episode_id = [], None
        obs = self._retrying("reset", lambda: None)
        self.problem = obs.problem
        return obs

    def step(self, code: str):
        from kernel_env import KernelAction
        if self._env is None and not self.problem:
            raise EnvFailure("step before reset")
        result = self._retrying("step", lambda: self._check(self._env.step(KernelAction(code=code))))
        self.codes.append(code)
        return result

    def state(self):
        return self._retrying("state", lambda: self._env.state())

    def close(self):
        self._drop()

