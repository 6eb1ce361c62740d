"""UNTRUSTED side: the entry points of the candidate processes.

    python -m kernel_env.candidate.runner build WORKDIR PROTOCOL_FD
    python -m kernel_env.candidate.runner run WORKDIR PROTOCOL_FD
    python -m kernel_env.candidate.runner compile WORKDIR PROTOCOL_FD

Each runs inside a process of its own that the judge starts (judge/sandbox.py). Everything these
processes report is a claim: the judge compares the outputs written with reference outputs made
elsewhere and cross-checks the timings.

  build   (no GPU: its device files are hidden) started before its evaluation is known (the judge
          keeps a few): torch imported; then the plan on stdin (where earlier builds of this source are,
          which precompiled header to use): import the submission and find ModelNew -> {"event":
          "built"}. A load_inline call with no published build is sent to the judge ({"event":
          "compile"}), whose compile process builds it and publishes it into the cache; this process
          then imports it from there. A compile error ends the evaluation here. Any other failure at
          import is left for the run process to report (a submission may look at the GPU when imported).
  compile (no GPU; trusted code only: no candidate code and no compiler runs in it) started before
          its first call is known: torch imported; then load_inline calls on stdin, one after the
          other, each built as load_inline would build it into the folder the judge names, never
          imported -> {"event": "compiled"}; the judge moves the build into the cache. Each ninja
          build of a call is the judge's to run ({"event": "ninja"}), in a sandbox of its own
          (ninja_step.py): the compilers read the candidate's sources there, not here.
  run     started before its evaluation is known (the judge keeps a few per device): torch imported
          -> {"event": "imported"}; then the CUDA context and our kernels' device code made by this
          trusted code a step at a time, each on {"cmd": "warm"} (sent while no candidate is timed on
          the device) -> {"event": "warm_step"}, the last -> {"event": "warmed"}; then the plan (seeds,
          the task, where the build is) on stdin, the task imported -> {"event": "ready"}; then it
          waits for "go", which the judge sends once the device slot is its own. Only then is
          candidate code loaded (the module the build process made, read from its build folder), so
          it never runs while another submission is measured. "go" brings output slots made by the
          judge (CUDA IPC handles, or mapped files on the CPU), slots for `trial_rows` trials at once,
          and each trial's input distribution, the reference worker's choice. Construct ModelNew, run
          it on the inputs of every trial seed under the watch (watch.py: outputs made by the
          submission's kernels, and no PyTorch compute under the strict policy), copy the outputs into
          the slots -> {"event": "outputs", "more": ...} once the slots are full (on {"cmd": "next"}
          the next trials use them again) or the trials are done; on {"cmd": "time"} (the judge has
          checked them: wrong outputs are never timed) time it, every call on fresh inputs
          (harness.perturb_inputs of the first trials' inputs, made again), a few random
          calls watched too -> {"event": "timed", ...}; the slots of each timing set hold the output
          of one random timed call, named by its salt, for a recheck; a few more calls, measured, for
          the share of its time in the submission's own kernels (share.py) -> {"event": "done"} with
          that share and the seconds each phase took.
"""
from __future__ import annotations

import gc
import json
import os
import random
import resource
import sys
import time
import traceback
import weakref
from pathlib import Path

# The harness binds its timer primitives at import: before the submission can touch them.
from kernel_env import harness, published_builds
from kernel_env import protocol as P
from kernel_env.candidate import binding_objects, fast_build, share, watch
from kernel_env.compute_policy import POLICIES, STRICT

# What the timing code relies on, captured before the submission runs: checked again after timing.
_PRIMITIVES = ("_perf_counter", "_median", "_cuda_sync", "_Event", "_event_record", "_event_elapsed",
               "_event_sync", "_event_query", "_current_stream", "_order_for", "_os_write", "_json_dumps",
               "time_calls", "spread_of", "fill_slots", "flatten_outputs", "clone_args", "synchronize", "emit")
_SAVED = {name: getattr(harness, name) for name in _PRIMITIVES}
_SAVED_TIME = (time.perf_counter, time.monotonic)
_SAVED_READLINE = sys.stdin.readline  # the judge's word to start timing comes after the submission is loaded
_SAVED_SHARE = (share.measure, watch.profiling)
# build settings that come with the plan (a compile process's: also where the judge's binding objects are)
PLAN_ENV = ("KERNEL_ENV_BUILT_DIR", "KERNEL_ENV_PCH_DIR", binding_objects.ENV)

AUDIT_P = 0.15     # share of timing-phase calls preceded by a watched, untimed call on the same inputs
MAX_AUDITS = 8


def _apply_plan_env(plan: dict) -> None:
    """This evaluation's build settings, from its plan (the process was started before it was known).
    The published builds (KERNEL_ENV_BUILT_DIR) are used only if every module there still has the hash
    the judge recorded when it published it; else this process builds in its own folder."""
    for k, v in (plan.get("env") or {}).items():
        if k in PLAN_ENV:
            # a folder not there yet: nothing published, nothing to load from it
            unusable = k == "KERNEL_ENV_BUILT_DIR" and not published_builds.intact(Path(str(v)), if_absent=True)
            os.environ[k] = "" if unusable else str(v)


def _tampered() -> str | None:
    changed = [n for n in _PRIMITIVES if getattr(harness, n, None) is not _SAVED[n]]
    if (time.perf_counter, time.monotonic) != _SAVED_TIME:
        changed.append("time.perf_counter/monotonic")
    return ", ".join(changed) or None


def _cpu_s() -> float:
    """This process's CPU seconds so far (all threads): where a run process's CPU goes, for the benchmarks."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return round(r.ru_utime + r.ru_stime, 3)


def _thread_cpu_s() -> dict:
    """CPU seconds per thread name (Linux): a helper thread that spins shows here."""
    out: dict = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            name = head.split("(", 1)[1].rstrip("0123456789") or "?"
            f_ = rest.split()
            out[name] = round(out.get(name, 0.0) + (int(f_[11]) + int(f_[12])) / tick, 3)
    except (OSError, ValueError, IndexError):
        pass
    return out


class Rejected(Exception):
    """A watched call did not count as the submission's kernel (watch.py says why)."""


def _short_exc(e: BaseException, limit: int = 6000) -> str:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text[-limit:]


def build(workdir: Path, fd: int) -> int:
    """Compile (import) the submission without a GPU; only a compile error is a verdict here."""
    import torch  # noqa: F401  (the submission's imports would load it anyway; errors here are ours)
    import torch.utils.cpp_extension  # noqa: F401
    try:  # what a Triton submission's import needs
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except ImportError:
        pass
    fast_build.install()
    compile_failed = []
    from torch.utils import cpp_extension as ce
    for attr in ("load_inline", "load"):  # an exception that leaves load_inline is a compile error
        def loader(*args, _orig=getattr(ce, attr), **kwargs):
            try:
                return _orig(*args, **kwargs)
            except BaseException:
                compile_failed.append(True)
                raise
        setattr(ce, attr, loader)
    # started before its submission was known: the plan says where earlier builds of it are
    # (KERNEL_ENV_BUILT_DIR: loaded, not built again) and which precompiled header to use
    try:
        plan = json.loads(sys.stdin.readline() or "{}")
        if plan.get("cmd") != P.BUILD:
            return 0
        built_dir = str((plan.get("env") or {}).get("KERNEL_ENV_BUILT_DIR") or "")
        _apply_plan_env(plan)
    except (ValueError, AttributeError, TypeError):
        return 2
    fast_build.COMPILE_BY = lambda a, key: _compiled_by_judge(fd, built_dir, a, key)
    t0 = time.monotonic()
    try:
        sub = harness.load_module(workdir / "submission.py", "submission")
    except BaseException as e:
        if compile_failed:
            harness.emit(fd, {"event": P.ERROR, "phase": "build", "kind": P.BUILD_ERROR, "message": _short_exc(e)})
        else:  # the run process imports it again, with the GPU, and reports what happens then
            harness.emit(fd, {"event": P.BUILT, "import_failed": True, "build_s": time.monotonic() - t0})
        return 0
    if not isinstance(getattr(sub, "ModelNew", None), type):
        harness.emit(fd, {"event": P.ERROR, "phase": "build", "kind": P.NO_MODEL_NEW,
                          "message": "the module imported, but it defines no class ModelNew"})
        return 3
    harness.emit(fd, {"event": P.BUILT, "build_s": time.monotonic() - t0, "reused": len(fast_build.REUSED)})
    return 0


def _compiled_by_judge(fd: int, built_dir: str, a: dict, key: str | None):
    """A load_inline call of the submission, built by the judge's compile process and published into
    the plan's build folder `built_dir`, imported from there."""
    if key is None:
        raise RuntimeError("load_inline's arguments must be plain data (strings, lists, dicts, numbers)")
    harness.emit(fd, {"event": P.COMPILE, "call": {k: v for k, v in a.items() if k != "verbose"}})
    try:
        answer = json.loads(_SAVED_READLINE() or "{}")
    except ValueError:
        answer = {}
    if not isinstance(answer, dict) or answer.get("cmd") != P.COMPILED or not answer.get("ok"):
        message = answer.get("message") if isinstance(answer, dict) else None
        raise RuntimeError(str(message or "the build of this load_inline call failed"))
    # the folder the plan named (also when the plan's check found nothing usable there yet), checked again
    os.environ["KERNEL_ENV_BUILT_DIR"] = built_dir
    ok = bool(built_dir) and published_builds.intact(Path(built_dir), if_absent=False)
    module = fast_build._load_built(a, key) if ok else None
    if module is None:
        raise RuntimeError("the judge built this load_inline call, but its build is not in the build folder")
    return module


def compile_calls(workdir: Path, fd: int) -> int:
    """Build load_inline calls the judge sends, one after the other, without importing them
    (fast_build.compile_only). This process runs no compiler: each ninja build is the judge's to run,
    in a sandbox of its own (ninja_step.py), so the process can serve call after call with torch
    imported once."""
    import torch  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401
    started = _cpu_s()  # its start, idle before the first call came (diagnosis only, a claim)
    own_env = dict(os.environ)
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        try:
            plan = json.loads(line)
            if plan.get("cmd") != P.COMPILE:
                return 0
            call, folder = plan["call"], plan["folder"]
            if not isinstance(call, dict) or not isinstance(folder, str):
                raise ValueError(call)
        except (ValueError, AttributeError, TypeError, KeyError):
            return 2
        # nothing of the last call's settings stays: its environment, its build folder
        os.environ.clear()
        os.environ.update(own_env)
        for k, v in (plan.get("env") or {}).items():
            if k in PLAN_ENV:
                os.environ[k] = str(v)
        os.environ["TORCH_EXTENSIONS_DIR"] = folder
        published = os.environ.get("KERNEL_ENV_BUILT_DIR", "")
        os.environ["KERNEL_ENV_BUILT_DIR"] = ""  # it builds; it loads nothing
        t0, cpu0 = time.monotonic(), _cpu_s()

        def cpu_s() -> dict:
            return {"start": started, "python": round(_cpu_s() - cpu0, 3)}
        # built already (by an earlier judge on this cache, or a source with the same call): nothing to
        # do but say so. Only the judge checks and trusts the published folder; this saves a compile
        if published and published_builds.intact(Path(published), if_absent=False):
            entry = fast_build.published_entry(call, published)
            if entry is not None:
                harness.emit(fd, {"event": P.COMPILED, "build_s": time.monotonic() - t0, "published": True,
                                  "cpu_s": cpu_s(), **entry})
                started = 0.0
                continue
        try:
            entry = fast_build.compile_only(call, run_ninja=lambda d, verbose, prefix: _ninja_by_judge(fd, d, prefix))
        except Exception as e:
            harness.emit(fd, {"event": P.ERROR, "phase": "build", "kind": P.BUILD_ERROR, "message": _short_exc(e),
                              "cpu_s": cpu_s()})
        else:
            harness.emit(fd, {"event": P.COMPILED, "build_s": time.monotonic() - t0, "cpu_s": cpu_s(), **entry})
        started = 0.0


def _ninja_by_judge(fd: int, build_directory: str, error_prefix: str) -> None:
    """torch's _run_ninja_build, run by the judge: the same ninja command in `build_directory`, its
    output in the error torch would raise."""
    from torch.utils import cpp_extension as ce
    harness.emit(fd, {"event": P.NINJA, "dir": str(build_directory), "jobs": ce._get_num_workers(False) or 0})
    try:
        answer = json.loads(sys.stdin.readline() or "{}")
    except ValueError:
        answer = {}
    if not isinstance(answer, dict) or answer.get("cmd") != P.NINJA:
        raise RuntimeError(f"{error_prefix}: the judge did not run ninja")
    if answer.get("rc") != 0:
        output = str(answer.get("output") or "")
        raise RuntimeError(f"{error_prefix}: {output}" if output else error_prefix)


def _warm_triton(device) -> None:
    """Triton's once-per-process work at a first launch, done now (candidate/triton_warm.py)."""
    try:
        from kernel_env.candidate import triton_warm
        triton_warm.warm(device)
    except Exception:  # a Triton that cannot compile here fails the submission's own launch, with its message
        pass


def start(fd: int):
    """Everything a run process does before its evaluation is known (the judge keeps a few waiting),
    outside any device slot: torch imported -> IMPORTED; on WARM the CUDA context, our own kernels'
    device code and Triton's first launch -> WARMED. Returns (device, CPU seconds per stage), or the
    exit code when the judge ended it instead."""
    import torch
    device = harness.device_of(os.environ.get("KERNEL_ENV_DEVICE", "cpu"))
    # the watch's first use: torch's dispatch-mode machinery loaded before the evaluation is known
    with watch.Watch():
        torch.zeros(4).fill_(1)
    # what a submission's import needs (load_inline's module, Triton)
    import torch.utils.cpp_extension  # noqa: F401
    try:
        import triton  # noqa: F401
    except ImportError:
        triton = None
    else:
        from kernel_env.candidate import triton_warm
        triton_warm.use_key(os.environ.get("KERNEL_ENV_TRITON_KEY"))
    # The first GPU work (the CUDA context, loading our kernels' device code, Triton's first launch)
    # waits for the judge's word: it keeps it out of another candidate's timing on this device
    cpu = {"imported": _cpu_s()}  # CPU seconds at each stage (diagnosis only, a claim)
    harness.emit(fd, {"event": P.IMPORTED})
    # the CUDA context and the device code of our own kernels (on the CPU, the same steps on tiny tensors)
    cuda = device.type == "cuda"
    steps = ([torch.cuda.init] if cuda else []) + harness.warm_steps(device) \
        + ([lambda: _warm_triton(device)] if cuda and triton is not None else [])
    for i, step in enumerate(steps):
        if i:  # each step on the judge's word: none runs while another candidate is timed
            harness.emit(fd, {"event": P.WARM_STEP})
        try:
            if json.loads(sys.stdin.readline() or "{}").get("cmd") != P.WARM:
                return 0
        except (ValueError, AttributeError):
            return 2
        step()
    cpu["warmed"] = _cpu_s()
    # torch's objects (~180k) out of the collector's way: a full collection that the evaluation's
    # allocations trigger inside the device slot then walks only what was made since (~0.2 s otherwise)
    gc.freeze()
    harness.emit(fd, {"event": P.WARMED})
    return device, cpu


def read_plan(fd: int, device, cpu: dict):
    """The evaluation's plan, then its task imported -> READY. The plan holds the seeds: it comes on
    stdin, never through a file another candidate process could read; with it, this evaluation's
    build settings. Returns (plan, seeds, init_seed, task module), or the exit code."""
    import torch
    try:
        plan = json.loads(sys.stdin.readline() or "{}")
        seeds, init_seed = plan.pop("seeds"), plan.pop("init_seed")
        _apply_plan_env(plan)
    except (ValueError, KeyError, AttributeError, TypeError):
        return 2
    if device.type == "cpu":
        torch.set_num_threads(plan.get("cpu_threads", 1))
    task = harness.load_module(plan["task_path"], "reference_problem")
    sys.modules.pop("reference_problem", None)  # the submission has no business with the reference
    cpu["ready"] = _cpu_s()
    harness.emit(fd, {"event": P.READY})
    return plan, seeds, init_seed, task


def main() -> int:
    mode, workdir, fd = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    if mode == P.BUILD:
        return build(workdir, fd)
    if mode == P.COMPILE:
        return compile_calls(workdir, fd)
    import torch

    # The stages before the submission is loaded are functions of this module; from the import of
    # the submission on, everything runs in this function's own frame (and closures made in it): the
    # submission shares the process and could replace a module-level function it has not yet run.
    started = start(fd)
    if isinstance(started, int):
        return started
    device, cpu = started
    planned = read_plan(fd, device, cpu)
    if isinstance(planned, int):
        return planned
    plan, seeds, init_seed, task = planned

    try:
        go = json.loads(sys.stdin.readline() or "{}")
    except ValueError:
        return 0
    if go.get("cmd") != P.GO:
        return 0
    token = go.get("token")

    def emit(msg: dict) -> None:  # a judge that sends a token can tell our lines from forged ones
        _SAVED["emit"](fd, {**msg, "token": token} if token else msg)

    # candidate code from here on: the device slot is ours
    phases = {"cpu_s": cpu}
    t0 = time.monotonic()
    fast_build.install()  # load_inline, built faster (same module); the watch below wraps it
    watch.install_extension_hooks()  # before the import: the modules load_inline builds report calls
    try:
        sub = harness.load_module(workdir / "submission.py", "submission")
    except SystemExit as e:
        emit({"event": P.ERROR, "phase": "build", "kind": P.BUILD_ERROR,
              "message": f"the submission called exit({e.code}) while being imported"})
        return 3
    except BaseException as e:  # compile errors surface here, from load_inline
        emit({"event": P.ERROR, "phase": "build", "kind": P.BUILD_ERROR, "message": _short_exc(e)})
        return 3
    model_cls = getattr(sub, "ModelNew", None)
    if not isinstance(model_cls, type):
        emit({"event": P.ERROR, "phase": "build", "kind": P.NO_MODEL_NEW,
              "message": "the module imported, but it defines no class ModelNew"})
        return 3
    phases["import_s"] = time.monotonic() - t0
    emit({"event": P.STEP, "step": P.CONSTRUCT})  # each step's deadline starts when the judge reads this
    phases["module_sha"] = fast_build.loaded_digest()  # which build ran (diagnosis only, a claim)
    phases["builds_loaded"] = len(fast_build.REUSED)  # load_inline calls answered from the published builds

    phase = "construct"
    rng = random.SystemRandom()
    policy = plan.get("policy") if plan.get("policy") in POLICIES else STRICT

    def watched(args, seed):
        """One forward under the watch: its outputs, or Rejected."""
        watch.install_triton_hooks()
        with watch.Watch(policy) as w:
            out = harness.call(model, args, seed)
            if not watch.still_active(w):
                raise Rejected("the evaluator's watch on ModelNew.forward was removed or replaced during the call")
        why = watch.check_outputs(out, device) or watch.verdict(w, out)
        if why:
            raise Rejected(why)
        return out

    slots: list = []

    def release_slots() -> None:
        """Let go of the judge's output slots before the last message: torch gives a block shared
        through CUDA IPC back to its owner (the reference worker) only once the consumer dropped it."""
        try:
            harness.synchronize(device)
        except BaseException:  # a broken CUDA context (device assert...): releasing would crash
            return             # this process; the judge restarts the worker that holds the slots
        slots.clear()

    try:
        slots.extend(harness.open_slots(go["slots"], device))  # trials first, then one row per timing set
        n_trials = len(seeds)
        # the slots of `rows` trials at once (fewer than the trials when device memory is short: each
        # batch is checked before its slots are used again), and each trial's input distribution,
        # both the reference worker's choice
        rows = int(go.get("trial_rows") or n_trials)
        dists = [d if isinstance(d, str) else "normal" for d in (go.get("dists") or [])][:n_trials]
        dists += ["normal"] * (n_trials - len(dists))
        t1 = time.monotonic()
        phases["slots_s"] = t1 - t0 - phases["import_s"]
        model = harness.make_model(model_cls, task, init_seed, device)
        t2 = time.monotonic()
        phases["construct_s"] = t2 - t1
        phase = "forward"
        headers = []
        steps = phases["trial_steps_s"] = []  # per trial: inputs, forward (watched), copy into the slots
        phases["gate_s"] = 0.0
        for i, seed in enumerate(seeds):
            emit({"event": P.STEP, "step": P.TRIAL, "i": i})
            ts = [time.monotonic()]
            args = harness.make_inputs(task, seed, device, dists[i])
            harness.synchronize(device)
            ts.append(time.monotonic())
            # the trial's own inputs: the reference worker makes its own from the seed, and the timing
            # makes its inputs anew, so what the forward does to these is seen by no one
            out = harness.flatten_outputs(watched(args, seed))
            harness.synchronize(device)
            ts.append(time.monotonic())
            headers.append(harness.fill_slots(slots[i % rows], out))
            harness.synchronize(device)
            ts.append(time.monotonic())
            steps.append([round(b - a, 3) for a, b in zip(ts, ts[1:])])
            del out, args  # before the next trial's inputs: GBs on the largest tasks
            if (i + 1) % rows and i + 1 < n_trials:
                continue
            # a batch of trials in its slots: the judge has the reference worker check it (wrong outputs
            # are never timed); then either the next batch in the same slots, or the timing
            more = i + 1 < n_trials
            if more:
                harness.free_cached(device)  # room for the worker's check of the batch
            cpu["outputs"] = _cpu_s()
            t3 = time.monotonic()  # before the message: the judge's check (and its clock) starts only once it is read
            emit({"event": P.OUTPUTS, "trials": headers[-((i % rows) + 1):], "more": more})
            try:
                gate = json.loads(_SAVED_READLINE() or "{}")
            except ValueError:
                gate = None
            phases["gate_s"] += time.monotonic() - t3  # the outputs message and the judge's check
            if not isinstance(gate, dict) or gate.get("cmd") != (P.NEXT if more else P.TIME):
                release_slots()
                return 0
            if not more and isinstance(gate.get("timing"), dict):  # the judge's last word on the rule
                go["timing"] = {**(go.get("timing") or {}), **gate["timing"]}
        t4 = time.monotonic()
        phases["trials_s"] = t4 - t2 - phases["gate_s"]
        phases["timing_t0_us"] = int(t4 * 1e6)  # CLOCK_MONOTONIC: the judge's clock too
        peak = harness.peak_memory(device)
        if peak is not None:
            phases["trials_peak_mib"] = peak

        # the timing starts on the judge's word: once the reference worker has checked the trials (no
        # other process's GPU work in the timing). Its calls time perturbed copies of the first trials'
        # inputs, made again from their seeds (the worker rebuilds any call's inputs the same way)
        phase = "timing"
        sets = int(go.get("timing_sets") or plan["timing_sets"])  # fewer when device memory is short
        kept = [(seed, harness.make_inputs(task, seed, device, dists[j])) for j, seed in enumerate(seeds[:sets])]
        flusher = harness.L2Flusher(device, plan["l2_flush_bytes"])
        state = {"n": 0, "set": 0, "salt": 0, "args": None, "out": None, "audits": 0}
        first_audit = rng.randrange(len(kept), len(kept) + 4)
        recheck_headers, seen = {}, [0] * len(kept)
        # the output tensors of earlier timed calls, by id, while something keeps them alive; a set's
        # recheck pinned to a call that returned one of them again
        returned: dict = {}
        pinned = [False] * len(kept)

        def before():  # fresh inputs every call: nothing to cache on (harness.perturb_inputs)
            n = state["n"]
            state["set"] = j = n if n < len(kept) else rng.randrange(len(kept))
            state["salt"] = n + 1
            seed, base = kept[j]
            state["args"] = None  # the last call's inputs go before this call's are made
            args = harness.perturb_inputs(base, state["salt"])
            if n == first_audit or (n >= len(kept) and state["audits"] < MAX_AUDITS and rng.random() < AUDIT_P):
                # an extra, untimed call under the watch, like a timed one: a forward that switches to
                # PyTorch (or to a cache) once the trials are over is caught here. The timed call gets
                # the same inputs made again (the audited call may have written into these)
                state["audits"] += 1
                watched(args, seed)
                args = None
                args = harness.perturb_inputs(base, state["salt"])
            torch.manual_seed(seed)
            state["args"] = args
            state["n"] += 1

        def fn():
            with torch.no_grad():
                state["out"] = model(*state["args"])

        def after():  # outside the timed region: check what the call returned, maybe keep it for the recheck
            out, state["out"] = state["out"], None
            why = watch.check_outputs(out, device)  # a lazy object would compute here, untimed
            if why:
                raise Rejected(why)
            j = state["set"]
            seen[j] += 1
            flat = harness.flatten_outputs(out)
            # a tensor an earlier call returned, returned again (a cache keyed on the inputs' addresses,
            # which the allocator hands out again; or a buffer filled anew): its values must be this
            # call's, so such a call is the one rechecked, whatever the random pick
            again = any((r := returned.get(id(t))) is not None and r() is t for t in flat)
            for t in flat:
                returned[id(t)] = weakref.ref(t)
            # else reservoir sampling: a uniformly random call of this set is checked
            if not pinned[j] and (again or rng.random() * seen[j] < 1.0):
                pinned[j] = again
                hdr = harness.fill_slots(slots[rows + j], flat)
                recheck_headers[j] = [{**h, "salt": state["salt"]} for h in hdr] or [{"salt": state["salt"]}]

        t = dict(plan["timing"])
        extra = go.get("timing")  # the judge's change for this slot: a longer warm-up when the GPU idled, a shorter one when it was busy
        if isinstance(extra, dict):
            t.update({k: float(extra[k]) for k in ("warmup_s", "min_wall_s", "warmup_steady_rel")
                      if isinstance(extra.get(k), (int, float))})
        res = _SAVED["time_calls"](fn, device, warmup=t["warmup"], min_calls=t["min_calls"], max_calls=t["max_calls"],
                                   budget_s=t["budget_s"], stable_rel=t["stable_rel"], flusher=flusher, before=before,
                                   warmup_s=t["warmup_s"], after=after, retime_spread=t.get("retime_spread", 0.0),
                                   attempts=t.get("attempts", 1), min_wall_s=t.get("min_wall_s", 0.0),
                                   warmup_steady_rel=t.get("warmup_steady_rel", 0.0),
                                   early_calls=int(t.get("early_calls", 0)), early_rel=float(t.get("early_rel", 0.0)))
        bad = _tampered()
        if bad:
            raise Rejected(f"the submission replaced the evaluator's timing or output functions ({bad})")
        emit({"event": P.TIMED, "times_ms": res["times_ms"], "calls": state["n"]})
        phases["timing_spreads"] = [round(x, 4) for x in res["spreads"]]  # one per measurement (retimed when > 1)
        phases["timing"], phases["hold_us"], phases["late_calls"] = res["timing"], res["hold_us"], res.get("late", 0)
        phases["hold_s"] = round(res["held_s"], 4)  # the GPU idled in hold kernels this long (busy to nvidia-smi)
        phases["warmup_s"], phases["warmup_calls"] = res["warmup_s"], res["warmup_calls"]
        harness.synchronize(device)
        phases["timing_s"] = time.monotonic() - t4
        phases["audits"] = state["audits"]
        peak = harness.peak_memory(device)
        if peak is not None:
            phases["peak_mib"] = peak
        kernel_time = None
        if plan.get("kernel_share") in ("events", "profiler"):  # a few more calls: how much of its time its own kernels take
            phase = "profile"
            emit({"event": P.STEP, "step": P.PROFILE_STEP})
            args = harness.perturb_inputs(kept[0][1], state["n"] + 1)
            torch.manual_seed(kept[0][0])

            def profiled():
                with torch.no_grad():
                    model(*args)
            kernel_time = _SAVED_SHARE[0](profiled, device, _SAVED_SHARE[1], plan["kernel_share"])
            phases["profile_s"] = kernel_time["profile_s"]
        cpu["done"], phases["thread_cpu_s"] = _cpu_s(), _thread_cpu_s()
        # the slots hold the last timed output of each input set, checked like the trials
        release_slots()
        emit({"event": P.DONE, "rechecks": [recheck_headers.get(j, []) for j in range(len(kept))],
              "phases": {k: round(v, 3) if isinstance(v, float) else v for k, v in phases.items()},
              "kernel_time": kernel_time})
    except Rejected as e:
        release_slots()
        emit({"event": P.ERROR, "phase": phase, "kind": P.REJECTED, "message": f"Rejected: {e}"})
        return 4
    except BaseException as e:
        release_slots()
        emit({"event": P.ERROR, "phase": phase, "kind": P.RUNTIME_ERROR, "message": _short_exc(e)})
        return 4
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: a broken CUDA context can hang it
