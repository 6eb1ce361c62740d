"""TRUSTED: the judge. Turns (task id, source) into a Verdict, and schedules the work.

One submission travels:
  1. format + static checks on the source (here, no process)
  2. build: a candidate process without a GPU, one of the judge's idle ones (torch imported), imports
     the submission (load_inline compiles into the process's own folder, which the judge then moves
     into the build cache) - holds a CPU build slot, runs at a lower priority; skipped for a source
     this judge has built before
  3. run: a second candidate process, one of the device's idle ones (torch imported, CUDA context
     made, no candidate code), gets the plan while the evaluations ahead are measured; once the
     device slot is free (one measurement per GPU at a time), the device's reference worker (a
     trusted process, one per GPU, that never sees candidate code) hands out poisoned output slots;
     the candidate process imports the submission from the cache, runs the correctness trials on
     fresh seeds, copies its outputs into the slots, waits while the reference worker checks them
     (wrong outputs are never timed), times itself, exits.
     Candidate code never runs on a GPU outside its own device slot, nor beside another's timing.
  4. judge: the reference worker makes the reference outputs of the timed calls it rechecks (and of
     trials it could not check early) and compares them with the slots; the task's profile (t_ref,
     FLOPs, bytes) comes from a cache
  5. verdict: speedup and roofline numbers, flags, feedback.
"""
from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import logging
import math
import os
import re
import secrets
import shutil
import statistics
import tempfile
import time
from collections import OrderedDict
from contextlib import asynccontextmanager
from pathlib import Path

from ..candidate.fast_build import BUILT_MANIFEST
from ..tasks import Task, TaskSet
from . import feedback as fb
from . import bytecode_cache, prebuild
from .checks import check_source
from .config import JudgeConfig
from .sandbox import PYTHON, Proc, child_env, describe_exit, gpu_device_nodes, isolation, wrap
from .verdict import ErrorKind, Stage, Verdict

log = logging.getLogger("kernel_env.judge")
BUILT_MEMORY = 4096  # sources remembered as built
BUILD = ("build", None)  # the pool key of idle build processes (not tied to a device)
REFERENCE_HELD_MAX = 1 << 30  # device memory a reference worker may keep between evaluations


class JudgeInternalError(RuntimeError):
    """The judge could not reach a verdict for reasons that are not the candidate's (reference crashed...)."""


class Judge:
    def __init__(self, config: JudgeConfig | None = None, tasks: TaskSet | None = None):
        self.cfg = config or JudgeConfig()
        self.tasks = tasks or TaskSet()
        self.cfg.cache_dir.mkdir(parents=True, exist_ok=True)
        self.work_root = Path(self.cfg.work_dir or Path(tempfile.gettempdir()) / "kernel_env_work")
        self.work_root.mkdir(parents=True, exist_ok=True)
        self.isolation = isolation(self.cfg.sandbox)
        log.info("candidate isolation: %s", self.isolation)
        # torch/extension.h precompiled for the candidates' builds, made in the background (prebuild.py)
        self._pch = (prebuild.Background(self.cfg.cache_dir, self.cfg.device == "cuda", self.cfg.pch_variants)
                     if self.cfg.precompiled_header else None)
        # torch's bytecode for the candidate processes, compiled once by a trusted one (bytecode_cache.py)
        self._bytecode = bytecode_cache.Warm(self.cfg.cache_dir) if self.cfg.bytecode_cache else None
        self._build_sem = asyncio.Semaphore(self.cfg.build_slots)
        slots = self.cfg.gpus if self.cfg.device == "cuda" else (0,)
        # the GPU arch torch would pick itself: the build process has no GPU to ask
        self._arch_list = cuda_arch_list(self.cfg.gpus[0]) if self.cfg.device == "cuda" else None
        self._hide = gpu_device_nodes()  # from the build process
        self._dev_locks = {g: asyncio.Lock() for g in slots}
        # one trusted reference worker per device, shared by the evaluations measured there
        self._refs: dict[int, Proc | None] = {g: None for g in slots}
        self._ref_locks: dict[int, tuple] = {}  # device -> (event loop, lock around starting its worker)
        # evaluations per device with a run process of their own, the one measuring included
        self._stage = {g: asyncio.Semaphore(max(1, self.cfg.staged_runners)) for g in slots}
        # idle candidate processes (torch imported), and how many are starting: run processes per device
        # (CUDA context made), build processes (no GPU) for all
        self._pool: dict[tuple, list[Proc]] = {("run", g): [] for g in slots}
        self._pool[BUILD] = []
        self._pool_starting = {k: 0 for k in self._pool}
        # the build processes' folders: beside the build cache, so that a finished build moves in at once
        self.build_staging = self.cfg.cache_dir / "build-staging" / f"{os.getpid()}-{secrets.token_hex(4)}"
        self._pool_loop = None
        self._sync = False  # evaluate_sync: one evaluation per event loop, no pool kept between them
        self._bg: set[asyncio.Task] = set()  # run and build processes being started for the pool
        self._ahead: set[asyncio.Task] = set()  # reference workers being started by start_ahead()
        self._stopping = False
        self._dev_pending = {g: 0 for g in slots}
        # per device: candidates being run or timed, timings about to start, run processes warming up
        # (their first GPU work): see _warm_window and _timing_window
        self._gate = {g: {"timing": 0, "want": 0, "warming": 0} for g in slots}
        self._dev_busy_s = {g: 0.0 for g in slots}
        self._t0 = time.monotonic()
        self._profiles: dict[str, dict] = {}  # task id -> profile, for this judge's device
        # sources whose build process succeeded here: the same text again goes straight to its run
        # process, which imports the cached build (a build folder removed since is built there again)
        self._built: OrderedDict[str, bool] = OrderedDict()
        self._profile_locks: dict[str, asyncio.Lock] = {}
        self._inflight: set[asyncio.Task] = set()
        self._stats = {"evaluations": 0, "by_stage": {}, "waiting_build": 0, "waiting_device": 0, "running": 0,
                       "build_wait_s_total": 0.0, "device_wait_s_total": 0.0,
                       "build_s_total": 0.0, "builds": 0, "measure_s_total": 0.0, "measures": 0}

    # ---------------------------------------------------------------- public API
    async def evaluate(self, task_id: str, code) -> Verdict:
        """The verdict on one submission. Raises TaskError for an unknown task; never for bad code.
        Cancelling it kills its processes and removes its files."""
        task = self.tasks.get(task_id)
        t_start = time.monotonic()
        self._stats["running"] += 1
        me = asyncio.current_task()
        self._inflight.add(me)
        try:
            v = self._check(task, code)
            if v is None:
                v = await self._run(task, code if isinstance(code, str) else code.decode("utf-8"))
        finally:
            self._stats["running"] -= 1
            self._inflight.discard(me)
        v.timings["total_s"] = round(time.monotonic() - t_start, 3)
        self._stats["evaluations"] += 1
        self._stats["by_stage"][v.stage] = self._stats["by_stage"].get(v.stage, 0) + 1
        return v

    def evaluate_sync(self, task_id: str, code) -> Verdict:
        """One evaluation in an event loop of its own; the processes it started end with it."""
        async def one():
            self._sync = True
            try:
                return await self.evaluate(task_id, code)
            finally:
                await self._stop_standing()
                self._sync = False
        return asyncio.run(one())

    async def task_profile(self, task_id: str) -> dict:
        """FLOPs, bytes, t_min, bound, t_ref and ref_roofline_frac of a task on this judge's device.
        Cached in memory (and on disk by the worker); concurrent callers share one computation."""
        if task_id in self._profiles:
            return self._profiles[task_id]
        async with self._profile_locks.setdefault(task_id, asyncio.Lock()):
            if task_id not in self._profiles:
                res = await self.profiles([task_id])
                if not res[0].get("ok"):
                    raise JudgeInternalError(res[0].get("error", "profiling failed"))
                self._profiles[task_id] = res[0]["profile"]
        return self._profiles[task_id]

    async def profiles(self, task_ids: list[str], progress=None) -> list[dict]:
        """Profiles of many tasks in one reference worker (the roofline table). One result per task."""
        tasks = [self.tasks.get(t) for t in task_ids]
        gpu = self._pick_device()
        workdir = Path(tempfile.mkdtemp(prefix="profile-", dir=self.work_root))
        ref = None
        try:
            ref = await Proc.start([PYTHON, "-m", "kernel_env.judge.reference_worker"], workdir,
                                   self._env(workdir, gpu, trusted=True), self.cfg.output_cap_bytes)
            out = []
            async with self._device(gpu):
                await ref.send(json.dumps({"mode": "profile", **self._ref_common(),
                                           "tasks": [self._task_req(t) for t in tasks]}))
                for t in tasks:
                    msg = await ref.next_message(self.cfg.reference_timeout_s)
                    if msg.get("event") in ("eof", "timeout"):
                        why = "timed out" if msg["event"] == "timeout" else describe_exit(await ref.wait(5))
                        err = {"ok": False, "task_id": t.task_id, "error": f"reference worker {why}: "
                               + fb.clip(ref.output(), 1500)}
                        out += [err] + [{"ok": False, "task_id": x.task_id, "error": "not profiled"}
                                        for x in tasks[len(out) + 1:]]
                        break
                    out.append(msg)
                    if progress:
                        progress(len(out), len(tasks), msg)
            return out
        finally:
            if ref:
                await ref.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def stats(self) -> dict:
        up = time.monotonic() - self._t0
        s = dict(self._stats)
        s["by_stage"] = dict(s["by_stage"])
        s["build_s_mean"] = s["build_s_total"] / s["builds"] if s["builds"] else None
        s["measure_s_mean"] = s["measure_s_total"] / s["measures"] if s["measures"] else None
        s["device_busy_frac"] = {str(g): (b / up if up > 0 else 0.0) for g, b in self._dev_busy_s.items()}
        s["queue_depth"] = s["waiting_build"] + s["waiting_device"]
        s["uptime_s"] = up
        s["device"] = self.cfg.device
        s["isolation"] = self.isolation
        s["precompiled_header_ready"] = bool(self._pch.dir) if self._pch else None
        s["reference_workers"] = sum(1 for w in self._refs.values() if w is not None and w.returncode is None)
        s["idle_runners"] = sum(len(v) for k, v in self._pool.items() if k != BUILD)
        s["idle_builders"] = len(self._pool[BUILD])
        return s

    def start_ahead(self) -> None:
        """Start what the evaluations of each device share before the first one arrives: its idle run
        processes and its reference worker (warmed), and the idle build processes. The server calls this
        at startup; without it the first evaluation starts them (on an H200 the worker's start was 4-6 s
        of its queue time)."""
        if not self.cfg.start_ahead:
            return
        self._fill_pool(BUILD)
        for gpu in self._refs:
            self._fill_pool(("run", gpu))
            t = asyncio.ensure_future(self._start_reference_ahead(gpu))
            self._ahead.add(t)
            t.add_done_callback(self._ahead.discard)

    async def _start_reference_ahead(self, gpu: int) -> None:
        try:
            await self._reference(gpu, self._ref_common())  # no task yet: the warm-up imports none
        except Exception as e:  # noqa: BLE001 (the first evaluation starts one, and reports its failure)
            if not self._stopping:
                log.warning("could not start the reference worker of device %s ahead: %s", gpu, e)

    async def aclose(self) -> None:
        """Cancel evaluations still running; each kills its processes and removes its files."""
        if self._pch:
            self._pch.stop()
        if self._bytecode:
            self._bytecode.close()
        tasks = [t for t in self._inflight if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._stop_standing()

    async def _stop_standing(self) -> None:
        """End the processes kept between evaluations: reference workers, idle run processes."""
        # run processes being started are let finish (a spawn: milliseconds), so none is left unowned;
        # a reference worker started ahead and still warming up is ended, which ends its start too
        await asyncio.gather(*self._bg, return_exceptions=True)
        self._stopping = True
        for _ in range(2):  # again for a worker that registered while the first ones were ended
            for gpu, w in list(self._refs.items()):
                if w is not None:
                    await self._drop_reference(gpu, w)
            await asyncio.gather(*self._ahead, return_exceptions=True)
        self._stopping = False
        for idle in self._pool.values():
            while idle:
                await self._discard(idle.pop())
        try:
            self.build_staging.rmdir()
        except OSError:
            pass

    # ---------------------------------------------------------------- stages
    def _check(self, task: Task, code) -> Verdict | None:
        limit = self.cfg.feedback_max_chars

        def fail(stage, kind, msg):
            return Verdict(task.task_id, stage.value, error_kind=kind.value, feedback=fb.clip(msg, limit))

        if code is None or (isinstance(code, (str, bytes)) and not code.strip()):
            return fail(Stage.FORMAT, ErrorKind.EMPTY_CODE, "No code was submitted: answer with one ```python block "
                        "that defines class ModelNew.")
        if not isinstance(code, (str, bytes)):
            return fail(Stage.FORMAT, ErrorKind.EMPTY_CODE, "The submission must be Python source text.")
        raw = code.encode("utf-8", "surrogatepass") if isinstance(code, str) else code
        if len(raw) > self.cfg.max_code_bytes:
            return fail(Stage.FORMAT, ErrorKind.CODE_TOO_LARGE,
                        f"The submission is {len(raw)} bytes; the limit is {self.cfg.max_code_bytes}.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return fail(Stage.FORMAT, ErrorKind.NOT_UTF8, "The submission is not valid UTF-8 text.")
        if "\x00" in text:
            return fail(Stage.FORMAT, ErrorKind.NOT_UTF8, "The submission contains NUL characters.")
        try:
            tree = ast.parse(text)
        except SyntaxError as e:
            line = (e.text or "").rstrip()
            return fail(Stage.FORMAT, ErrorKind.SYNTAX_ERROR, f"Syntax error at line {e.lineno}: {e.msg}\n    {line}")
        if not any((isinstance(n, ast.ClassDef) and n.name == "ModelNew") or
                   (isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "ModelNew" for t in n.targets))
                   for n in tree.body):
            return fail(Stage.FORMAT, ErrorKind.NO_MODEL_NEW, "No `class ModelNew(nn.Module)` at module level: define "
                        "it with the same constructor arguments as Model.")
        bad = check_source(text, tree)
        if bad:
            where = f" (line {bad.line})" if bad.line else ""
            return fail(Stage.STATIC, bad.kind, f"Rejected before running{where}: {bad.message}.")
        return None

    async def _run(self, task: Task, source: str) -> Verdict:
        cfg = self.cfg
        ext_dir = self.cfg.cache_dir / "torch_extensions" / build_key(source)
        triton_dir = cfg.cache_dir / "triton"
        v = Verdict(task.task_id, Stage.BUILD.value)
        builder = cand = ref = None
        released = False  # the reference worker has given its device memory back
        # both candidate processes compile with the same header, or the run process would build again
        pch_dir = self._pch.dir if self._pch else None
        gpu = self._pick_device()
        self._dev_pending[gpu] += 1
        try:
            seeds = [secrets.randbits(31) for _ in range(cfg.correctness_trials)]  # fresh per evaluation
            init_seed = secrets.randbits(31)
            # what every request to the reference worker carries; the task file is hashed here, before
            # the candidate starts, so an edit made while the submission is imported shows in "prepare"
            ref_req = {**self._ref_common(), **self._task_req(task), "seeds": seeds, "init_seed": init_seed,
                       "timing_sets": min(2, len(seeds))}
            for d in (ext_dir, triton_dir):
                d.mkdir(parents=True, exist_ok=True)
            # both candidate processes were started before the submission was known: this evaluation's
            # build settings come on stdin (where its build is or goes, which precompiled header)
            build_env = {"KERNEL_ENV_BUILT_DIR": str(ext_dir), "KERNEL_ENV_PCH_DIR": str(pch_dir or "")}
            # the plan comes to the run process on stdin too: the seeds never touch the disk
            plan = {"task_path": str(task.path), "device": cfg.device, "seeds": seeds, "init_seed": init_seed,
                    "timing_sets": ref_req["timing_sets"], "l2_flush_bytes": cfg.l2_flush_bytes,
                    "cpu_threads": cfg.cpu_threads, "timing": self._timing(),
                    "env": build_env}
            self._fill_pool(("run", gpu))  # an idle run process for this evaluation, started while it builds

            # ---- build (CPU slot; the process sees no GPU), unless this very source was built here before
            # (with the same precompiled header: main.cpp differs without it)
            src_key = hashlib.sha256(f"{pch_dir}\x00{source}".encode()).hexdigest()
            if src_key in self._built:
                self._built.move_to_end(src_key)
                v.timings["build_wait_s"] = v.timings["build_s"] = 0.0
                v.details["build_cached"] = True
            else:
                t_w = time.monotonic()
                async with self._queued("waiting_build", self._build_sem):
                    t_b = time.monotonic()
                    v.timings["build_wait_s"] = round(t_b - t_w, 3)  # for a CPU build slot
                    # an idle build process (torch imported): the submission, then its build settings
                    # (earlier builds of it in KERNEL_ENV_BUILT_DIR are loaded, not built again)
                    builder = await self._take_idle(BUILD)
                    (builder.workdir / "submission.py").write_text(source)
                    if not await builder.send(json.dumps({"cmd": "build", "env": build_env})):
                        raise JudgeInternalError("the build process ended before it got the submission: "
                                                 + builder.output()[-1500:])
                    msg = await builder.next_message(cfg.build_timeout_s)
                    if msg.get("event") == "timeout":  # its compilers go before the build slot does
                        await builder.close()
                    v.timings["build_s"] = round(time.monotonic() - t_b, 3)
                self._stats["builds"] += 1
                self._stats["build_wait_s_total"] += v.timings["build_wait_s"]
                self._stats["build_s_total"] += v.timings["build_s"]
                if msg.get("event") != "built":
                    return await self._fail_build(v, builder, msg)
                await builder.close()  # nothing writes its folder any more: the build moves to the cache
                publish_build(builder.workdir / "torch_extensions", ext_dir)
                if isinstance(msg.get("reused"), int) and msg["reused"] > 0:  # a claim, for diagnosis
                    v.details["build_reused"] = msg["reused"]
                if not msg.get("import_failed"):
                    self._built[src_key] = True
                    while len(self._built) > BUILT_MEMORY:
                        self._built.popitem(last=False)

            # ---- run (exclusive device slot)
            t_q = time.monotonic()
            async with self._queued("waiting_device", self._stage[gpu]):
                # a run process from the pool (torch imported, CUDA context made): it gets the submission
                # and the plan, imports the task and says "ready" while the evaluations ahead are measured
                t_p = time.monotonic()
                cand = await self._take_idle(("run", gpu))
                warmed = await cand.warmed  # its first GPU work, done outside other candidates' timings
                if warmed.get("event") != "warmed":
                    raise JudgeInternalError("the run process did not start: " + str(warmed.get("event"))
                                             + " " + cand.output()[-1500:])
                (cand.workdir / "submission.py").write_text(source)
                (cand.workdir / "slots").mkdir(exist_ok=True)
                await cand.send(json.dumps(plan))
                ready, _ = await asyncio.gather(cand.next_message(cfg.reference_timeout_s),
                                                self._reference(gpu, ref_req))
                # the run process may still have been importing torch or making its CUDA context
                v.timings["ready_s"] = round(time.monotonic() - t_p, 3)
                if ready.get("event") != "ready":
                    raise JudgeInternalError("the run process did not start: " + str(ready.get("event"))
                                             + " " + cand.output()[-1500:])
                async with self._queued("waiting_device", self._device(gpu)):
                    try:
                        v.timings["queue_s"] = round(time.monotonic() - t_q, 3)
                        self._stats["device_wait_s_total"] += v.timings["queue_s"]
                        t_r = time.monotonic()
                        ref = await self._reference(gpu, ref_req)
                        # init_seed too: the input distributions are checked on the model that "compare" will use
                        prep = await self._ask(ref, {"mode": "prepare", **ref_req,
                                                     "slot_dir": str(cand.workdir / "slots")})
                        v.timings["prepare_s"] = round(time.monotonic() - t_r, 3)
                        v.details["ref_phases"] = {"prepare": prep.get("phases")}
                        t_c = time.monotonic()
                        quiet = self._quiet_timing(gpu)
                        if quiet:
                            v.details["quiet_timing"] = quiet
                        # no run process starts its GPU work while this candidate runs; when nobody
                        # waits for the device, the ones already warming up finish first
                        async with self._timing_window(gpu, self.cfg.quiet_warm_wait_s if quiet else 0.0):
                            run = await self._run_candidate(cand, prep["slots"], quiet, ref, ref_req)
                        await cand.close()  # the candidate is gone before the rest is compared
                        v.timings["run_s"] = round(time.monotonic() - t_c, 3)
                        if run.get("check"):
                            v.details["ref_phases"]["check"] = run["check"]
                        if run.get("phases"):
                            v.details["run_phases"] = run["phases"]
                        if run.get("failed") and run.get("stage") == Stage.BUILD.value:
                            self._built.pop(src_key, None)
                        if run.get("failed"):
                            v.stage, v.error_kind = run.get("stage", Stage.RUN.value), run["kind"]
                            v.feedback = run["feedback"]
                            v.details.update(run.get("details", {}))
                            return v
                        t_c = time.monotonic()
                        if run.get("mismatch"):  # a trial's outputs were wrong: not timed, nothing more to compare
                            res = {"compare": {"passed": run["passed"], "mismatch": run["mismatch"]}}
                        else:
                            res = await self._ask(ref, {"mode": "compare", **ref_req, "trials": run.get("trials"),
                                                        "rechecks": run.get("rechecks")})
                            v.details["ref_phases"]["compare"] = res.get("phases")
                            released = True  # the worker gave back the slots' memory before answering
                        res["profile"] = self._profiles[task.task_id] = prep["profile"]
                        v.timings["reference_s"] = round(time.monotonic() - t_c, 3)
                        self._stats["measures"] += 1
                        self._stats["measure_s_total"] += time.monotonic() - t_r
                        if res.get("held_bytes", 0) > REFERENCE_HELD_MAX:
                            await asyncio.shield(self._drop_reference(gpu, ref))
                    except JudgeInternalError:
                        if ref is not None:  # its state is unknown: the next evaluation gets a fresh one
                            await asyncio.shield(self._drop_reference(gpu, ref))
                            ref = None
                        raise
                    finally:  # what holds device memory is gone before the next measurement starts
                        await asyncio.shield(cand.close())
                        if ref is not None and not released:
                            if ref.asking:  # cancelled while it worked: its answer would be read as the
                                # next request's, so this worker goes
                                await asyncio.shield(self._drop_reference(gpu, ref))
                            else:
                                await asyncio.shield(self._release(gpu, ref))
            return self._verdict(v, run, res)
        except asyncio.CancelledError:
            raise
        except JudgeInternalError as e:
            v.stage, v.error_kind = Stage.RUN.value, ErrorKind.INTERNAL.value
            v.feedback = "The evaluator failed on this submission (not your fault); submit again."
            v.details["internal_error"] = fb.clip(str(e), 2000)
            log.error("internal error on %s: %s", task.task_id, e)
            return v
        finally:
            self._dev_pending[gpu] -= 1
            # a build killed midway leaves its lock in the process's own folder, removed here with it
            for p in (builder, cand):
                if p is not None:
                    await asyncio.shield(p.close())
                    shutil.rmtree(p.workdir, ignore_errors=True)

    # ---------------------------------------------------------------- idle candidate processes
    def _fill_pool(self, key: tuple) -> None:
        """Start candidate processes in the background until enough are idle or starting for `key`:
        ("run", gpu) keeps `idle_runners` run processes of the device (one under evaluate_sync), BUILD
        keeps `staged_builders` build processes (none under evaluate_sync). An idle one has torch
        imported (a run process its CUDA context made too) and waits for its submission: it costs an
        evaluation no start-up, and 64 sessions never start 64 torch imports at once."""
        loop = asyncio.get_running_loop()
        if self._pool_loop is not loop:  # processes started under an event loop that has ended
            for idle in self._pool.values():
                while idle:
                    p = idle.pop()
                    p.kill()
                    shutil.rmtree(p.workdir, ignore_errors=True)
            self._pool_starting = {k: 0 for k in self._pool}
            self._pool_loop = loop
        cpu = self.cfg.device == "cpu"  # there the measurement is the CPU's: idle processes would take from it
        if key == BUILD:
            target = 0 if self._sync else min(1, self.cfg.staged_builders) if cpu else self.cfg.staged_builders
        else:
            target = 1 if self._sync or cpu else max(1, self.cfg.idle_runners)
        for _ in range(target - len(self._pool[key]) - self._pool_starting[key]):
            self._pool_starting[key] += 1
            t = asyncio.ensure_future(self._add_idle(key))
            self._bg.add(t)
            t.add_done_callback(self._bg.discard)

    async def _add_idle(self, key: tuple) -> None:
        p = None
        try:
            p = await self._start_idle(key)
        except Exception as e:  # noqa: BLE001 (logged: the evaluation that needs one starts its own)
            log.error("could not start a %s process: %s", key[0], e)
        finally:
            self._pool_starting[key] -= 1
            if p is not None:
                self._pool[key].append(p)

    async def _take_idle(self, key: tuple) -> Proc:
        """An idle process for `key` (the oldest: the furthest along in its start), else a new one."""
        self._fill_pool(key)
        while self._pool[key]:
            p = self._pool[key].pop(0)
            if p.returncode is None:
                break
            await self._discard(p)
        else:
            p = await self._start_idle(key)
        if not self._sync:
            self._fill_pool(key)
        return p

    async def _start_idle(self, key: tuple) -> Proc:
        """A candidate process before its evaluation is known, in a folder of its own (where the
        submission will be written) with its own build folder in it. A run process only reads the
        evaluation's build folder (fast_build's manifest); a build process builds into its own, which the
        judge moves into the cache afterwards. The evaluation's settings come with its plan."""
        mode, gpu = key
        if mode == "build":
            self.build_staging.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=self.build_staging if mode == "build" else self.work_root))
        try:
            (workdir / "torch_extensions").mkdir()
            p = await self._start_candidate(mode, workdir, self.cfg.gpus[0] if gpu is None else gpu,
                                            workdir / "torch_extensions", self.cfg.cache_dir / "triton", None)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        p.loop, p.workdir = asyncio.get_running_loop(), workdir
        if mode == "run":
            p.warmed = asyncio.ensure_future(self._warm_up(p, gpu))
        return p

    async def _warm_up(self, p: Proc, gpu: int) -> dict:
        """A run process's start: torch imported ("imported"), then, inside a warm window of its device,
        the CUDA context and the device code of the runner's own kernels ("warmed")."""
        msg = await p.next_message(self.cfg.reference_timeout_s)
        if msg.get("event") != "imported":
            return msg
        p.imported = True
        async with self._warm_window(gpu):
            if not await p.send(json.dumps({"cmd": "warm"})):
                return {"event": "eof"}
            return await p.next_message(self.cfg.reference_timeout_s)

    @asynccontextmanager
    async def _warm_window(self, gpu: int):
        """A run process's first GPU work waits while a candidate on the device runs or is about to: on
        the H200, run processes starting beside a timing slowed its calls (docs/performance.md)."""
        g = self._gate[gpu]
        while g["timing"] or g["want"]:
            await asyncio.sleep(0.01)
        g["warming"] += 1
        try:
            yield
        finally:
            g["warming"] -= 1

    @asynccontextmanager
    async def _timing_window(self, gpu: int, wait_s: float):
        """A candidate runs and is timed: no warm-up starts meanwhile; those under way are waited for,
        up to wait_s (0 under load: the slot does not wait for the pool)."""
        g = self._gate[gpu]
        g["want"] += 1
        try:
            end = time.monotonic() + wait_s
            while g["warming"] and time.monotonic() < end:
                await asyncio.sleep(0.005)
        finally:
            g["want"] -= 1
        g["timing"] += 1
        try:
            yield
        finally:
            g["timing"] -= 1

    @staticmethod
    async def _discard(p: Proc) -> None:
        """End a process the judge keeps between evaluations, and remove its folder."""
        if p.loop is asyncio.get_running_loop():
            if getattr(p, "warmed", None) is not None:
                p.warmed.cancel()
            await p.close()
        else:  # its pipes belong to an event loop that has ended: kill it directly
            p.kill()
        shutil.rmtree(p.workdir, ignore_errors=True)

    async def _start_candidate(self, mode: str, workdir: Path, gpu: int, ext_dir: Path, triton_dir: Path,
                               pch_dir: str | None) -> Proc:
        """A candidate process: "build" without the GPU (its device files hidden), "run" with it."""
        cfg = self.cfg
        argv, env = await self._candidate_command(mode, [PYTHON, "-m", "kernel_env.candidate.runner", mode, str(workdir)],
                                                  workdir, gpu, ext_dir, triton_dir, pch_dir)
        return await Proc.start(argv, workdir, env, cfg.output_cap_bytes, max_file_bytes=cfg_max_file_bytes(cfg),
                                mem_bytes=cfg.candidate_memory_bytes if cfg.device == "cpu" else None, untrusted=True,
                                nice=cfg.build_nice if mode == "build" else 0,
                                idle_sched=cfg.build_sched_idle and mode == "build")

    async def _candidate_command(self, mode: str, argv: list, workdir: Path, gpu: int, ext_dir: Path, triton_dir: Path,
                                 pch_dir: str | None) -> tuple[list, dict]:
        """argv wrapped in the sandbox, and the environment, of a candidate process of `mode`."""
        hide = self._hide if mode == "build" else ()
        readonly = []
        if self._bytecode:  # torch's bytecode, compiled by the judge: read, never written
            await self._bytecode.ready()
            readonly.append(self._bytecode.dir)
        argv = wrap(self.isolation, argv, workdir, [ext_dir, triton_dir], hide=hide, readonly=readonly)
        env = self._env(workdir, gpu, trusted=False, ext_dir=ext_dir, pch_dir=pch_dir)
        if self._bytecode:
            env[bytecode_cache.ENV] = str(self._bytecode.dir)
        if mode == "build":
            env["CUDA_VISIBLE_DEVICES"] = ""
        return argv, env

    async def _fail_build(self, v: Verdict, cand: Proc, msg: dict) -> Verdict:
        ev = msg.get("event")
        limit = self.cfg.feedback_max_chars
        if ev == "timeout":
            v.error_kind = ErrorKind.BUILD_TIMEOUT.value
            v.feedback = f"Build timed out after {self.cfg.build_timeout_s:.0f} s (compiling or importing the submission)."
        elif ev == "error" and msg.get("kind") == "no_model_new":
            v.stage, v.error_kind = Stage.FORMAT.value, ErrorKind.NO_MODEL_NEW.value
            v.feedback = "The module imported, but it defines no class ModelNew."
        elif ev == "error":
            await cand.wait(5)
            v.error_kind = ErrorKind.BUILD_ERROR.value
            v.feedback = fb.build_failure(str(msg.get("message", "")), cand.output(), limit)
        else:  # the process died or sent garbage while importing
            rc = await cand.wait(5 if ev == "eof" else 0.1)
            if rc is None:
                cand.kill()
                rc = await cand.wait(5)
            v.error_kind = ErrorKind.CRASH.value
            v.feedback = fb.runtime_failure(f"The process {describe_exit(rc)} while importing the submission.", "",
                                            cand.output(), limit)
        return v

    async def _run_candidate(self, cand: Proc, slots: list, timing: dict | None = None, ref: Proc | None = None,
                             ref_req: dict | None = None) -> dict:
        """Drive the run phase; a dict with outputs/times, or failed=True with kind and feedback.
        `timing`: changes to the plan's timing rule, decided when the slot is this evaluation's.
        `ref`: the reference worker checks the trials' outputs before the candidate is timed; when they
        are wrong the run ends there ("mismatch" and "passed" in the dict, no times)."""
        cfg, limit = self.cfg, self.cfg.feedback_max_chars
        deadline = time.monotonic() + cfg.run_timeout_s
        # The runner stamps every line after "go" with this token; the submission runs in the same
        # process and can write to the protocol pipe too, but never sees the token.
        token = secrets.token_hex(16)
        # the timing's wall-clock bound starts here, not at "outputs": a busy event loop reads messages
        # late, and both at once when it stood still longer than the timing took (a window of ~0 s)
        t_go = time.monotonic()
        if not await cand.send(json.dumps({"cmd": "go", "slots": slots, "token": token, "timing": timing or {}})):
            rc = await cand.wait(5)
            return {"failed": True, "kind": ErrorKind.CRASH.value,
                    "feedback": fb.runtime_failure(f"The process {describe_exit(rc)} before running.", "", cand.output(), limit)}
        got: dict = {}
        while True:
            msg = await cand.next_message(max(0.0, deadline - time.monotonic()))
            ev = msg.get("event")
            if ev not in ("timeout", "eof", "garbage") and msg.get("token") != token:  # those three are Proc's own
                cand.kill()
                return {"failed": True, "kind": ErrorKind.TIMING_INVALID.value, "details": {"forged_event": str(ev)[:40]},
                        "feedback": "A message on the evaluator's result channel was not from the evaluator's runner "
                                    "(forged results: writing to the evaluator's pipes is not allowed); the run is "
                                    "discarded."}
            if ev == "outputs":
                got["trials"] = msg.get("trials")
                if ref is not None:  # the trials are checked now: wrong outputs are never timed
                    t_w = time.monotonic()
                    chk = await self._ask(ref, {"mode": "check", **ref_req, "trials": got["trials"]})
                    got["check"] = {**(chk.get("phases") or {}), "rows": chk.get("rows"), "deferred": chk.get("deferred"),
                                    "s": round(time.monotonic() - t_w, 4), "done_t": time.monotonic()}
                    if chk.get("mismatch"):
                        cand.kill()
                        got.update(mismatch=chk["mismatch"], passed=chk.get("passed", 0))
                        return got
                # the timing starts on our word: the worker's GPU work is over (it synchronised)
                await cand.send(json.dumps({"cmd": "time"}))  # a process that died says so with "eof"
            elif ev == "timed":
                got["times_ms"], got["calls"] = msg.get("times_ms"), msg.get("calls")
                got["timing_wall_s"] = time.monotonic() - t_go
            elif ev == "done":
                got["rechecks"] = msg.get("rechecks")
                if isinstance(msg.get("phases"), dict):
                    got["phases"] = {k: v for k, v in msg["phases"].items()
                                     if isinstance(v, (int, float))
                                     or (k in ("trial_steps_s", "timing_spreads") and isinstance(v, list)
                                         and len(str(v)) < 2000)
                                     or (k == "module_sha" and isinstance(v, str) and len(v) <= 64)
                                     or (k in ("cpu_s", "thread_cpu_s") and isinstance(v, dict) and len(str(v)) < 2000
                                         and all(isinstance(x, (int, float)) for x in v.values()))}
                break
            elif ev == "timeout":
                cand.kill()
                return {"failed": True, "kind": ErrorKind.RUN_TIMEOUT.value,
                        "feedback": fb.clip(f"Timed out after {cfg.run_timeout_s:.0f} s while running ModelNew "
                                            f"({'timing' if 'trials' in got else 'correctness trials'}). "
                                            "An infinite loop or a deadlock in the kernel?", limit)}
            elif ev == "error" and msg.get("phase") == "build":  # the import, now with the GPU
                if msg.get("kind") == "no_model_new":
                    return {"failed": True, "stage": Stage.FORMAT.value, "kind": ErrorKind.NO_MODEL_NEW.value,
                            "feedback": "The module imported, but it defines no class ModelNew."}
                await cand.wait(5)
                return {"failed": True, "stage": Stage.BUILD.value, "kind": ErrorKind.BUILD_ERROR.value,
                        "feedback": fb.build_failure(str(msg.get("message", "")), cand.output(), limit)}
            elif ev == "error" and msg.get("kind") == "rejected":  # the watch's reason, not a traceback
                text = str(msg.get("message", ""))
                return {"failed": True, "kind": ErrorKind.RUNTIME_ERROR.value,
                        "details": {"phase": msg.get("phase", "run"), "rejected": True},
                        "feedback": fb.clip(text if text.startswith("Rejected") else "Rejected: " + text, limit)}
            elif ev == "error":
                phase = msg.get("phase", "run")
                return {"failed": True, "kind": ErrorKind.RUNTIME_ERROR.value, "details": {"phase": phase},
                        "feedback": fb.runtime_failure(f"ModelNew raised an exception ({phase}):",
                                                       str(msg.get("message", "")), cand.output(), limit)}
            elif ev in ("eof", "garbage"):
                cand.kill() if ev == "garbage" else None
                rc = await cand.wait(10)
                return {"failed": True, "kind": ErrorKind.CRASH.value, "details": {"exit": describe_exit(rc)},
                        "feedback": fb.runtime_failure(f"The process {describe_exit(rc)} while running ModelNew "
                                                       "(a crash: bad memory access, illegal instruction, exit?). "
                                                       "Its last output:", "", cand.output() or "(none)", limit)}
        if not self._valid_times(got):
            return {"failed": True, "kind": ErrorKind.TIMING_INVALID.value,
                    "details": {"timing_wall_s": got.get("timing_wall_s")},
                    "feedback": "The timing report is inconsistent with the evaluator's own clock; the run is discarded."}
        return got

    def _valid_times(self, got: dict) -> bool:
        """Times are claims from the candidate process: sane numbers, and no more than the wall clock saw
        from "go" to "timed"."""
        times = got.get("times_ms")
        if not isinstance(times, list) or not 1 <= len(times) <= self.cfg.max_timed_calls:
            return False
        if not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in times):
            return False
        return sum(times) / 1e3 <= got["timing_wall_s"] * 1.05 + 0.01

    async def _reference(self, gpu: int, ref_req: dict) -> Proc:
        """The device's reference worker, started (and warmed: CUDA context, the kernels of compare)
        when first needed or after a failure. It never sees candidate code and serves one evaluation
        at a time, inside the device slot; between evaluations it holds no device memory. The
        evaluations of one device share it: no torch import and CUDA context per evaluation."""
        loop = asyncio.get_running_loop()
        if self._ref_locks.get(gpu, (None,))[0] is not loop:  # a Judge used from several loops (evaluate_sync)
            self._ref_locks[gpu] = (loop, asyncio.Lock())
        async with self._ref_locks[gpu][1]:
            w = self._refs.get(gpu)
            if w is not None and (w.returncode is not None or w.loop is not loop):
                await self._drop_reference(gpu, w)
                w = None
            if w is None:
                d = Path(tempfile.mkdtemp(prefix="refworker-", dir=self.work_root))
                w = await Proc.start([PYTHON, "-m", "kernel_env.judge.reference_worker"], d,
                                     self._env(d, gpu, trusted=True), self.cfg.output_cap_bytes)
                w.loop, w.workdir = loop, d
                self._refs[gpu] = w
                try:
                    await self._ask(w, {"mode": "warm", **ref_req})
                except JudgeInternalError:
                    await self._drop_reference(gpu, w)
                    raise
        return w

    async def _release(self, gpu: int, ref: Proc) -> None:
        """The worker lets go of an evaluation's slots (the candidate failed before compare); if it
        cannot (a candidate that died holding them), it ends, and its memory with it."""
        try:
            res = await self._ask(ref, {"mode": "release", "device": self.cfg.device}, timeout=60)
            if res.get("held_bytes", 0) > REFERENCE_HELD_MAX:
                await self._drop_reference(gpu, ref)
        except JudgeInternalError:
            await self._drop_reference(gpu, ref)

    async def _drop_reference(self, gpu: int, ref: Proc) -> None:
        if self._refs.get(gpu) is ref:
            self._refs[gpu] = None
        await self._discard(ref)

    async def _ask(self, ref: Proc, req: dict, timeout: float | None = None) -> dict:
        """One request to the reference worker. Its failures are the judge's, never the candidate's.
        `asking` stays set when the wait is cancelled: the answer still to come belongs to no one."""
        ref.asking = True
        if not await ref.send(json.dumps(req)):
            raise JudgeInternalError("reference worker died: " + ref.output()[-1500:])
        msg = await ref.next_message(timeout or self.cfg.reference_timeout_s)
        ref.asking = False
        if msg.get("event") in ("timeout", "eof", "garbage"):
            raise JudgeInternalError(f"reference worker {msg.get('event')}: " + ref.output()[-1500:])
        if not msg.get("ok"):
            raise JudgeInternalError(str(msg.get("error")))
        return msg

    def _verdict(self, v: Verdict, run: dict, res: dict) -> Verdict:
        cfg, prof, cmp_ = self.cfg, res["profile"], res["compare"]
        v.device_name, v.flops, v.bytes_moved = prof["device_name"], prof["flops"], prof["bytes"]
        v.t_ref_ms, v.t_min_ms, v.bound = prof["t_ref_ms"], prof["t_min_ms"], prof["bound"]
        v.ref_roofline_frac = prof["ref_roofline_frac"]
        v.trials_passed = cmp_["passed"]
        if cmp_["mismatch"]:
            mm = cmp_["mismatch"]
            v.stage, v.error_kind = Stage.CORRECTNESS.value, ErrorKind.OUTPUT_MISMATCH.value
            where = "recheck of timed outputs" if "recheck" in mm else f"trial {mm.get('trial', 0) + 1} of {cfg.correctness_trials}"
            v.feedback = fb.clip(f"Wrong output ({where}): {mm['message']}", cfg.feedback_max_chars)
            v.details["mismatch"] = mm
            return v
        t_new = statistics.median(run["times_ms"])
        v.stage, v.correct = Stage.TIMED.value, True
        v.t_new_ms = t_new
        v.speedup = v.t_ref_ms / t_new
        v.roofline_frac = v.t_min_ms / t_new if v.t_min_ms else None
        v.suspicious = v.speedup > cfg.suspicious_speedup
        v.roofline_violation = bool(v.t_min_ms) and t_new < v.t_min_ms * cfg.roofline_violation_factor
        v.details.update({"timed_calls": len(run["times_ms"]), "ref_calls": prof.get("ref_calls"),
                          "timing_spread": _spread(run["times_ms"])})
        v.feedback = fb.timed_summary(v.speedup, t_new, v.t_ref_ms, v.roofline_frac, v.bound, v.suspicious,
                                      v.roofline_violation)
        return v

    # ---------------------------------------------------------------- plumbing
    def _timing(self) -> dict:
        c = self.cfg
        return {"warmup": c.warmup_calls, "warmup_s": c.warmup_s, "min_calls": c.min_timed_calls, "max_calls": c.max_timed_calls,
                "budget_s": c.timing_budget_s, "stable_rel": c.timing_stable_rel,
                "retime_spread": c.timing_retime_spread, "attempts": c.timing_attempts,
                "min_wall_s": c.timing_min_wall_s, "ref_min_wall_s": c.reference_min_wall_s,
                "ref_warmup_s": c.reference_warmup_s if c.device == "cuda" else c.warmup_s}

    def _quiet_timing(self, gpu: int) -> dict | None:
        """The candidate's warm-up and wall time when no other evaluation waits for this GPU: it
        idled before this one, and timing longer costs nobody anything (JudgeConfig.quiet_warmup_s)."""
        c = self.cfg
        if c.device != "cuda" or self._dev_pending[gpu] > 1 or (c.quiet_warmup_s <= 0 and c.quiet_min_wall_s <= 0):
            return None
        return {"warmup_s": max(c.warmup_s, c.quiet_warmup_s), "min_wall_s": max(c.timing_min_wall_s, c.quiet_min_wall_s)}

    def _ref_common(self) -> dict:
        c = self.cfg
        return {"device": c.device, "cache_dir": str(c.cache_dir), "cpu_threads": c.cpu_threads,
                "l2_flush_bytes": c.l2_flush_bytes, "timing": self._timing(),
                "tolerance": {"atol_fp32": c.atol_fp32, "rtol_fp32": c.rtol_fp32, "atol_half": c.atol_half,
                              "rtol_half": c.rtol_half, "tiny_output_frac": c.tiny_output_frac}}

    @staticmethod
    def _task_req(task: Task) -> dict:
        return {"task_id": task.task_id, "task_path": str(task.path),
                "source_sha": hashlib.sha256(task.path.read_bytes()).hexdigest()[:16]}

    def _env(self, workdir: Path, gpu: int, trusted: bool, ext_dir: Path | None = None, pch_dir: str | None = None) -> dict:
        c = self.cfg
        extra = {"TORCH_EXTENSIONS_DIR": ext_dir or c.cache_dir / "torch_extensions",
                 # the judge's own Triton kernels never load what a candidate could have written
                 "TRITON_CACHE_DIR": c.cache_dir / ("triton-judge" if trusted else "triton"),
                 "OMP_NUM_THREADS": c.cpu_threads, "MKL_NUM_THREADS": c.cpu_threads}
        if self._arch_list:
            extra["TORCH_CUDA_ARCH_LIST"] = self._arch_list
        if not trusted:
            extra["KERNEL_ENV_DEVICE"] = c.device
            extra["KERNEL_ENV_FAST_BUILD"] = "0" if c.fast_build == "off" else "1"
            extra["KERNEL_ENV_CUDA_PRELUDE"] = c.fast_build
            if pch_dir:
                extra["KERNEL_ENV_PCH_DIR"] = pch_dir
        if c.device == "cuda":
            extra["CUDA_VISIBLE_DEVICES"] = gpu
            extra["CUDA_DEVICE_MAX_CONNECTIONS"] = 1  # one work queue, which ordered timing needs (ordered_timing.py)
        else:
            extra["CUDA_VISIBLE_DEVICES"] = ""
            extra["TRITON_INTERPRET"] = 1
        return child_env(workdir, extra)

    def _pick_device(self) -> int:
        return min(self._dev_pending, key=lambda g: self._dev_pending[g])

    @asynccontextmanager
    async def _queued(self, counter: str, slot):
        """Hold `slot`; while waiting for it, count in stats[counter] (also when cancelled)."""
        self._stats[counter] += 1
        waiting = True
        try:
            async with slot:
                self._stats[counter] -= 1
                waiting = False
                yield
        finally:
            if waiting:
                self._stats[counter] -= 1

    @asynccontextmanager
    async def _device(self, gpu: int):
        async with self._dev_locks[gpu]:
            t = time.monotonic()
            try:
                yield
            finally:
                self._dev_busy_s[gpu] += time.monotonic() - t


def cuda_arch_list(gpu: int) -> str | None:
    """TORCH_CUDA_ARCH_LIST as torch's load_inline would choose it on this GPU (its capability, capped at
    what this torch supports, +PTX), asked by a trusted process; None when the environment sets it."""
    import os
    import subprocess
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return None
    code = ("import re, torch\ncap = torch.cuda.get_device_capability(0)\n"
            "sms = [int(re.findall(r'\\d+', a)[0]) for a in torch.cuda.get_arch_list() if a.startswith('sm_')]\n"
            "cap = min(cap, max((sm // 10, sm % 10) for sm in sms))\nprint(f'{cap[0]}.{cap[1]}+PTX')")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    try:
        r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = r.stdout.strip().splitlines()
    return out[-1] if r.returncode == 0 and out else None


def build_key(source: str) -> str:
    """The build folder of a submission: a hash of its long string constants (the kernel sources and
    flags). Submissions that differ only in Python share a build; different kernels never share a
    folder, so they never wait on each other's build lock, even when they reuse an extension name."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return hashlib.sha256(source.encode()).hexdigest()[:20]
    # docstrings and other bare string statements are not kernel sources: leave them out
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    consts = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and len(n.value) >= 32 and id(n) not in bare})
    return hashlib.sha256("\x00".join(consts).encode()).hexdigest()[:20]


def _manifest(folder: Path) -> dict:
    """fast_build's manifest of a build folder (load_inline call -> the module it built), the entries
    whose module file is a plain file of that folder. Written by a candidate: a claim, read with care."""
    path = folder / BUILT_MANIFEST
    try:
        if path.is_symlink() or path.stat().st_size > (1 << 20):
            return {}
        entries = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    good = {}
    for key, e in (entries.items() if isinstance(entries, dict) else ()):
        if not isinstance(e, dict):
            continue
        file = e.get("file")
        if (isinstance(key, str) and len(key) <= 128 and isinstance(e.get("module"), str) and isinstance(file, str)
                and _PLAIN_NAME.fullmatch(file) and (folder / file).is_file() and not (folder / file).is_symlink()):
            good[key] = {"module": e["module"], "file": file}
    return good


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def publish_build(staged: Path, ext_dir: Path) -> None:
    """Move what a build process built (the extension folders in its own folder's torch_extensions)
    into the source's build folder in the cache, where run processes read it (fast_build's manifest).
    An extension folder not there yet moves as it is. Into one that is, only the modules of calls it
    lacks move, each under a name of its own, and the manifest is replaced by the union: files already
    there never change, so a run process reading the folder meanwhile finds what its manifest named.
    Either way the manifest left in the cache holds only the entries checked here."""
    try:
        built = sorted(staged.iterdir())
    except OSError:
        return
    ext_dir.mkdir(parents=True, exist_ok=True)
    for src in built:
        new = {} if src.is_symlink() or not src.is_dir() or not _PLAIN_NAME.fullmatch(src.name) else _manifest(src)
        if not new:
            continue
        dst = ext_dir / src.name
        try:
            if not dst.exists() and not dst.is_symlink():
                os.rename(src, dst)  # the first build of this extension here: the folder as it is
                have, merged = None, new
            elif dst.is_symlink() or not dst.is_dir():
                continue
            else:
                have = _manifest(dst)
                merged = dict(have)
                for key, e in new.items():
                    if key not in have:  # another call's module, under a name of its own
                        file = f"{hashlib.sha256(key.encode()).hexdigest()[:12]}-{e['file']}"
                        os.replace(src / e["file"], dst / file)
                        merged[key] = {**e, "file": file}
            if merged != have:  # the manifest in the cache is the judge's: only entries it checked
                tmp = dst / f".{BUILT_MANIFEST}.{secrets.token_hex(4)}"
                tmp.write_text(json.dumps(merged))
                os.replace(tmp, dst / BUILT_MANIFEST)
        except OSError as e:  # another file system, another judge at the same folder: built again next time
            log.warning("could not move the build %s into the cache: %s", src.name, e)


def cfg_max_file_bytes(cfg: JudgeConfig) -> int:
    """RLIMIT_FSIZE of a candidate: room for a build, not for filling the disk. Outputs never go to
    files on CUDA; on the CPU they do (mapped slot files, made by the reference worker)."""
    return 2 << 30


def _spread(times: list) -> float:
    q = sorted(times)
    lo, hi = q[len(q) // 10], q[(9 * len(q)) // 10]
    return (hi - lo) / statistics.median(q) if q else 0.0
