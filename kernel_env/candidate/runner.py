"""UNTRUSTED side: the entry point of the candidate process.

    python -m kernel_env.candidate.runner WORKDIR PROTOCOL_FD

Runs inside a process of its own that the judge starts (judge/sandbox.py). Everything this process
reports is a claim: the judge compares the outputs it wrote with reference outputs made elsewhere and
cross-checks its timings. Phases, each announced on the protocol pipe as one JSON line:

  1. build   import the submission (load_inline compiles here) and find ModelNew -> {"event": "built"}
             then wait for "go" on stdin: the judge sends it once a device slot is free.
  2. run     "go" brings output slots made by the judge (CUDA IPC handles, or mapped files on the
             CPU). Construct ModelNew, run it on the inputs of every trial seed (clones), copy the
             outputs into the slots -> {"event": "outputs", ...}; time it -> {"event": "timed", ...};
             copy the outputs of the last timed calls for a recheck -> {"event": "done"}.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

# The harness binds its timer primitives at import: before the submission can touch them.
from kernel_env import harness


def _short_exc(e: BaseException, limit: int = 6000) -> str:
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return text[-limit:]


def main() -> int:
    workdir, fd = Path(sys.argv[1]), int(sys.argv[2])
    plan = json.loads((workdir / "plan.json").read_text())
    import torch

    device = harness.device_of(plan["device"])
    if device.type == "cpu":
        torch.set_num_threads(plan.get("cpu_threads", 1))
    task = harness.load_module(plan["task_path"], "reference_problem")

    t0 = time.monotonic()
    try:
        sub = harness.load_module(workdir / "submission.py", "submission")
    except SystemExit as e:
        harness.emit(fd, {"event": "error", "phase": "build", "kind": "build_error",
                          "message": f"the submission called exit({e.code}) while being imported"})
        return 3
    except BaseException as e:  # compile errors surface here, from load_inline
        harness.emit(fd, {"event": "error", "phase": "build", "kind": "build_error", "message": _short_exc(e)})
        return 3
    model_cls = getattr(sub, "ModelNew", None)
    if not isinstance(model_cls, type):
        harness.emit(fd, {"event": "error", "phase": "build", "kind": "no_model_new",
                          "message": "the module imported, but it defines no class ModelNew"})
        return 3
    harness.emit(fd, {"event": "built", "build_s": time.monotonic() - t0})

    try:
        go = json.loads(sys.stdin.readline() or "{}")
    except ValueError:
        return 0
    if go.get("cmd") != "go":
        return 0
    phase = "construct"
    try:
        slots = harness.open_slots(go["slots"], device)  # trials first, then one row per timing set
        n_trials = len(plan["seeds"])
        model = harness.make_model(model_cls, task, plan["init_seed"], device)
        phase = "forward"
        kept = []  # inputs of the first trials, reused (cloned) by the timing loop
        headers = []
        for i, seed in enumerate(plan["seeds"]):
            args = harness.make_inputs(task, seed, device)
            out = harness.flatten_outputs(harness.call(model, harness.clone_args(args), seed))
            headers.append(harness.fill_slots(slots[i], out))
            harness.synchronize(device)
            if i < plan["timing_sets"]:
                kept.append((seed, args))
            del out
        harness.emit(fd, {"event": "outputs", "trials": headers})

        phase = "timing"
        flusher = harness.L2Flusher(device, plan["l2_flush_bytes"])
        state = {"n": 0, "set": 0, "args": None, "out": None}
        recheck_headers = {}

        def before():  # fresh clones every call, rotating over input sets: nothing to cache on
            state["set"] = state["n"] % len(kept)
            seed, args = kept[state["set"]]
            torch.manual_seed(seed)
            state["args"] = harness.clone_args(args)
            state["n"] += 1

        def fn():
            with torch.no_grad():
                state["out"] = model(*state["args"])

        def after():  # keep what this timed call returned, for the recheck (outside the timed region)
            if state["out"] is not None:
                j = state["set"]
                recheck_headers[j] = harness.fill_slots(slots[n_trials + j], harness.flatten_outputs(state["out"]))
                state["out"] = None

        t = plan["timing"]
        res = harness.time_calls(fn, device, warmup=t["warmup"], min_calls=t["min_calls"], max_calls=t["max_calls"],
                                 budget_s=t["budget_s"], stable_rel=t["stable_rel"], flusher=flusher, before=before, warmup_s=t["warmup_s"],
                                 after=after)
        harness.emit(fd, {"event": "timed", "times_ms": res["times_ms"], "calls": state["n"]})
        harness.synchronize(device)
        # the slots hold the last timed output of each input set, checked like the trials
        harness.emit(fd, {"event": "done", "rechecks": [recheck_headers.get(j, []) for j in range(len(kept))]})
    except BaseException as e:
        harness.emit(fd, {"event": "error", "phase": phase, "kind": "runtime_error", "message": _short_exc(e)})
        return 4
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown: a broken CUDA context can hang it
