"""TRUSTED: the run stage, as the judge drives it: one run process, inside the device slot.

"go" (with the output slots and a token) -> the trials' outputs, which the reference worker checks
before anything is timed (wrong outputs are never timed) -> "time" -> the times and the rechecks.
Everything the process says is a claim: lines without the token are forgeries, times are checked
against the judge's own clock. The result is a RunOutcome; the verdict is made from it elsewhere.
"""
from __future__ import annotations

import json
import math
import secrets
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from .. import protocol as P
from . import deadlines
from . import feedback as fb
from .config import JudgeConfig
from .sandbox import Proc, describe_exit
from .verdict import ErrorKind, Stage


@dataclass
class Failure:
    """Why a run gave no outputs to compare: the verdict's stage, error kind and feedback."""
    kind: str
    feedback: str
    stage: str = Stage.RUN.value
    details: dict = field(default_factory=dict)


@dataclass
class RunOutcome:
    failure: Failure | None = None
    trials: list | None = None      # the trials' output headers (what the slots hold)
    check: dict | None = None       # the reference worker's check of the trials: its phases, seconds
    mismatch: dict | None = None    # a trial's outputs were wrong: the run ended before its timing
    passed: int = 0                 # trials that passed the check, when one mismatched
    times_ms: list | None = None
    calls: int | None = None
    timing_wall_s: float | None = None  # the judge's clock from "go" to "timed"
    rechecks: list | None = None    # the slots of one random timed call per timing set
    phases: dict | None = None      # the run process's seconds per phase (a claim, for diagnosis)
    kernel_time: dict | None = None  # the measured calls: share of the time in the submission's own kernels
    # the judge's own clock of the slot's run, in seconds: "go" to the trials' outputs read ("outputs"),
    # "time" to the times read ("timed", warm-up included), the times to "done" ("done": the kernel share)
    clock: dict | None = None


def _fail(kind: str, feedback: str, **kw) -> RunOutcome:
    return RunOutcome(failure=Failure(kind, feedback, **kw))


def _phases(raw) -> dict | None:
    """The numbers of the run process's phases that are numbers (sizes bounded): diagnosis only."""
    if not isinstance(raw, dict):
        return None
    return {k: v for k, v in raw.items()
            if isinstance(v, (int, float))
            or (k in ("trial_steps_s", "timing_spreads") and isinstance(v, list) and len(str(v)) < 2000)
            or (k == "module_sha" and isinstance(v, str) and len(v) <= 64)
            or (k in ("cpu_s", "thread_cpu_s") and isinstance(v, dict) and len(str(v)) < 2000
                and all(isinstance(x, (int, float)) for x in v.values()))}


def _kernel_time(raw) -> dict | None:
    """The measured calls' numbers (candidate/share.py), if they are sane: share in [0, 1], times
    >= 0, at most a few named entries. Like the phases, a claim of the candidate process."""
    if not isinstance(raw, dict):
        return None
    share, own, total = raw.get("share"), raw.get("own_us"), raw.get("total_us")
    if not all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in (share, own, total)):
        return None
    if share > 1.0 or own > total * 1.0001 + 1e-6:
        return None
    top = []
    for entry in raw.get("top") if isinstance(raw.get("top"), list) else []:
        if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], (int, float)) \
                and math.isfinite(entry[1]) and len(top) < 8:
            top.append([str(entry[0])[:120], float(entry[1]), bool(entry[2])])
    return {"share": float(share), "own_us": float(own), "total_us": float(total), "top": top,
            "profile_s": float(raw["profile_s"]) if isinstance(raw.get("profile_s"), (int, float)) else None}


def _add_check(so_far: dict | None, chk: dict, s: float) -> dict:
    """The reference worker's checks of the batches of trials, added up: seconds per phase, rows
    checked, trials passed; deferred when a check left rows to the compare."""
    out = dict(so_far or {})
    for k, x in (chk.get("phases") or {}).items():
        if isinstance(x, (int, float)):
            out[k] = round(out.get(k, 0.0) + x, 4)
    out["rows"] = chk.get("rows")  # the worker's count of the trials checked so far
    out["passed"] = (out.get("passed") or 0) + (chk.get("passed") or 0)
    out["deferred"] = bool(out.get("deferred") or chk.get("deferred"))
    out["batches"] = out.get("batches", 0) + 1
    out["s"] = round(out.get("s", 0.0) + s, 4)
    out["done_t"] = time.monotonic()
    return out


def valid_times(run: RunOutcome, max_timed_calls: int) -> bool:
    """Times are claims from the candidate process: sane numbers, and no more than the wall clock saw
    from "go" to "timed"."""
    times = run.times_ms
    if not isinstance(times, list) or not 1 <= len(times) <= max_timed_calls:
        return False
    if not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in times):
        return False
    return sum(times) / 1e3 <= run.timing_wall_s * 1.05 + 0.01


async def drive(cand: Proc, slots: list, cfg: JudgeConfig, timing: dict | None = None,
                check: Callable[[list, int], Awaitable[dict]] | None = None, t_ref_ms: float | None = None,
                untrusted_roots: tuple = (), dists: list | None = None, trial_rows: int | None = None,
                timing_sets: int | None = None, before_timing: Callable[[], Awaitable[dict]] | None = None,
                import_s: float | None = None) -> RunOutcome:
    """Drive the run phase of `cand`. `slots`: the reference worker's output slots, `trial_rows` of them
    for the trials (all of them when None), then one per timing set (`timing_sets`: the plan's when
    None); `dists`: each trial's input distribution. `timing`: changes to the plan's timing rule,
    decided when the slot is this evaluation's. `check(trials, first)`: the reference worker's check
    of a batch of trials' outputs (the first of them trial `first`) before the candidate goes on; when
    they are wrong the run ends there (mismatch and passed set, no times). With fewer trial slots than
    trials the candidate waits for each batch's check before it uses the slots again, so then `check`
    is required.
    `t_ref_ms`: the reference's time per call, which sets each step's deadline (deadlines.py);
    `untrusted_roots`: folders the candidate can write (no compiler runs from there).
    `import_s`: the import's deadline outside compilers (import_timeout_s when None).
    `before_timing()`: awaited once the trials are checked, before the candidate is told to time (the
    judge waits for other processes' GPU work to end); it returns changes to the timing rule that TIME
    brings. Its seconds are the judge's, not the candidate's."""
    limit = cfg.feedback_max_chars
    n_trials = cfg.correctness_trials
    rows = min(trial_rows or n_trials, n_trials)
    if rows < n_trials and check is None:
        raise ValueError("trial slots used again need the check of each batch")
    # the judge's clock per step; the run as a whole gets run_timeout_s outside compilers
    dl = deadlines.Deadline(cand, cfg, ceiling_s=cfg.run_timeout_s, untrusted_roots=untrusted_roots)
    # the steps the runner announces, in their order: each may be announced once, and only in turn
    expected = [(P.CONSTRUCT, None)] + [(P.TRIAL, i) for i in range(n_trials)]
    # The runner stamps every line after "go" with this token; the submission runs in the same
    # process and can write to the protocol pipe too, but never sees the token.
    token = secrets.token_hex(16)
    # the timing's wall-clock bound starts here, not at "outputs": a busy event loop reads messages
    # late, and both at once when it stood still longer than the timing took (a window of ~0 s)
    t_go = time.monotonic()
    deadlines.import_step(dl, cfg, import_s)
    go = {"cmd": P.GO, "slots": slots, "dists": dists or [], "trial_rows": rows, "timing_sets": timing_sets,
          "token": token, "timing": timing or {}}
    if not await cand.send(json.dumps(go)):
        rc = await cand.wait(5)
        return _fail(ErrorKind.CRASH.value,
                     fb.runtime_failure(f"The process {describe_exit(rc)} before running.", "", cand.output(), limit))
    run = RunOutcome(trials=[])
    outputs_done = False  # the last batch of trials came
    while True:
        msg = await dl.next_message()
        ev = msg.get("event")
        if ev not in P.READER_EVENTS and msg.get("token") != token:
            cand.kill()
            return _fail(ErrorKind.TIMING_INVALID.value,
                         "A message on the evaluator's result channel was not from the evaluator's runner "
                         "(forged results: writing to the evaluator's pipes is not allowed); the run is discarded.",
                         details={"forged_event": str(ev)[:40]})
        if ev == P.STEP:
            got = (msg.get("step"), msg.get("i"))
            if not expected or got != expected[0]:
                cand.kill()
                return _fail(ErrorKind.TIMING_INVALID.value,
                             "The evaluator's runner reported its steps out of order (a forged or repeated "
                             "message); the run is discarded.", details={"step": str(got)[:60]})
            expected.pop(0)
            if got[0] == P.CONSTRUCT:
                dl.start("constructing ModelNew", cfg.run_construct_s)
            elif got[0] == P.TRIAL:
                dl.start(f"trial {got[1] + 1} of {n_trials}", deadlines.trial_s(cfg, t_ref_ms, got[1]))
            else:
                dl.start("the kernel-share calls", deadlines.after_timing_s(cfg, t_ref_ms))
            continue
        if ev == P.OUTPUTS:
            batch, more = msg.get("trials"), msg.get("more") is True
            first = len(run.trials)
            started = n_trials - sum(1 for step, _ in expected if step == P.TRIAL)
            # a batch is every trial started since the last one: a full set of slots, or the last trials
            if outputs_done or not isinstance(batch, list) or started != first + len(batch) \
                    or len(batch) != (rows if more else (n_trials - 1) % rows + 1) or more == (not expected):
                cand.kill()
                return _fail(ErrorKind.TIMING_INVALID.value,
                             "The evaluator's runner reported outputs out of order; the run is discarded.")
            t_out = time.monotonic()
            run.trials.extend(batch)
            if check is not None:  # the trials are checked now: wrong outputs are never timed
                t_w = time.monotonic()
                chk = await check(batch, first)
                dl.excuse(time.monotonic() - t_w, compiling=False)  # the candidate waited for it: not its time
                run.check = _add_check(run.check, chk, time.monotonic() - t_w)
                if chk.get("mismatch"):
                    cand.kill()
                    run.mismatch, run.passed = chk["mismatch"], (run.check or {}).get("passed", 0)
                    return run
            if more:  # the same slots for the next batch of trials
                await cand.send(json.dumps({"cmd": P.NEXT}))
                continue
            outputs_done = True
            run.clock = {"outputs": round(t_out - t_go, 4)}
            change = {}
            if before_timing is not None:
                t_w = time.monotonic()
                change = await before_timing()
                dl.excuse(time.monotonic() - t_w, compiling=False)
                run.clock["before_timing"] = round(time.monotonic() - t_w, 4)
            # the timing starts on our word: the worker's GPU work is over (it synchronised)
            dl.start("the timing", deadlines.timing_s(cfg, t_ref_ms, {**(timing or {}), **change}))
            await cand.send(json.dumps({"cmd": P.TIME, "timing": change}))  # a process that died says so with EOF
            t_time = time.monotonic()
        elif ev == P.TIMED:
            if not outputs_done or run.times_ms is not None:
                cand.kill()
                return _fail(ErrorKind.TIMING_INVALID.value,
                             "The evaluator's runner reported times out of order; the run is discarded.")
            expected = [(P.PROFILE_STEP, None)]
            dl.start("the end of the timing", deadlines.after_timing_s(cfg, t_ref_ms))
            run.times_ms, run.calls = msg.get("times_ms"), msg.get("calls")
            run.timing_wall_s = time.monotonic() - t_go
            t_timed = time.monotonic()
            if run.clock is not None:
                run.clock["timed"] = round(t_timed - t_time, 4)
        elif ev == P.DONE:
            run.rechecks = msg.get("rechecks")
            run.phases = _phases(msg.get("phases"))
            run.kernel_time = _kernel_time(msg.get("kernel_time"))
            if run.clock is not None and "timed" in run.clock:
                run.clock["done"] = round(time.monotonic() - t_timed, 4)
            break
        elif ev == P.TIMEOUT:
            cand.kill()
            if dl.step.name == deadlines.IMPORT:  # Python spinning at import, with the GPU
                return _fail(ErrorKind.BUILD_TIMEOUT.value,
                             fb.clip(f"Timed out: {dl.describe()}.", limit),
                             stage=Stage.BUILD.value, details={"deadline": dl.details()})
            return _fail(ErrorKind.RUN_TIMEOUT.value,
                         fb.clip(f"Timed out: {dl.describe(t_ref_ms)}. An infinite loop or a deadlock in the "
                                 "kernel?", limit), details={"deadline": dl.details(t_ref_ms)})
        elif ev == P.ERROR and msg.get("phase") == "build":  # the import, now with the GPU
            if msg.get("kind") == P.NO_MODEL_NEW:
                return _fail(ErrorKind.NO_MODEL_NEW.value, "The module imported, but it defines no class ModelNew.",
                             stage=Stage.FORMAT.value)
            await cand.wait(5)
            return _fail(ErrorKind.BUILD_ERROR.value,
                         fb.build_failure(str(msg.get("message", "")), cand.output(), limit), stage=Stage.BUILD.value)
        elif ev == P.ERROR and msg.get("kind") == P.REJECTED:  # the watch's reason, not a traceback
            text = str(msg.get("message", ""))
            return _fail(ErrorKind.RUNTIME_ERROR.value, fb.clip(text if text.startswith("Rejected") else "Rejected: " + text, limit),
                         details={"phase": msg.get("phase", "run"), "rejected": True})
        elif ev == P.ERROR:
            phase = msg.get("phase", "run")
            return _fail(ErrorKind.RUNTIME_ERROR.value,
                         fb.runtime_failure(f"ModelNew raised an exception ({phase}):", str(msg.get("message", "")),
                                            cand.output(), limit), details={"phase": phase})
        elif ev in (P.EOF, P.GARBAGE):
            if ev == P.GARBAGE:
                cand.kill()
            rc = await cand.wait(10)
            if cand.over_quota:  # the judge ended it (Proc.watch_folder)
                return _fail(ErrorKind.CRASH.value, fb.clip(f"Stopped: {cand.over_quota}.", limit),
                             details={"limit": "folder_quota"})
            return _fail(ErrorKind.CRASH.value,
                         fb.runtime_failure(f"The process {describe_exit(rc)} while running ModelNew "
                                            "(a crash: bad memory access, illegal instruction, exit?). "
                                            "Its last output:", "", cand.output() or "(none)", limit),
                         details={"exit": describe_exit(rc)})
    if not valid_times(run, cfg.max_timed_calls):
        return _fail(ErrorKind.TIMING_INVALID.value,
                     "The timing report is inconsistent with the evaluator's own clock; the run is discarded.",
                     details={"timing_wall_s": run.timing_wall_s})
    return run
