"""TRUSTED: the judge's side of its reference workers (reference_worker.py), one per device.

A worker never sees candidate code. It is started (and warmed: CUDA context, the kernels of compare)
when first needed or after a failure, and holds no device memory between evaluations. The
evaluations of one device share it: no torch import and CUDA context per evaluation. Two of them
may be under way at once (the next one's trials are checked while the one before it is compared:
devices.py, Turn); their requests go one at a time, each named by its evaluation. Its failures are
the judge's (JudgeInternalError), never the candidate's.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import tempfile
from pathlib import Path

from .. import protocol as P
from ..tasks import Task
from .config import JudgeConfig
from .environ import ProcessEnv
from .pools import discard
from .sandbox import PYTHON, Proc

log = logging.getLogger("kernel_env.judge")
REFERENCE_HELD_MAX = 1 << 30  # device memory a reference worker may keep between evaluations
WORKER = [PYTHON, "-m", "kernel_env.judge.reference_worker"]


class JudgeInternalError(RuntimeError):
    """The judge could not reach a verdict for reasons that are not the candidate's (reference crashed...)."""


def timing_rule(cfg: JudgeConfig) -> dict:
    """How candidates and the reference are timed (harness.time_calls' arguments)."""
    c = cfg
    return {"warmup": c.warmup_calls, "warmup_s": c.warmup_s, "min_calls": c.min_timed_calls, "max_calls": c.max_timed_calls,
            "budget_s": c.timing_budget_s, "stable_rel": c.timing_stable_rel,
            "early_calls": c.timing_early_calls, "early_rel": c.timing_early_rel,  # candidates only
            "retime_spread": c.timing_retime_spread, "attempts": c.timing_attempts,
            "min_wall_s": c.timing_min_wall_s, "ref_min_wall_s": c.reference_min_wall_s,
            "ref_warmup_s": c.reference_warmup_s if c.device == "cuda" else c.warmup_s}


def common_request(cfg: JudgeConfig) -> dict:
    """What every request to a reference worker carries."""
    c = cfg
    return {"device": c.device, "cache_dir": str(c.cache_dir), "cpu_threads": c.cpu_threads,
            "l2_flush_bytes": c.l2_flush_bytes, "timing": timing_rule(c),
            "tolerance": {"atol_fp32": c.atol_fp32, "rtol_fp32": c.rtol_fp32, "atol_half": c.atol_half,
                          "rtol_half": c.rtol_half, "tiny_output_frac": c.tiny_output_frac}}


def task_request(task: Task) -> dict:
    return {"task_id": task.task_id, "task_path": str(task.path),
            "source_sha": hashlib.sha256(task.path.read_bytes()).hexdigest()[:16]}


async def ask(ref: Proc, req: dict, timeout: float) -> dict:
    """One request to a reference worker, after any other evaluation's request to it has been answered.
    A wait cancelled before its answer came sets `answer_lost`: that answer belongs to no one, so the
    worker answers nobody any more (the judge ends it)."""
    async with ref.ask_lock:
        if ref.answer_lost:
            raise JudgeInternalError("reference worker: an answer to a cancelled request is still due")
        if not await ref.send(json.dumps(req)):
            raise JudgeInternalError("reference worker died: " + ref.output()[-1500:])
        try:
            msg = await ref.next_message(timeout)
        except asyncio.CancelledError:
            ref.answer_lost = True
            raise
    if msg.get("event") in P.READER_EVENTS:
        raise JudgeInternalError(f"reference worker {msg.get('event')}: " + ref.output()[-1500:])
    if not msg.get("ok"):
        raise JudgeInternalError(str(msg.get("error")))
    return msg


class ReferenceWorkers:
    """The device's reference worker, per device, and the requests to it."""

    def __init__(self, cfg: JudgeConfig, devices: tuple, work_root: Path, env: ProcessEnv):
        self.cfg, self.work_root, self.env = cfg, work_root, env
        self.workers: dict[int, Proc | None] = {g: None for g in devices}
        # evaluations under way per worker (hold / done_with), and workers that serve no new ones: each
        # ends once its last evaluation is done (retire)
        self.users: dict[Proc, int] = {}
        self.retiring: set[Proc] = set()
        self._locks: dict[int, tuple] = {}  # device -> (event loop, lock around starting its worker)
        self._ahead: set[asyncio.Task] = set()  # workers being started by start_ahead()
        self._stopping = False
        self.started = self.retired = 0  # workers, for the judge's stats

    def alive(self) -> int:
        return sum(1 for w in self.workers.values() if w is not None and w.returncode is None)

    async def ask(self, ref: Proc, req: dict, timeout: float | None = None) -> dict:
        return await ask(ref, req, timeout or self.cfg.reference_timeout_s)

    async def get(self, gpu: int, ref_req: dict) -> Proc:
        """The device's worker, started and warmed if there is none (or it died)."""
        loop = asyncio.get_running_loop()
        if self._locks.get(gpu, (None,))[0] is not loop:  # a Judge used from several loops (evaluate_sync)
            self._locks[gpu] = (loop, asyncio.Lock())
        async with self._locks[gpu][1]:
            w = self.workers.get(gpu)
            if w is not None and (w.returncode is not None or w.loop is not loop):
                await self.drop(gpu, w)
                w = None
            if w is None:
                d = Path(tempfile.mkdtemp(prefix="refworker-", dir=self.work_root))
                w = await Proc.start(WORKER, d, self.env(d, gpu, trusted=True), self.cfg.output_cap_bytes)
                self.started += 1
                w.loop, w.workdir = loop, d
                self.workers[gpu] = w
                try:
                    await self.ask(w, {"mode": P.WARM_UP, **ref_req})
                except JudgeInternalError:
                    await self.drop(gpu, w)
                    raise
        return w

    async def hold(self, gpu: int, ref_req: dict) -> Proc:
        """The device's worker for one evaluation, until done_with."""
        w = await self.get(gpu, ref_req)
        self.users[w] = self.users.get(w, 0) + 1
        return w

    async def done_with(self, gpu: int, ref: Proc) -> None:
        n = self.users.get(ref, 0) - 1
        if n > 0:
            self.users[ref] = n
            return
        self.users.pop(ref, None)
        if ref in self.retiring:
            await self.drop(gpu, ref)

    def retire(self, gpu: int, ref: Proc, held_bytes: int = 0) -> None:
        """The worker holds memory it should not (REFERENCE_HELD_MAX): the next evaluations get a fresh
        one; this one ends with the last evaluation it serves (done_with), not under another one."""
        if self.workers.get(gpu) is ref:
            self.workers[gpu] = None
        if ref not in self.retiring:
            self.retired += 1
            log.info("the reference worker of device %s kept %.2f GiB after an evaluation: a fresh one "
                     "serves the next ones", gpu, held_bytes / (1 << 30))
        self.retiring.add(ref)

    def retire_if_holding(self, gpu: int, ref: Proc, answer: dict) -> None:
        """After the worker gave an evaluation's slots back (its RELEASE or COMPARE answer): retired if it
        still holds more than REFERENCE_HELD_MAX."""
        if answer.get("held_bytes", 0) > REFERENCE_HELD_MAX:
            self.retire(gpu, ref, answer["held_bytes"])

    def start_ahead(self, gpu: int) -> None:
        """Start the device's worker in the background (no task yet: the warm-up imports none)."""
        t = asyncio.ensure_future(self._start_ahead(gpu))
        self._ahead.add(t)
        t.add_done_callback(self._ahead.discard)

    async def _start_ahead(self, gpu: int) -> None:
        try:
            await self.get(gpu, common_request(self.cfg))
        except Exception as e:  # noqa: BLE001 (the first evaluation starts one, and reports its failure)
            if not self._stopping:
                log.warning("could not start the reference worker of device %s ahead: %s", gpu, e)

    async def release(self, gpu: int, ref: Proc, evaluation: str) -> None:
        """The worker lets go of an evaluation's slots (the candidate failed before compare); if it
        cannot (a candidate that died holding them), it ends, and its memory with it."""
        try:
            res = await self.ask(ref, {"mode": P.RELEASE, "device": self.cfg.device, "eval": evaluation}, timeout=60)
            self.retire_if_holding(gpu, ref, res)
        except JudgeInternalError:
            await self.drop(gpu, ref)

    async def let_go(self, gpu: int, ref: Proc, evaluation: str) -> None:
        """After an evaluation whose worker did not give its memory back (no compare): a worker cancelled
        while it worked goes (its answer would be read as the next request's), else it releases."""
        if ref.answer_lost:
            await self.drop(gpu, ref)
        else:
            await self.release(gpu, ref, evaluation)

    async def drop(self, gpu: int, ref: Proc) -> None:
        if self.workers.get(gpu) is ref:
            self.workers[gpu] = None
        self.retiring.discard(ref)
        await discard(ref)

    async def stop(self) -> None:
        """End every worker; one started ahead and still warming up is ended, which ends its start too."""
        self._stopping = True
        for _ in range(2):  # again for a worker that registered while the first ones were ended
            for gpu, w in list(self.workers.items()):
                if w is not None:
                    await self.drop(gpu, w)
            for w in list(self.retiring):
                await self.drop(-1, w)
            await asyncio.gather(*self._ahead, return_exceptions=True)
        self._stopping = False
