"""Held-out multi-turn evaluation of a model on kernel_env, and the helpers grpo_kernel.py imports.

    python baseline_eval.py --env_url local --policy openai --base_url http://localhost:8001/v1 \\
        --model Qwen/Qwen2.5-Coder-7B-Instruct --out runs/baseline
    python baseline_eval.py --env_url http://EVAL_BOX:8000 --policy transformers --model ./my-checkpoint
    python baseline_eval.py --env_url local --policy vllm --model ./my-checkpoint --samples 4
    python baseline_eval.py --env_url local --policy replay --solutions DIR --split train

An episode is what training does (grpo_kernel.py): reset one env session on a task (its problem is
the first user message), then model turn -> `extract_code` -> env.step -> `feedback_message` as the
next user turn, until the env ends the episode (its max turns) or the next turn would not fit the
token budget. Episodes run concurrently (`--concurrency`); a progress bar shows them finish.
Outputs in `--out`: `episodes.jsonl` (one record per episode, the same format as the trainer's
`rollouts-rank*.jsonl`), `summary.json` (`summarize` of all episodes, plus per task), and a table
on stdout.

Policies:
- `openai`: any OpenAI-compatible chat endpoint (`vllm serve`, SGLang, a hosted API): `--base_url`,
  `--model`, key from `--api_key` or $OPENAI_API_KEY. Uses the `openai` package when installed,
  else plain HTTP. An endpoint that says the context is full ends the episode ("budget").
- `vllm`: a local `vllm.LLM` (only when vllm is importable).
- `transformers`: local `generate` (batched across episodes), any device.
- `replay`: submits files from `--solutions DIR` instead of asking a model (oracle runs, env tests).
  Turn 1 submits `DIR/<task id with "/" replaced by "__">.py` (e.g. `level1__1_Small_ReLU.py`);
  turn k > 1 submits `DIR/<same>.turn<k>.py` if it exists, and the episode ends after the last file.
  By default only tasks of the split with a turn-1 file are run; with `--tasks` a listed task
  without a file is submitted empty code (a format failure).

`--env_url local` starts an embedded env server (`python -m kernel_env.server.app` on a free
loopback port, CPU device unless `--local_env_device`), stopped at exit.

Infrastructure failures (server down, timeouts, the judge failing internally) are retried with a
fresh session that replays the episode's earlier submissions, then fail the run: they are never
scored as a wrong kernel.
"""
from __future__ import annotations

import argparse
import atexit
import json
import logging
import math
import os
import queue
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

log = logging.getLogger("baseline_eval")

REPO = Path(__file__).resolve().parent
COMPILED_STAGES = ("run", "correctness", "timed")  # the submission built and ran (judge Verdict.compiled)
SUMMARY_KEYS = ("compile_pct", "correct_pct", "correct_turn1_pct", "faster_than_ref_pct", "mean_speedup",
                "median_roofline_frac", "suspicious")
TOKEN_ENV = "KERNEL_ENV_TOKEN"


# ---------------------------------------------------------------------------------------------
# The helpers the seed (grpo_kernel.py) imports
# ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_PYTHON_TAGS = ("python", "py", "python3", "py3")


def _fenced_blocks(text: str) -> list[tuple[str, str, bool]]:
    """(language tag, body, closed) of each fenced block, in order. Line-based, CommonMark-like:
    a fence opens with a line of >= 3 backticks and an optional tag, and closes with a line of
    only backticks at least as long. An unclosed last block runs to the end of the text."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).lower()
        body, j = [], i + 1
        while j < len(lines):
            s = lines[j].strip()
            if len(s) >= len(fence) and set(s) == {"`"}:
                break
            body.append(lines[j])
            j += 1
        closed = j < len(lines)
        if not closed and body and body[-1].rstrip().endswith("```"):  # "...code```" at the very end
            body[-1] = body[-1].rstrip()[:-3]
        blocks.append((tag, "\n".join(body), closed))
        i = j + 1
    return blocks


def extract_code(text: str) -> str:
    """The submission in a model answer: the body of one fenced Python code block.

    - Blocks are fenced with ``` (or longer) lines; the tag after the opening fence names the language.
    - Candidates are blocks tagged python/py/python3 or untagged; blocks in other languages (a C++ or
      CUDA listing shown for explanation) are never the submission.
    - Of several candidates, the last one that defines `class ModelNew` wins (models often show a
      snippet first and the full module last); failing that the last python-tagged block, then the
      last untagged one.
    - An unterminated fence (an answer cut off at the length limit) counts as a block that runs to the
      end of the text, so a truncated answer still yields its (probably incomplete) code.
    - No candidate block -> "" (the env answers that with a format failure).
    The result has no trailing whitespace and ends with a newline when non-empty.
    """
    if not text:
        return ""
    cands = [(tag, body) for tag, body, _ in _fenced_blocks(text) if tag in _PYTHON_TAGS or tag == ""]
    if not cands:
        return ""
    with_model = [b for _, b in cands if re.search(r"^\s*class\s+ModelNew\b", b, re.M)]
    tagged = [b for t, b in cands if t in _PYTHON_TAGS]
    pick = (with_model or tagged or [b for _, b in cands])[-1]
    pick = pick.strip("\n").rstrip()
    return pick + "\n" if pick.strip() else ""


def feedback_message(obs, truncated: bool) -> str:
    """The next user turn after a judged attempt: what happened and what to do now.

    `obs` is the KernelObservation the step returned (stage, correct, speedup, roofline_frac,
    feedback, metadata turn/max_turns); `truncated` says the model's answer hit the length limit
    (no end-of-turn token): the message then says so first, since the code may be missing its end.
    The env's own feedback text (build errors, mismatch numbers, timings) is included as is.
    """
    meta = getattr(obs, "metadata", None) or {}
    turn, max_turns = meta.get("turn"), meta.get("max_turns")
    parts = []
    if truncated:
        parts.append("Your previous answer was cut off at the length limit before it ended, so the code block "
                     "may be incomplete. Keep the next answer shorter: little prose, one code block.")
    head = f"Attempt {turn} of {max_turns}" if turn and max_turns else "Your attempt"
    if obs.correct:
        sp = f", {obs.speedup:.3g}x the reference's speed" if obs.speedup else ""
        head += f": correct{sp}."
    else:
        head += f": not accepted (failed at the {obs.stage or 'format'} stage)."
    parts.append(head)
    if (obs.feedback or "").strip():
        parts.append(obs.feedback.strip())
    left = (max_turns - turn) if turn and max_turns else None
    ask = ("Make it faster while keeping it correct." if obs.correct
           else "Fix the problem.")
    if left is not None:
        ask += f" You have {left} attempt{'s' if left != 1 else ''} left."
    parts.append(ask + " Reply with the complete module (imports, kernel source, `class ModelNew`) in exactly "
                       "one ```python code block.")
    return "\n\n".join(parts)


def split_task_ids(split: str, levels: Sequence[int] = (1,), kernelbench_dir: str | None = None) -> list[str]:
    """Task ids of one split ("train" or "eval") for the given KernelBench levels, in problem order.

    The env's own split (`kernel_env.tasks.split_task_ids`: a hash of the task id), so the trainer,
    this evaluation and the server agree on which tasks are held out. `kernelbench_dir` empty/None:
    $KERNELBENCH_DIR, else the small CPU tasks shipped with kernel_env.
    """
    from kernel_env.tasks import split_task_ids as _split
    return _split(split, levels, kernelbench_dir or None)


def _turns(ep: dict) -> list[dict]:
    return ep.get("turns") or ep.get("history") or []


def _counts_correct(t: dict) -> bool:
    return bool(t.get("correct")) and not t.get("roofline_violation")


def _pct(k: int, n: int) -> Optional[float]:
    return 100.0 * k / n if n else None


def summarize(episodes: Sequence[dict]) -> dict:
    """Metrics over episodes (one episode = one task attempt of up to max_turns judged turns).

    Each episode is a dict with `turns`: a list of per-turn dicts with at least `stage`, `correct`,
    `speedup`, `roofline_frac`, `suspicious`, `roofline_violation` (the trainer's and this CLI's
    records; an env `history` list is used when `turns` is absent). A turn *compiles* when its stage
    is run, correctness or timed (it built and ran); it *counts as correct* when `correct` is true and
    it has no roofline violation (a time below the physical floor is not trusted). Percentages are
    0-100 over all N episodes, and None when N == 0:

    - compile_pct: episodes with at least one compiling turn.
    - correct_pct: episodes with at least one correct turn (any turn).
    - correct_turn1_pct: episodes whose first turn is correct (single-shot accuracy).
    - faster_than_ref_pct: episodes with a correct turn whose speedup (t_ref / t_new) is > 1.
    - mean_speedup: arithmetic mean, over episodes with a correct turn that has a speedup, of the best
      such speedup; None if there is none.
    - median_roofline_frac: median, over episodes with a correct turn that has a roofline fraction
      (t_min / t_new, 1 = the speed-of-light floor), of the best such fraction; None if there is none.
    - suspicious: the number of turns (all episodes) the judge flagged as suspicious or as a roofline
      violation — kernels to read by hand (0 when N == 0).
    Extra keys: episodes (N), turns (total judged turns), mean_turns, mean_return (mean of the
    episodes' `return` where recorded, else None), correct_by_turn (a list: % of episodes correct
    by turn k, k = 1..max turns, best-so-far).
    """
    n = len(episodes)
    compiled = correct = correct1 = faster = suspicious = 0
    speedups, fracs, returns = [], [], []
    max_t = max((len(_turns(ep)) for ep in episodes), default=0)
    by_turn = [0] * max_t
    n_turns = 0
    for ep in episodes:
        turns = _turns(ep)
        n_turns += len(turns)
        if any(t.get("stage") in COMPILED_STAGES for t in turns):
            compiled += 1
        ok = [t for t in turns if _counts_correct(t)]
        if ok:
            correct += 1
        if turns and _counts_correct(turns[0]):
            correct1 += 1
        sp = [float(t["speedup"]) for t in ok if t.get("speedup") is not None and math.isfinite(t["speedup"])]
        if sp:
            speedups.append(max(sp))
            if max(sp) > 1.0:
                faster += 1
        fr = [float(t["roofline_frac"]) for t in ok if t.get("roofline_frac") is not None]
        if fr:
            fracs.append(max(fr))
        suspicious += sum(1 for t in turns if t.get("suspicious") or t.get("roofline_violation"))
        first_ok = next((k for k, t in enumerate(turns) if _counts_correct(t)), None)
        if first_ok is not None:
            for k in range(first_ok, max_t):
                by_turn[k] += 1
        if ep.get("return") is not None:
            returns.append(float(ep["return"]))
    return {
        "compile_pct": _pct(compiled, n), "correct_pct": _pct(correct, n), "correct_turn1_pct": _pct(correct1, n),
        "faster_than_ref_pct": _pct(faster, n),
        "mean_speedup": sum(speedups) / len(speedups) if speedups else None,
        "median_roofline_frac": statistics.median(fracs) if fracs else None,
        "suspicious": suspicious,
        "episodes": n, "turns": n_turns, "mean_turns": n_turns / n if n else None,
        "mean_return": sum(returns) / len(returns) if returns else None,
        "correct_by_turn": [_pct(c, n) for c in by_turn],
    }


def episode_return(rewards: Sequence[float], mode: str = "discounted", gamma: float = 0.9) -> float:
    """The episode's scalar reward: sum_t gamma^t r_t ("discounted", t from 0) or max_t r_t ("best")."""
    if mode == "best":
        return max(rewards, default=0.0)
    if mode != "discounted":
        raise ValueError(f"unknown return mode {mode!r}: use discounted or best")
    return sum(gamma**t * r for t, r in enumerate(rewards))


def turn_record(result, *, text: str, code: str, truncated: bool, completion_tokens: Optional[int]) -> dict:
    """One judged turn as stored in episode records (trainer rollouts and this CLI alike)."""
    o = result.observation
    meta = o.metadata or {}
    return {"turn": meta.get("turn"), "stage": o.stage, "correct": bool(o.correct), "speedup": o.speedup,
            "reward": float(result.reward or 0.0), "reward_reason": meta.get("reward_reason"),
            "error_kind": meta.get("error_kind"), "roofline_frac": o.roofline_frac,
            "ref_roofline_frac": o.ref_roofline_frac, "t_ref_ms": o.t_ref_ms, "t_new_ms": o.t_new_ms,
            "t_min_ms": o.t_min_ms, "bound": o.bound, "suspicious": bool(meta.get("suspicious")),
            "roofline_violation": bool(meta.get("roofline_violation")), "feedback": o.feedback,
            "truncated": bool(truncated), "completion_tokens": completion_tokens,
            "code_chars": len(code)}


def flagged_turns(ep: dict) -> list[dict]:
    """The turns of an episode that the judge flagged (suspicious speedup or roofline violation), each
    with the task, the turn's code and its numbers: what goes to suspicious.jsonl for review."""
    out = []
    for k, t in enumerate(ep.get("turns") or []):
        if t.get("suspicious") or t.get("roofline_violation"):
            codes = ep.get("codes") or []
            out.append({"task_id": ep.get("task_id"), "mode": ep.get("mode"), "step": ep.get("step"),
                        "episode_id": ep.get("episode_id"), **t, "turn": t.get("turn") or k + 1,
                        "code": codes[k] if k < len(codes) else ""})
    return out


# ---------------------------------------------------------------------------------------------
# Env sessions that survive infrastructure failures, and an embedded server
# ---------------------------------------------------------------------------------------------

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():  # runs in the child before exec: SIGTERM when the parent dies
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class LocalEnvServer:
    """An embedded kernel_env server: `python -m kernel_env.server.app` on a free loopback port.

    A random token guards it; its log goes to `log_path`. `start()` waits for /health; `stop()`
    (also at interpreter exit, and when this process dies) sends SIGTERM, then SIGKILL.
    """

    def __init__(self, device: str = "cpu", extra_args: Sequence[str] = (), log_path: str | Path | None = None,
                 kernelbench_dir: str = "", ready_timeout_s: float = 600.0):
        self.device, self.extra_args, self.kernelbench_dir = device, list(extra_args), kernelbench_dir
        self.log_path = Path(log_path) if log_path else None
        self.ready_timeout_s = ready_timeout_s
        self.token = "local-" + secrets.token_hex(16)
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LocalEnvServer":
        self.port = _free_port()
        argv = [sys.executable, "-m", "kernel_env.server.app", "--host", "127.0.0.1", "--port", str(self.port),
                "--device", self.device, *self.extra_args]
        if self.kernelbench_dir:
            argv += ["--kernelbench-dir", self.kernelbench_dir]
        env = dict(os.environ, **{TOKEN_ENV: self.token})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        log.info("starting a local env server: %s", " ".join(argv))
        self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        if out is not subprocess.DEVNULL:
            out.close()
        atexit.register(self.stop)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EnvFailure(f"local env server exited with code {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        log.info("local env server ready at %s (log %s)", self.url, self.log_path)
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise EnvFailure(f"local env server did not come up in {self.ready_timeout_s:.0f}s; see {self.log_path}")

    def stop(self, timeout_s: float = 40.0) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
        except ProcessLookupError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks and atexit (which stop a local server) run."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


# ---------------------------------------------------------------------------------------------
# Policies
# ---------------------------------------------------------------------------------------------

class ContextFull(Exception):
    """The conversation no longer fits the model's context: the episode ends ("budget")."""


class NoMoreTurns(Exception):
    """The policy has nothing more to submit (replay ran out of files): the episode ends."""


class Policy:
    """answer(messages, task_id, turn) -> (text, truncated, completion_tokens or None)."""

    name = "policy"

    def answer(self, messages: list[dict], task_id: str, turn: int) -> tuple[str, bool, Optional[int]]:
        raise NotImplementedError

    def has_task(self, task_id: str) -> bool:
        return True

    def close(self) -> None:
        pass


class _Batcher:
    """Collects single requests from episode threads into batches for one batched backend call."""

    def __init__(self, fn: Callable[[list], list], max_batch: int, wait_s: float = 0.05):
        self.fn, self.max_batch, self.wait_s = fn, max(1, max_batch), wait_s
        self.q: queue.Queue = queue.Queue()
        self._t = threading.Thread(target=self._run, daemon=True, name="policy-batcher")
        self._t.start()

    def __call__(self, item):
        fut: Future = Future()
        self.q.put((item, fut))
        return fut.result()

    def _run(self):
        while True:
            batch = [self.q.get()]
            deadline = time.monotonic() + self.wait_s
            while len(batch) < self.max_batch:
                try:
                    batch.append(self.q.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            try:
                outs = self.fn([b[0] for b in batch])
                for (_, fut), out in zip(batch, outs):
                    fut.set_exception(out) if isinstance(out, BaseException) else fut.set_result(out)
            except BaseException as e:  # noqa: BLE001 - handed to the waiting episode threads
                for _, fut in batch:
                    fut.set_exception(e)


class ReplayPolicy(Policy):
    """Submits files from a folder (see the module docstring for the naming)."""

    name = "replay"

    def __init__(self, solutions: str | Path):
        self.dir = Path(solutions)
        if not self.dir.is_dir():
            raise SystemExit(f"--solutions: no such folder {solutions}")

    @staticmethod
    def file_stem(task_id: str) -> str:
        return task_id.replace("/", "__")

    def path(self, task_id: str, turn: int) -> Path:
        stem = self.file_stem(task_id)
        return self.dir / (f"{stem}.py" if turn == 1 else f"{stem}.turn{turn}.py")

    def has_task(self, task_id: str) -> bool:
        return self.path(task_id, 1).is_file()

    def answer(self, messages, task_id, turn):
        p = self.path(task_id, turn)
        if not p.is_file():
            if turn == 1:
                return "", False, 0  # no solution: an empty submission
            raise NoMoreTurns(str(p))  # no further turns for this task
        return f"```python\n{p.read_text()}\n```", False, None


class OpenAIPolicy(Policy):
    """An OpenAI-compatible chat completions endpoint."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str = "", max_tokens: int = 2048,
                 temperature: float = 1.0, top_p: float = 1.0, enable_thinking: Optional[bool] = None,
                 timeout_s: float = 600.0, retries: int = 4, use_sdk: Optional[bool] = None):
        self.base_url, self.model = base_url.rstrip("/"), model
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "") or "EMPTY"
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.extra = {} if enable_thinking is None else {"chat_template_kwargs": {"enable_thinking": enable_thinking}}
        self.timeout_s, self.retries = timeout_s, retries
        self._client = None
        if use_sdk is not False:
            try:
                import openai
                self._client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=timeout_s,
                                             max_retries=0)
            except ImportError:
                if use_sdk:
                    raise
        log.info("openai policy: %s model %s (%s)", self.base_url, model, "openai SDK" if self._client else "urllib")

    @staticmethod
    def _context_error(status: int, message: str) -> bool:
        m = message.lower()
        return status == 400 and any(k in m for k in ("context length", "maximum context", "context_length",
                                                       "too long", "max_tokens", "prompt is too long"))

    def _request(self, messages) -> tuple[str, str, Optional[int]]:
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "top_p": self.top_p, **self.extra}
        if self._client is not None:
            import openai
            try:
                r = self._client.chat.completions.create(
                    model=self.model, messages=messages, max_tokens=self.max_tokens, temperature=self.temperature,
                    top_p=self.top_p, extra_body=self.extra or None)
            except openai.BadRequestError as e:
                if self._context_error(400, str(e)):
                    raise ContextFull(str(e)) from e
                raise
            c = r.choices[0]
            return c.message.content or "", c.finish_reason or "", getattr(r.usage, "completion_tokens", None)
        req = urllib.request.Request(self.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {self.api_key}"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                r = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            if self._context_error(e.code, text):
                raise ContextFull(text) from e
            if 400 <= e.code < 500 and e.code not in (408, 409, 429):
                raise ValueError(f"endpoint refused the request ({e.code}): {text[:500]}") from e
            raise ConnectionError(f"endpoint error {e.code}: {text[:300]}") from e
        c = r["choices"][0]
        return (c.get("message") or {}).get("content") or "", c.get("finish_reason") or "", \
            (r.get("usage") or {}).get("completion_tokens")

    def answer(self, messages, task_id, turn):
        last = None
        for attempt in range(self.retries + 1):
            try:
                text, finish, ntok = self._request(messages)
                return text, finish == "length", ntok
            except (ContextFull, ValueError):
                raise
            except Exception as e:  # connection errors, 5xx, rate limits: retry, then fail loudly
                if type(e).__name__ in ("BadRequestError", "AuthenticationError", "NotFoundError",
                                        "PermissionDeniedError"):
                    raise
                last = e
                if attempt < self.retries:
                    time.sleep(2 * 2**attempt)
        raise RuntimeError(f"model endpoint {self.base_url} failed {self.retries + 1} times: {last}") from last


class TransformersPolicy(Policy):
    """Local `model.generate`, batching the turns of concurrent episodes."""

    name = "transformers"

    def __init__(self, model: str, max_tokens: int = 2048, temperature: float = 1.0, top_p: float = 1.0,
                 enable_thinking: bool = False, batch_size: int = 8, device: str = "auto", dtype: str = "auto",
                 max_context: int = 0):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        self.torch = torch
        tok = AutoTokenizer.from_pretrained(model)
        self.tok = getattr(tok, "tokenizer", tok)
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(device).eval()
        gen_eos = self.model.generation_config.eos_token_id
        gen_eos = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
        self.eos_ids = sorted({self.tok.eos_token_id, *gen_eos} - {None})
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.enable_thinking = enable_thinking
        self.max_context = max_context or getattr(self.model.config, "max_position_embeddings", 0) or 1 << 30
        self._batch = _Batcher(self._generate, batch_size)

    def _generate(self, prompts: list[list[int]]) -> list:
        torch = self.torch
        enc = self.tok.pad({"input_ids": prompts}, return_tensors="pt", padding=True)
        kw = dict(max_new_tokens=self.max_tokens, pad_token_id=self.tok.pad_token_id, eos_token_id=self.eos_ids)
        kw.update(do_sample=True, temperature=self.temperature, top_p=self.top_p) if self.temperature > 0 \
            else kw.update(do_sample=False)
        with torch.no_grad():
            out = self.model.generate(input_ids=enc["input_ids"].to(self.device),
                                      attention_mask=enc["attention_mask"].to(self.device), **kw)
        res = []
        for row in out[:, enc["input_ids"].shape[1]:].tolist():
            cut = next((k for k, t in enumerate(row) if t in self.eos_ids), None)
            ids = row if cut is None else row[:cut + 1]
            res.append((self.tok.decode(ids, skip_special_tokens=True), cut is None, len(ids)))
        return res

    def answer(self, messages, task_id, turn):
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False,
                                           enable_thinking=self.enable_thinking)
        if len(ids) + self.max_tokens > self.max_context:
            raise ContextFull(f"{len(ids)} prompt tokens + {self.max_tokens} > {self.max_context}")
        return self._batch(list(ids))


class VLLMPolicy(Policy):
    """A local vllm.LLM engine, batching the turns of concurrent episodes."""

    name = "vllm"

    def __init__(self, model: str, max_tokens: int = 2048, temperature: float = 1.0, top_p: float = 1.0,
                 enable_thinking: bool = False, batch_size: int = 256, tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float = 0.85, max_context: int = 0):
        try:
            from vllm import LLM, SamplingParams
        except ImportError as e:
            raise SystemExit("--policy vllm needs vllm installed (pip install vllm); or use --policy transformers, "
                             "or `vllm serve` + --policy openai") from e
        kw = {"max_model_len": max_context} if max_context else {}
        self.llm = LLM(model=model, tensor_parallel_size=tensor_parallel_size,
                       gpu_memory_utilization=gpu_memory_utilization, **kw)
        self.tok = self.llm.get_tokenizer()
        self.max_context = self.llm.llm_engine.model_config.max_model_len
        self.params = SamplingParams(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
        self.max_tokens, self.enable_thinking = max_tokens, enable_thinking
        self._batch = _Batcher(self._generate, batch_size, wait_s=0.2)

    def _generate(self, prompts: list[list[int]]) -> list:
        outs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], self.params, use_tqdm=False)
        return [(o.outputs[0].text, o.outputs[0].finish_reason == "length", len(o.outputs[0].token_ids))
                for o in outs]

    def answer(self, messages, task_id, turn):
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                           enable_thinking=self.enable_thinking)
        if len(ids) + self.max_tokens > self.max_context:
            raise ContextFull(f"{len(ids)} prompt tokens + {self.max_tokens} > {self.max_context}")
        return self._batch(list(ids))


# ---------------------------------------------------------------------------------------------
# Episodes
# ---------------------------------------------------------------------------------------------

def run_episode(policy: Policy, env_url: str, task_id: str, split: str, *, token: Optional[str] = None,
                env_timeout_s: float = 900.0, env_retries: int = 3, return_mode: str = "discounted",
                gamma: float = 0.9, sample: int = 0) -> dict:
    """One multi-turn episode (the trainer's loop, with chat messages instead of token ids)."""
    sess = EnvSession(env_url, task_id, split, token=token, timeout_s=env_timeout_s, retries=env_retries)
    t0 = time.monotonic()
    ep = {"task_id": task_id, "split": split, "mode": "eval", "step": None, "sample": sample, "policy": policy.name,
          "turns": [], "codes": [], "completions": [], "ended": "done"}
    try:
        obs = sess.reset()
        messages = [{"role": "user", "content": obs.problem}]
        turn = 0
        while True:
            turn += 1
            try:
                text, truncated, ntok = policy.answer(messages, task_id, turn)
            except ContextFull as e:
                log.info("%s: turn %d does not fit the context (%s): episode ends", task_id, turn, e)
                ep["ended"] = "budget"
                break
            except NoMoreTurns:
                ep["ended"] = "no_more_solutions"
                break
            code = extract_code(text)
            r = sess.step(code)
            ep["turns"].append(turn_record(r, text=text, code=code, truncated=truncated, completion_tokens=ntok))
            ep["codes"].append(code)
            ep["completions"].append(text)
            if r.done:
                break
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": feedback_message(r.observation, truncated)}]
        st = sess.state() if ep["turns"] else None
        ep.update(episode_id=sess.episode_id, history=st.history if st else [], env_reconnects=sess.reconnects)
    finally:
        sess.close()
    ep["return"] = episode_return([t["reward"] for t in ep["turns"]], return_mode, gamma)
    ep["seconds"] = round(time.monotonic() - t0, 2)
    return ep


def per_task(episodes: Sequence[dict]) -> dict:
    """summarize() per task id, plus the best speedup and roofline fraction over its correct turns."""
    by: dict[str, list] = {}
    for ep in episodes:
        by.setdefault(ep["task_id"], []).append(ep)
    out = {}
    for tid, eps in by.items():
        s = summarize(eps)
        ok = [t for ep in eps for t in _turns(ep) if _counts_correct(t)]
        sp = [t["speedup"] for t in ok if t.get("speedup") is not None]
        fr = [t["roofline_frac"] for t in ok if t.get("roofline_frac") is not None]
        stages = [t.get("stage") for ep in eps for t in _turns(ep)]
        s.update(best_speedup=max(sp) if sp else None, best_roofline_frac=max(fr) if fr else None,
                 last_stage=stages[-1] if stages else None)
        out[tid] = s
    return out


def _fmt(v, pct=False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{v:.1f}%"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def format_table(summary: dict, tasks: dict) -> str:
    rows = [("task", "eps", "compile", "correct", "turn1", "faster", "best speedup", "best roofline", "last stage")]
    for tid, s in sorted(tasks.items()):
        rows.append((tid, str(s["episodes"]), _fmt(s["compile_pct"], True), _fmt(s["correct_pct"], True),
                     _fmt(s["correct_turn1_pct"], True), _fmt(s["faster_than_ref_pct"], True),
                     _fmt(s["best_speedup"]), _fmt(s["best_roofline_frac"]), _fmt(s["last_stage"])))
    rows.append(("ALL", str(summary["episodes"]), _fmt(summary["compile_pct"], True),
                 _fmt(summary["correct_pct"], True), _fmt(summary["correct_turn1_pct"], True),
                 _fmt(summary["faster_than_ref_pct"], True), f"mean {_fmt(summary['mean_speedup'])}",
                 f"median {_fmt(summary['median_roofline_frac'])}", f"suspicious {summary['suspicious']}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    return "\n".join(lines)


def make_policy(a) -> Policy:
    if a.policy == "replay":
        if not a.solutions:
            raise SystemExit("--policy replay needs --solutions DIR")
        return ReplayPolicy(a.solutions)
    if not a.model:
        raise SystemExit(f"--policy {a.policy} needs --model")
    if a.policy == "openai":
        if not a.base_url:
            raise SystemExit("--policy openai needs --base_url (e.g. http://localhost:8001/v1)")
        return OpenAIPolicy(a.base_url, a.model, a.api_key, a.max_tokens, a.temperature, a.top_p, a.enable_thinking)
    think = bool(a.enable_thinking)
    if a.policy == "vllm":
        return VLLMPolicy(a.model, a.max_tokens, a.temperature, a.top_p, think, tensor_parallel_size=a.tensor_parallel_size,
                          max_context=a.max_context)
    return TransformersPolicy(a.model, a.max_tokens, a.temperature, a.top_p, think, batch_size=a.batch_size,
                              device=a.device, dtype=a.dtype, max_context=a.max_context)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="baseline_eval.py", description="Held-out multi-turn evaluation on kernel_env.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--env_url", default="local", help="kernel_env server URL, or 'local' to start one here")
    p.add_argument("--env_token", default=None, help=f"server token (default ${TOKEN_ENV})")
    p.add_argument("--local_env_device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="device of the embedded server (--env_url local)")
    p.add_argument("--local_env_args", default="", help="extra flags for the embedded server, e.g. '--max-turns 2'")
    p.add_argument("--policy", default="openai", choices=("openai", "vllm", "transformers", "replay"))
    p.add_argument("--model", default="", help="model name (openai) or local path / id (vllm, transformers)")
    p.add_argument("--base_url", default=os.environ.get("OPENAI_BASE_URL", ""), help="OpenAI-compatible /v1 URL")
    p.add_argument("--api_key", default="", help="API key (default $OPENAI_API_KEY)")
    p.add_argument("--solutions", default="", help="replay: folder of solution files (see --help text above)")
    p.add_argument("--split", default="eval", choices=("eval", "train"))
    p.add_argument("--levels", type=int, nargs="+", default=[1])
    p.add_argument("--kernelbench_dir", default=os.environ.get("KERNELBENCH_DIR", ""))
    p.add_argument("--tasks", nargs="*", default=None, help="only these task ids (default: the whole split)")
    p.add_argument("--max_tasks", type=int, default=0, help="cap the number of tasks (0 = all)")
    p.add_argument("--samples", type=int, default=1, help="episodes per task")
    p.add_argument("--concurrency", type=int, default=16, help="episodes in flight")
    p.add_argument("--max_tokens", type=int, default=2048, help="per model turn (training: max_completion_length)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top_p", type=float, default=1.0)
    p.add_argument("--enable_thinking", default=None, action=argparse.BooleanOptionalAction,
                   help="Qwen3-style chat template switch (openai: sent only when given)")
    p.add_argument("--max_context", type=int, default=0,
                   help="episode token budget for local policies (0 = the model's context)")
    p.add_argument("--batch_size", type=int, default=8, help="transformers: turns generated together")
    p.add_argument("--device", default="auto", help="transformers: cpu, cuda, cuda:1, auto")
    p.add_argument("--dtype", default="auto", help="transformers: auto, bfloat16, float32")
    p.add_argument("--tensor_parallel_size", type=int, default=1, help="vllm")
    p.add_argument("--return_mode", default="discounted", choices=("discounted", "best"))
    p.add_argument("--gamma", type=float, default=0.9)
    p.add_argument("--env_timeout_s", type=float, default=900.0)
    p.add_argument("--env_retries", type=int, default=3)
    p.add_argument("--out", default="runs/baseline", help="folder for episodes.jsonl and summary.json")
    p.add_argument("--no_progress", action="store_true", help="log lines instead of a progress bar")
    return p


def main(argv=None) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    a = build_parser().parse_args(argv)
    exit_on_sigterm()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    policy = make_policy(a)

    tasks = list(a.tasks) if a.tasks else split_task_ids(a.split, a.levels, a.kernelbench_dir)
    if a.policy == "replay" and not a.tasks:
        missing = [t for t in tasks if not policy.has_task(t)]
        if missing:
            log.info("replay: %d task(s) of the split have no solution file, skipped: %s", len(missing),
                     ", ".join(missing[:8]))
        tasks = [t for t in tasks if policy.has_task(t)]
    if a.max_tasks:
        tasks = tasks[: a.max_tasks]
    if not tasks:
        raise SystemExit("no tasks to evaluate")

    server = None
    url, token = a.env_url, a.env_token or os.environ.get(TOKEN_ENV) or None
    if url == "local":
        server = LocalEnvServer(a.local_env_device, a.local_env_args.split(), out / "env_server.log",
                                a.kernelbench_dir).start()
        url, token = server.url, server.token
    jobs = [(t, k) for k in range(a.samples) for t in tasks]
    log.info("%d episodes (%d tasks x %d samples), policy %s, env %s", len(jobs), len(tasks), a.samples, a.policy, url)
    episodes: list[dict] = []
    t0 = time.monotonic()
    try:
        with open(out / "episodes.jsonl", "w") as f, ThreadPoolExecutor(max_workers=max(1, a.concurrency)) as pool:
            futs = [pool.submit(run_episode, policy, url, t, a.split, token=token, env_timeout_s=a.env_timeout_s,
                                env_retries=a.env_retries, return_mode=a.return_mode, gamma=a.gamma, sample=k)
                    for t, k in jobs]
            bar = None
            if not a.no_progress:
                try:
                    from tqdm.auto import tqdm
                    bar = tqdm(total=len(futs), desc="episodes", unit="ep")
                except ImportError:
                    bar = None
            from concurrent.futures import as_completed
            last_log = time.monotonic()
            for fut in as_completed(futs):
                ep = fut.result()  # an EnvFailure or endpoint failure stops the run here, loudly
                episodes.append(ep)
                f.write(json.dumps(ep) + "\n")
                f.flush()
                n_ok = sum(1 for e in episodes if any(_counts_correct(t) for t in e["turns"]))
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(correct=n_ok)
                elif time.monotonic() - last_log > 10 or len(episodes) == len(futs):
                    log.info("%d/%d episodes done, %d correct", len(episodes), len(futs), n_ok)
                    last_log = time.monotonic()
            if bar is not None:
                bar.close()
    finally:
        policy.close()
        if server is not None:
            server.stop()
    summary = summarize(episodes)
    tasks_summary = per_task(episodes)
    result = {**summary, "policy": a.policy, "model": a.model or a.solutions, "split": a.split,
              "levels": a.levels, "samples": a.samples, "max_tokens": a.max_tokens, "temperature": a.temperature,
              "seconds": round(time.monotonic() - t0, 1), "tasks": tasks_summary}
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(format_table(summary, tasks_summary))
    print(f"\nepisodes: {out / 'episodes.jsonl'}\nsummary:  {out / 'summary.json'}")
    return result


if __name__ == "__main__":
    main()
