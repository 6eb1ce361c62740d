"""Env sessions that survive infrastructure failures: one episode on a kernel_env server, or on
any of several front doors (`kernel-env serve` processes sharing one judge cluster)."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional, Sequence, Union
from urllib.parse import urlsplit

log = logging.getLogger("kernel_env.agent")


class EnvFailure(RuntimeError):
    """The env could not be used (after retries). Never to be turned into a reward."""


class JudgeInternalError(RuntimeError):
    """The judge reported its own failure (error_kind 'internal') for a turn."""


ENV_URL_SCHEMES = ("http", "https", "ws", "wss")


def parse_env_urls(text: str) -> list[str]:
    """The front doors of an `--env_url` value: one URL, a comma-separated list of them, or `local`.

    Returns `["local"]` for `local` (the caller starts an embedded server), else the URLs in the
    given order (the order episodes are spread in). Raises ValueError naming the bad entry for an
    empty list or entry, a URL that is not http(s)/ws(s) with a host, `local` among URLs (an
    embedded server's URL is only known once it runs), or a door listed twice (it would take twice
    the share of episodes, which nobody asks for on purpose).
    """
    entries = [e.strip() for e in (text or "").split(",")]
    if entries == ["local"]:
        return ["local"]
    if not any(entries):
        raise ValueError("--env_url is empty: give 'local' or one or more server URLs, comma-separated")
    if "local" in entries:
        raise ValueError(f"--env_url {text!r}: 'local' starts an embedded server and cannot be mixed with URLs")
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        if not entry:
            raise ValueError(f"--env_url {text!r}: entry {i + 1} is empty (a stray comma?)")
        try:
            parts = urlsplit(entry)
            parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
        except ValueError as e:
            raise ValueError(f"--env_url entry {entry!r} is not a URL: {e}") from None
        if parts.scheme not in ENV_URL_SCHEMES or not parts.hostname:
            raise ValueError(f"--env_url entry {entry!r} is not a server URL: expected "
                             f"http(s):// or ws(s)://HOST[:PORT], e.g. http://judge-box:8000")
        key = entry.rstrip("/")
        if key in seen:
            raise ValueError(f"--env_url {text!r} lists {seen[key]!r} twice")
        seen[key] = entry
    return entries


def describe_doors(urls: Sequence[str]) -> str:
    """For a log line: the one URL, or how many front doors and which."""
    return urls[0] if len(urls) == 1 else f"{len(urls)} front doors: {', '.join(urls)}"


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

    `base_url` may be a list of front doors that share one judge cluster. The episode starts at
    door `first_door % len(doors)` (callers pass a running episode count, so that episodes spread
    evenly), and every retry goes to the next door in the list: a door that goes away costs each
    of its episodes a replay, not the episode. Any door can take over because a door keeps nothing
    of an episode but its live session: reset takes the client's episode id, and the replayed
    submissions rebuild the turn count and history. A retry on a door not yet tried in this call is
    immediate (it is not the door that just failed); retries back off only once they come back
    round to a door that failed. `base_url` is the door in use, `doors_tried` every door the
    episode was sent to. Not thread-safe: one thread drives a session at a time.
    """

    def __init__(self, base_url: Union[str, Sequence[str]], task_id: str, split: str, *,
                 token: Optional[str] = None, timeout_s: float = 900.0, retries: int = 3,
                 backoff_s: float = 5.0, first_door: int = 0):
        self.doors = [base_url] if isinstance(base_url, str) else list(base_url)
        if not self.doors:
            raise ValueError("EnvSession needs at least one server URL")
        self._door = first_door % len(self.doors)
        self.task_id, self.split = task_id, split
        self.token, self.timeout_s, self.retries, self.backoff_s = token, timeout_s, retries, backoff_s
        self.codes: list[str] = []
        self.episode_id: Optional[str] = None
        self.problem: str = ""
        self.reconnects = 0
        self.doors_tried: list[str] = []
        self._env = None

    @property
    def base_url(self) -> str:
        """The front door the episode is on (or goes to next)."""
        return self.doors[self._door]

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
        if self.base_url not in self.doors_tried:
            self.doors_tried.append(self.base_url)
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
                failed_at = self.base_url
                self._door = (self._door + 1) % len(self.doors)
                if attempt < self.retries:
                    # the first len(doors) - 1 retries each go to a door not yet tried in this call
                    retries_on_tried_doors = attempt + 1 - (len(self.doors) - 1)
                    wait = self.backoff_s * 2 ** (retries_on_tried_doors - 1) if retries_on_tried_doors > 0 else 0.0
                    log.warning("env %s on %s failed at %s (%s: %s); retry %d/%d in %.0fs with a fresh session%s",
                                what, self.task_id, failed_at, type(e).__name__, str(e)[:200], attempt + 1,
                                self.retries, wait, f" at {self.base_url}" if len(self.doors) > 1 else "")
                    if wait:
                        time.sleep(wait)
        raise EnvFailure(f"env {what} on {self.task_id} failed {self.retries + 1} times "
                         f"({', '.join(self.doors_tried) or self.base_url}); "
                         f"last error {type(last).__name__}: {last}") from last

    def reset(self):
        self._drop()
        self.codes, self.episode_id, self.doors_tried = [], None, []
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

