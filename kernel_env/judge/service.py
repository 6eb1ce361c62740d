"""TRUSTED: the judge. Turns (task id, source) into a Verdict, and schedules the work.

One submission travels:
  1. format + static checks on the source, no process (intake.py)
  2. build: a candidate process without a GPU, one of the judge's idle ones (torch imported), imports
     the submission (load_inline compiles into the process's own folder, which the judge then moves
     into the build cache) - holds a CPU build slot, runs at a lower priority; skipped for a source
     this judge has built before (builds.py; idle processes: pools.py)
  3. run: a second candidate process, one of the device's idle ones (torch imported, CUDA context
     made, no candidate code), gets the plan while the evaluations ahead are measured; once the
     device slot is free (one candidate run and timed per GPU at a time), the device's reference worker (a
     trusted process, one per GPU, that never sees candidate code) hands out poisoned output slots;
     the candidate process imports the submission from the cache, runs the correctness trials on
     fresh seeds, copies its outputs into the slots, waits while the reference worker checks them
     (wrong outputs are never timed), times itself, exits. The slot then goes to the next
     evaluation, whose trials run while this one ends; its timing waits for that end.
     Candidate code never runs on a GPU outside its own device slot, nor beside another's timing
     (the run protocol: run_stage.py; slots and windows: devices.py).
  4. judge: the reference worker makes the reference outputs of the timed calls it rechecks (and of
     trials it could not check early) and compares them with the slots; the task's profile (t_ref,
     FLOPs, bytes) comes from a cache (the judge's side: reference.py)
  5. verdict: speedup and roofline numbers, flags, feedback (verdict.finish).
"""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from .. import protocol as P
from ..compute_policy import choose as choose_policy
from ..tasks import Task, TaskSet
from . import bytecode_cache, deadlines, prebuild
from . import feedback as fb
from .builds import Builds, build_key
from .config import JudgeConfig
from .devices import DeviceSlots, queued
from .environ import ProcessEnv
from .inert_import import load_inline_calls
from .intake import screen_parsed
from .pools import BUILD, COMPILE, CandidatePools, discard
from .reference import (WORKER, JudgeInternalError, ReferenceWorkers, common_request,
                        task_request, timing_rule)
from .run_stage import drive
from .sandbox import Proc, describe_exit, gpu_device_nodes, isolation
from .verdict import ErrorKind, Stage, Verdict, finish

log = logging.getLogger("kernel_env.judge")
# a pair of tasks that had to wait to prepare beside the tail before tries earlier again every this many
# times: only free memory that changed (another process's) can make it fit, and a try that waits costs
# seconds (docs/log/slot-overlap-2026-12-07.md: ~4 s each on an H100, the next evaluation's PREPARE included)
PREPARE_RETRY = 256
# how far into the tail of the evaluation before a PREPARE beside it had to wait: not at all, for its
# candidate's end (the memory it held back, the compare still running), for the whole tail
BESIDE_TAIL, AFTER_CANDIDATE, AFTER_TAIL = "", "candidate", "tail"
__all__ = ["Judge", "JudgeInternalError"]


class Judge:
    """Turns (task id, source) into a Verdict. The stages are parts of their own: `screen` (format and
    static checks), `builds` (the build stage and its cache), `pools` (idle candidate processes),
    `slots` (the device slots and their windows), `references` (the trusted reference workers),
    `run_stage.drive` (the run protocol); this class schedules one evaluation through them."""

    def __init__(self, config: JudgeConfig | None = None, tasks: TaskSet | None = None):
        self.cfg = cfg = config or JudgeConfig()
        self.tasks = tasks or TaskSet()
        cfg.cache_dir.mkdir(parents=True, exist_ok=True)
        self.work_root = Path(cfg.work_dir or Path(tempfile.gettempdir()) / "kernel_env_work")
        self.work_root.mkdir(parents=True, exist_ok=True)
        self.isolation = isolation(cfg.sandbox)
        log.info("candidate isolation: %s", self.isolation)
        # torch/extension.h precompiled for the candidates' builds (prebuild.py), built in the background
        # once evaluations run in an event loop of the caller's (a server); see _precompiled_header
        self._pch: prebuild.Background | None = None
        # torch's bytecode for the candidate processes, compiled once by a trusted one (bytecode_cache.py)
        self._bytecode = bytecode_cache.Warm(cfg.cache_dir) if cfg.bytecode_cache else None
        devices = cfg.gpus if cfg.device == "cuda" else (0,)
        self.env = ProcessEnv(cfg)
        self.slots = DeviceSlots(devices)
        # evaluations per device with a run process of their own, the one measuring included
        self._staged = {g: asyncio.Semaphore(max(1, cfg.staged_runners)) for g in devices}
        # the build processes' folders: beside the build cache, so that a finished build moves in at once
        build_staging = cfg.cache_dir / "build-staging" / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.pools = CandidatePools(cfg, devices, self.work_root, build_staging, self.env, self.slots,
                                    self.isolation, gpu_device_nodes(), self._bytecode)
        self.references = ReferenceWorkers(cfg, devices, self.work_root, self.env)
        self._stats = {"evaluations": 0, "by_stage": {}, "waiting_build": 0, "waiting_device": 0, "running": 0,
                       "build_wait_s_total": 0.0, "device_wait_s_total": 0.0,
                       "build_s_total": 0.0, "builds": 0, "compiles_rejected_again": 0,
                       "binding_objects_reused": 0, "binding_objects_published": 0, "measure_s_total": 0.0, "measures": 0}
        self.builds = Builds(cfg, self.pools, self._stats)
        self._t0 = time.monotonic()
        self._profiles: dict[str, dict] = {}  # task id -> profile, for this judge's device
        self._profile_locks: dict[str, asyncio.Lock] = {}
        # (the task before, this task) -> (what its last PREPARE beside a tail had to wait for, tries): _prepare
        self._prepare_waits: dict[tuple, tuple[str, int]] = {}
        self._inflight: set[asyncio.Task] = set()

    @property
    def build_staging(self) -> Path:
        return self.pools.build_staging

    # ---------------------------------------------------------------- public API
    def policy_for(self, task_id: str, policy: str | None = None) -> str:
        """The compute rule an evaluation of this task is judged under: the one named, else the
        config's choice for the task's level (compute_policy.py). ValueError for an unknown name."""
        return choose_policy(policy, self.cfg.policy, self.tasks.get(task_id).level)

    async def evaluate(self, task_id: str, code, policy: str | None = None) -> Verdict:
        """The verdict on one submission, under `policy` (None: the config's choice for the task's
        level). Raises TaskError for an unknown task and ValueError for an unknown policy; never for
        bad code. Cancelling it kills its processes and removes its files."""
        task = self.tasks.get(task_id)
        policy = self.policy_for(task_id, policy)
        t_start = time.monotonic()
        self._stats["running"] += 1
        me = asyncio.current_task()
        self._inflight.add(me)
        try:
            # the parse and the static checks take up to most of a second on text built to be slow
            # (bench/bench_hostile_text.py): in a thread, so every other session's messages go on
            v, passed = await asyncio.to_thread(self._screen, task.task_id, code, policy)
            if v is None:
                v = await self._run(task, *passed, policy)
        finally:
            self._stats["running"] -= 1
            self._inflight.discard(me)
        v.timings["total_s"] = round(time.monotonic() - t_start, 3)
        self._stats["evaluations"] += 1
        self._stats["by_stage"][v.stage] = self._stats["by_stage"].get(v.stage, 0) + 1
        return v

    def _screen(self, task_id: str, code, policy: str) -> tuple[Verdict | None, tuple[str, str, list | None] | None]:
        """The screen's verdict, or (the source, its build key, what its import runs of its own:
        inert_import.load_inline_calls) when it passed: one parse for all."""
        v, tree = screen_parsed(task_id, code, self.cfg, policy)
        if v is not None:
            return v, None
        source = code if isinstance(code, str) else code.decode("utf-8")
        return None, (source, build_key(source, tree), load_inline_calls(tree))

    def evaluate_sync(self, task_id: str, code, policy: str | None = None) -> Verdict:
        """One evaluation in an event loop of its own; the processes it started end with it."""
        async def one():
            self.pools.one_shot = True
            try:
                return await self.evaluate(task_id, code, policy)
            finally:
                await self._stop_standing()
                if self._bytecode:  # still compiling after a screen's verdict: it goes with the evaluation
                    self._bytecode.close()
                self.pools.one_shot = False
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
        gpu = self.slots.pick()
        workdir = Path(tempfile.mkdtemp(prefix="profile-", dir=self.work_root))
        ref = None
        try:
            ref = await Proc.start(WORKER, workdir, self.env(workdir, gpu, trusted=True), self.cfg.output_cap_bytes)
            out = []
            async with self.slots.slot(gpu) as turn:
                await turn.after_previous()  # the reference is timed: the evaluation before has ended
                await ref.send(json.dumps({"mode": P.PROFILE, **common_request(self.cfg),
                                           "tasks": [task_request(t) for t in tasks]}))
                for t in tasks:
                    msg = await ref.next_message(self.cfg.reference_timeout_s)
                    if msg.get("event") in (P.EOF, P.TIMEOUT):
                        why = "timed out" if msg["event"] == P.TIMEOUT else describe_exit(await ref.wait(5))
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
        s["device_busy_frac"] = {str(g): (b / up if up > 0 else 0.0) for g, b in self.slots.busy_s.items()}
        s["queue_depth"] = s["waiting_build"] + s["waiting_device"]
        s["uptime_s"] = up
        s["device"] = self.cfg.device
        s["isolation"] = self.isolation
        s["precompiled_header_ready"] = (bool(self._pch.dir) if self._pch else False) if self.cfg.precompiled_header else None
        s["reference_workers"] = self.references.alive()
        s["reference_workers_started"], s["reference_workers_retired"] = self.references.started, self.references.retired
        # candidate processes an evaluation had to start because none was idle (it waits for the start)
        s["processes_started_on_demand"] = {k[0] if k[1] is None else f"{k[0]}{k[1]}": n
                                            for k, n in self.pools.started_on_demand.items()}
        s["idle_runners"] = self.pools.idle_runners()
        s["idle_builders"] = len(self.pools.idle[BUILD])
        # the run processes' warm-up steps (the last 200 of each, s on the judge's clock, stopped time
        # included), and how many were stopped for a timing
        s["warm_steps_s"] = {str(i): {"n": len(d), "p50": round(statistics.median(d), 4),
                                      "max": round(max(d), 4)}
                             for i, d in sorted(self.pools.warm_steps_s.items()) if d}
        s["warm_steps_stopped"] = self.slots.warmers_stopped
        # CPU seconds per load_inline call compiled (the last 500, as the processes reported them): the
        # compile process's start (counted at its first call only: it serves the next ones too), its
        # own work on the call, the compilers and linker that the call's ninja steps ran
        cpu = list(self.builds.compile_cpu)
        s["compile_cpu_s"] = ({"n": len(cpu), **{k: {"p50": round(statistics.median(c[k] for c in cpu), 3),
                                                    "mean": round(statistics.fmean(c[k] for c in cpu), 3)}
                                                for k in ("start", "python", "compilers")}} if cpu else None)
        return s

    def start_ahead(self) -> None:
        """Start what the evaluations of each device share before the first one arrives: its idle run
        processes and its reference worker (warmed), and the idle build processes. The server calls this
        at startup; without it the first evaluation starts them (on an H200 the worker's start was 4-6 s
        of its queue time)."""
        # what the server has made so far (torch's objects, when it imported torch) out of the
        # collector's way: a full collection walks them all (~0.2-0.3 s on the dev machine) and stops
        # the event loop that reads every slot's messages
        gc.freeze()
        if not self.cfg.start_ahead:
            return
        self._precompiled_header()
        self.pools.fill(BUILD)
        self.pools.fill(COMPILE)
        for gpu in self.references.workers:
            self.pools.fill(("run", gpu))
            self.references.start_ahead(gpu)

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
        await self.pools.settle()
        await self.references.stop()
        await self.pools.stop()

    # ---------------------------------------------------------------- one evaluation
    async def _run(self, task: Task, source: str, key: str, calls: list | None, policy: str) -> Verdict:
        """Build, run and judge a submission that passed the screen; `key` is its build_key, `calls`
        what its import runs of its own (inert_import.load_inline_calls: [] none, no build stage then;
        literal load_inline calls, compiled without a build process; None: anything)."""
        cfg = self.cfg
        ext_dir = cfg.cache_dir / "torch_extensions" / key
        v = Verdict(task.task_id, Stage.BUILD.value, policy=policy)
        # both candidate processes compile with the same header, or the run process would build again
        pch_dir = self._precompiled_header()
        gpu = self.slots.pick()
        self.slots.pending[gpu] += 1
        try:
            seeds = [secrets.randbits(31) for _ in range(cfg.correctness_trials)]  # fresh per evaluation
            init_seed = secrets.randbits(31)
            # what every request to the reference worker carries; the task file is hashed here, before
            # the candidate starts, so an edit made while the submission is imported shows in PREPARE
            ref_req = {**common_request(cfg), **task_request(task), "seeds": seeds, "init_seed": init_seed,
                       "timing_sets": min(2, len(seeds)), "trial_rows": cfg.trial_rows}
            ext_dir.mkdir(parents=True, exist_ok=True)
            # both candidate processes were started before the submission was known: this evaluation's
            # build settings come on stdin (where its build is or goes, which precompiled header)
            build_env = {"KERNEL_ENV_BUILT_DIR": str(ext_dir), "KERNEL_ENV_PCH_DIR": str(pch_dir or "")}
            # the plan comes to the run process on stdin too: the seeds never touch the disk
            plan = {"task_path": str(task.path), "device": cfg.device, "seeds": seeds, "init_seed": init_seed,
                    "timing_sets": ref_req["timing_sets"], "l2_flush_bytes": cfg.l2_flush_bytes,
                    "cpu_threads": cfg.cpu_threads, "timing": timing_rule(cfg), "env": build_env,
                    "policy": policy, "kernel_share": cfg.kernel_share}
            self.pools.fill(("run", gpu))  # an idle run process for this evaluation, started while it builds
            failed = await self.builds.build(v, source, ext_dir, build_env, pch_dir, calls)
            if failed is not None:
                return failed
            return await self._measure(v, task, source, gpu, plan, ref_req, pch_dir, inert=calls is not None)
        except asyncio.CancelledError:
            raise
        except JudgeInternalError as e:
            v.stage, v.error_kind = Stage.RUN.value, ErrorKind.INTERNAL.value
            v.feedback = "The evaluator failed on this submission (not your fault); submit again."
            v.details["internal_error"] = fb.clip(str(e), 2000)
            log.error("internal error on %s: %s", task.task_id, e)
            return v
        finally:
            self.slots.pending[gpu] -= 1

    async def _measure(self, v: Verdict, task: Task, source: str, gpu: int, plan: dict, ref_req: dict,
                       pch_dir: str | None, inert: bool = False) -> Verdict:
        """The run stage: a run process from the pool gets the submission and the plan while the
        evaluations ahead are measured; in the device slot the reference worker hands out output slots,
        the candidate runs its trials (checked before any timing) and is timed. Then the slot goes to
        the next evaluation while this one ends (its candidate killed and gone, the rechecks compared):
        the next one's trials and their check run beside that, and its timing waits for it
        (devices.Turn; JudgeConfig.overlap_tail). Whatever holds device memory is gone before the next
        timing starts. `inert`: the judge read the source's import as inert (inert_import.py): its
        import gets inert_import_timeout_s."""
        cfg = self.cfg
        cand = ref = turn = run = t_free = None
        released = False  # the reference worker has given the evaluation's device memory back
        ref_req = {**ref_req, "eval": secrets.token_hex(8)}  # the worker's name for this evaluation's state
        try:
            t_q = time.monotonic()
            async with queued(self._stats, "waiting_device", self._staged[gpu]):
                # a run process from the pool (torch imported, CUDA context made): it gets the submission
                # and the plan, imports the task and says READY while the evaluations ahead are measured
                t_p = time.monotonic()
                cand = await self.pools.take(("run", gpu))
                warmed = await cand.warmed  # its first GPU work, done outside other candidates' timings
                if warmed.get("event") != P.WARMED:
                    raise JudgeInternalError("the run process did not start: " + str(warmed.get("event"))
                                             + " " + cand.output()[-1500:])
                (cand.workdir / "submission.py").write_text(source)
                (cand.workdir / "slots").mkdir(exist_ok=True)
                await cand.send(json.dumps(plan))
                ready, _ = await asyncio.gather(cand.next_message(cfg.reference_timeout_s),
                                                self.references.get(gpu, ref_req))
                # the run process may still have been importing torch or making its CUDA context
                v.timings["ready_s"] = round(time.monotonic() - t_p, 3)
                if ready.get("event") != P.READY:
                    raise JudgeInternalError("the run process did not start: " + str(ready.get("event"))
                                             + " " + cand.output()[-1500:])
                async with queued(self._stats, "waiting_device", self.slots.slot(gpu, task.task_id)) as turn:
                    turn.hand_on()  # this evaluation's end and compare come after the slot (finally, below)
                    wait_for = self._beside_previous(turn, task.task_id)
                    if wait_for == AFTER_TAIL:
                        await turn.after_previous()
                    elif wait_for == AFTER_CANDIDATE:
                        v.timings["prepare_wait_s"] = round(await turn.after_previous_candidate(), 3)
                    v.timings["queue_s"] = round(time.monotonic() - t_q, 3)
                    self._stats["device_wait_s_total"] += v.timings["queue_s"]
                    t_r = time.monotonic()
                    ref = await self.references.hold(gpu, ref_req)
                    prep = await self._prepare(ref, turn, ref_req, cand, v, task.task_id, wait_for)
                    v.timings["prepare_s"] = round(time.monotonic() - t_r, 3)
                    # from "go" on the submission runs: what it writes into its folder is bounded
                    # (the CPU output slots are in it already, and not counted)
                    cand.watch_folder(cand.workdir, cfg.folder_quota_bytes, cfg.folder_quota_files)
                    t_c = time.monotonic()
                    quiet = self._quiet_timing(gpu)
                    if quiet:
                        v.details["quiet_timing"] = quiet
                    busy = None if quiet else self._busy_timing(gpu)
                    if busy:
                        v.details["busy_timing"] = busy

                    async def check(trials, first):
                        return await self.references.ask(ref, {"mode": P.CHECK, **ref_req, "trials": trials,
                                                               "first": first})

                    # no run process starts its GPU work while this candidate runs; when nobody
                    # waits for the device, the ones already warming up finish first
                    async with self.slots.timing_window(gpu, cfg.quiet_warm_wait_s if quiet else 0.0):
                        # each step's deadline from the reference's time per call (deadlines.py)
                        run = await drive(cand, prep["slots"], cfg, quiet or busy, check,
                                          t_ref_ms=prep["profile"].get("t_ref_ms"),
                                          untrusted_roots=deadlines.untrusted_roots(cfg, self.work_root),
                                          dists=prep.get("dists"), trial_rows=prep.get("trial_rows"),
                                          timing_sets=prep.get("timing_sets"),
                                          before_timing=lambda: self._before_timing(gpu, busy, turn),
                                          import_s=cfg.inert_import_timeout_s if inert else None)
                    v.timings["run_s"] = round(time.monotonic() - t_c, 3)
                    # the judge's clock of the run inside the slot (run_stage.drive)
                    v.timings.update({f"{k}_s": x for k, x in (run.clock or {}).items()})
                    t_x = time.monotonic()
                    if run.failure or run.mismatch:
                        # killed, crashed or wrong: gone before the next candidate runs (a kernel that
                        # spins may take a while to die, and the next trials would run beside it)
                        await self._end(cand)
                    v.timings["slot_s"] = round(time.monotonic() - t_r, 3)  # held from here to the release
                # the tail: the candidate is gone before the rest is compared
                t_free = time.monotonic()
                await self._end(cand)
                turn.candidate_gone()  # its device memory is back: the next PREPARE may go beside the compare
                v.timings["close_s"] = round(time.monotonic() - t_x, 3)
                await turn.next_asks_first()
                if run.check:
                    v.details["ref_phases"]["check"] = run.check
                if run.phases:
                    v.details["run_phases"] = run.phases
                if run.failure:
                    if run.failure.stage == Stage.BUILD.value:
                        self.builds.forget(source, pch_dir)
                    v.stage, v.error_kind = run.failure.stage, run.failure.kind
                    v.feedback = run.failure.feedback
                    v.details.update(run.failure.details)
                    return v
                t_c = time.monotonic()
                if run.mismatch:  # a trial's outputs were wrong: not timed, nothing more to compare
                    passed, mismatch = run.passed, run.mismatch
                else:
                    res = await self.references.ask(ref, {"mode": P.COMPARE, **ref_req, "trials": run.trials,
                                                          "rechecks": run.rechecks})
                    v.details["ref_phases"]["compare"] = res.get("phases")
                    released = True  # the worker gave back the slots' memory before answering
                    passed, mismatch = res["compare"]["passed"], res["compare"]["mismatch"]
                    self.references.retire_if_holding(gpu, ref, res)
                self._profiles[task.task_id] = prep["profile"]
                v.timings["reference_s"] = round(time.monotonic() - t_c, 3)
                self._stats["measures"] += 1
                self._stats["measure_s_total"] += time.monotonic() - t_r
            return finish(v, cfg, prep["profile"], passed, mismatch, run.times_ms, run.kernel_time)
        except JudgeInternalError:
            if ref is not None:  # its state is unknown: the next evaluation gets a fresh one
                await asyncio.shield(self.references.drop(gpu, ref))
                released = True
            raise
        finally:
            try:  # what holds device memory is gone before the next timing starts
                if cand is not None:
                    await asyncio.shield(self._end(cand))
                if ref is not None:
                    if not released:
                        await asyncio.shield(self.references.let_go(gpu, ref, ref_req["eval"]))
                    await asyncio.shield(self.references.done_with(gpu, ref))
            finally:
                if turn is not None:
                    turn.asked_beside()  # whatever happened, the compare before waits for nothing of this one
                    turn.end_tail()
                if t_free is not None:  # the slot's release to the tail's end
                    v.timings["tail_s"] = round(time.monotonic() - t_free, 3)
                if cand is not None:
                    await asyncio.shield(discard(cand))

    def _beside_previous(self, turn, task_id: str) -> str:
        """What this evaluation waits for before its PREPARE goes beside the tail of the one before:
        BESIDE_TAIL nothing, AFTER_CANDIDATE that one's candidate's end, AFTER_TAIL the whole tail (as
        without the overlap). What the last PREPARE of the same pair of tasks (the one before, this one)
        had to wait for: the device's memory holds both evaluations only once the candidate before has
        exited (the 6.4 GB ReLU on an H200), or never (on an 80 GB card). Every PREPARE_RETRY-th time
        the pair tries at once again."""
        if not self.cfg.overlap_tail or not turn.previous_running():
            return AFTER_TAIL
        key = (turn.previous.label, task_id)
        waited, uses = self._prepare_waits.get(key, (BESIDE_TAIL, 0))
        self._prepare_waits[key] = (waited, uses + 1)
        return BESIDE_TAIL if (uses + 1) % PREPARE_RETRY == 0 else waited

    async def _prepare(self, ref: Proc, turn, ref_req: dict, cand: Proc, v: Verdict, task_id: str,
                       waited: str = BESIDE_TAIL) -> dict:
        """The worker's PREPARE: the task's profile and the evaluation's output slots, beside the tail
        of the evaluation before where that changes nothing. Where it would (fewer slots for the memory
        that evaluation still holds, or a profile to make: the reference timed), once that evaluation's
        candidate has exited (memory only), else after the tail. `waited`: what the evaluation waited
        for before (_beside_previous); what this PREPARE had to wait for is remembered for the pair."""
        req = {"mode": P.PREPARE, **ref_req, "slot_dir": str(cand.workdir / "slots")}
        prep = None
        if turn.previous_running():
            key = (turn.previous.label, task_id)
            # what the worker's answer is about: memory with the candidate before still in it, or without
            candidate_running = turn.previous_candidate_running()
            turn.asked_beside()  # no await before the ask: it reaches the worker before the compare before
            prep = await self.references.ask(ref, {**req, "beside": True})
            if prep.get("wait") == "memory" and candidate_running:
                # the memory its candidate holds comes back first: asked again then, beside the compare
                waited, candidate_running = AFTER_CANDIDATE, False
                t = await turn.after_previous_candidate()
                v.timings["prepare_wait_s"] = round(v.timings.get("prepare_wait_s", 0.0) + t, 3)
                turn.asked_beside()
                prep = await self.references.ask(ref, {**req, "beside": True}) if turn.previous_running() else None
            if prep is not None and prep.get("wait"):
                waited = AFTER_TAIL
                v.details["prepare_waited_for"] = prep["wait"]
                t = await turn.after_previous()
                v.timings["prepare_wait_s"] = round(v.timings.get("prepare_wait_s", 0.0) + t, 3)
                prep = None
            elif prep is not None:  # beside the whole tail, or its compare once the candidate before had exited
                v.details["prepared_beside"] = "tail" if candidate_running else "compare"
            self._prepare_waits[key] = (waited, self._prepare_waits.get(key, (BESIDE_TAIL, 0))[1])
        if prep is None:
            prep = await self.references.ask(ref, req)
        v.details["ref_phases"] = {"prepare": prep.get("phases")}
        return prep

    async def _end(self, cand: Proc) -> None:
        """Kill a run process and wait until all of it has exited (deadlines.end_process): a process
        still tearing down its CUDA context after a kill holds device memory, and maybe a kernel still
        running, that the next evaluation on the device would be measured beside."""
        if not await deadlines.end_process(cand, self.cfg.kill_wait_s):
            log.error("a killed run process was still exiting after %.0f s; the device slot goes on", self.cfg.kill_wait_s)

    def _precompiled_header(self) -> str | None:
        """The folder of the precompiled header the candidates' builds use, None while there is none.
        A judge that keeps running starts its build in the background at its first evaluation (a
        builder process and its compilers, several minutes of CPU). A one-shot evaluation
        (evaluate_sync, `kernel-env eval`) starts nothing of the kind: it uses one built earlier if
        there is one, and leaves no process behind when it returns."""
        c = self.cfg
        if not c.precompiled_header:
            return None
        if self._pch is None and self.pools.one_shot:
            d = prebuild.known(c.cache_dir, c.device == "cuda", c.pch_variants)
            return str(d) if d else None
        if self._pch is None:
            self._pch = prebuild.Background(c.cache_dir, c.device == "cuda", c.pch_variants)
        d = self._pch.dir
        return str(d) if d else None

    def _quiet_timing(self, gpu: int) -> dict | None:
        """The candidate's warm-up and wall time when no other evaluation waits for this GPU: it
        idled before this one, and timing longer costs nobody anything (JudgeConfig.quiet_warmup_s)."""
        c = self.cfg
        if c.device != "cuda" or self.slots.pending[gpu] > 1 or (c.quiet_warmup_s <= 0 and c.quiet_min_wall_s <= 0):
            return None
        return {"warmup_s": max(c.warmup_s, c.quiet_warmup_s), "min_wall_s": max(c.timing_min_wall_s, c.quiet_min_wall_s)}

    async def _before_timing(self, gpu: int, busy: dict | None, turn=None) -> dict:
        """Just before a candidate is timed: the evaluation before it has ended (its candidate gone, its
        compare done). Run processes that began a warm-up step before its slot may still be at it (none
        begins inside the slot). Wait for them a little (JudgeConfig.timing_warm_wait_s), then stop
        those still at it until the run ends (JudgeConfig.stop_warmers). If one could not be stopped,
        the warm-up does not stop on steady calls (the step's GPU work may come after them) but lasts
        its whole time."""
        if turn is not None:
            await turn.after_previous()
        await self.slots.warmers_done(gpu, self.cfg.timing_warm_wait_s)
        if not self.slots.gate[gpu]["warming"]:
            return {}
        if self.cfg.stop_warmers and self.slots.stop_warmers(gpu):
            return {}
        if busy and busy.get("warmup_steady_rel"):
            return {"warmup_steady_rel": 0.0}
        return {}

    def _busy_timing(self, gpu: int) -> dict | None:
        """The candidate's warm-up when its slot was taken right after the device's previous one: the
        GPU has been busy until now, so only the allocator, caches and JITs need warming
        (JudgeConfig.busy_warmup_s, busy_warmup_steady_rel; the warm-up still makes warmup_calls calls)."""
        c = self.cfg
        if c.device != "cuda" or self.slots.free_before_s[gpu] > c.busy_gap_s \
                or (c.busy_warmup_s >= c.warmup_s and c.busy_warmup_steady_rel <= 0):
            return None
        return {"warmup_s": min(c.busy_warmup_s, c.warmup_s), "warmup_steady_rel": c.busy_warmup_steady_rel}
