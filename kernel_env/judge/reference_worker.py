"""TRUSTED: the reference process. It never imports candidate code.

    python -m kernel_env.judge.reference_worker PROTOCOL_FD

Reads one JSON request per line on stdin and answers one JSON line per result on the protocol pipe:

  {"mode": "warm", ...}      at start, outside any device slot: CUDA context, the task's imports, the
                             kernels of compare run once on tiny tensors
  {"mode": "prepare", ...}   the task's profile (FLOPs, bytes, speed of light, reference timing:
                             computed once, cached per task source, device name and torch version)
                             and poisoned output slots for the candidate to fill (harness.make_slots)
  {"mode": "check", ...}     the candidate has filled the trials' slots and waits, alive, to be
                             timed: reference outputs for the trial seeds against them (what cannot
                             be checked now, for lack of device memory, is left to compare)
  {"mode": "compare", ...}   after the candidate process has exited: reference outputs for the
                             trial seeds not checked yet and the timed calls' rechecks, compared with
                             what the candidate left in the slots
  {"mode": "release"}        the candidate failed: the slots are given back without a comparison
  {"mode": "profile", "tasks": [...]}   profiles only, one answer line per task (the roofline table).

The judge keeps one worker per device for all the evaluations measured there. Requests name their
evaluation ("eval"): the next one prepares and has its trials checked while the one before it is
compared. A "prepare" marked "beside" (the evaluation before it has not ended yet) answers "wait"
instead when it would have to time the reference, or make fewer slots than once the other
evaluations' slots are given back. No device memory is held between evaluations.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import stat
import sys
import time
import traceback
from pathlib import Path

import torch

from kernel_env import harness
from kernel_env import protocol as P
from kernel_env.judge import roofline
from kernel_env.judge.compare import compare_outputs, warm_fused

PROFILE_SEEDS = (1234, 5678)  # fixed: the cached reference timing must not depend on one evaluation


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform
    return f"cpu-{platform.machine()}-{torch.get_num_threads()}t"


def _file_sha(path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _atomic_write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def get_peaks(cache_dir: Path, device: torch.device, name: str) -> dict:
    path = cache_dir / "peaks" / (re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + f"-torch{torch.__version__}.json")
    peaks = _read_json(path)
    if peaks is None:
        peaks = roofline.measure_peaks(device, name)
        _atomic_write(path, peaks)
    return peaks


def _profile_path(req: dict, name: str, device: torch.device) -> Path:
    # the reference's measurement rule and method too: a profile timed another way is timed again
    t = req.get("timing", {})
    rule = f"{t.get('ref_min_wall_s', 0.0)}|{t.get('ref_warmup_s', t.get('warmup_s'))}|{harness.timing_method(device)}"
    key = f"{req['task_id']}|{req['source_sha']}|{name}|{torch.__version__}|{req.get('cpu_threads', 1)}|{rule}"
    return Path(req["cache_dir"]) / "profiles" / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


def get_profile(req: dict, task_mod, device: torch.device, name: str, peaks: dict, extras: bool = False,
                cached_only: bool = False) -> dict | None:
    """The task's profile, cached on disk; with `extras` (evaluations) also profile_extras. With
    `cached_only`, None where it is not on disk yet (making it times the reference)."""
    path = _profile_path(req, name, device)
    prof = _read_json(path)
    if prof is None and cached_only:
        return None
    if prof is not None:
        if extras and not ("alt_dists" in prof and "out_rms" in prof):
            prof = profile_extras(prof, task_mod, device)
            _atomic_write(path, prof)
        return prof
    model = harness.make_model(task_mod.Model, task_mod, PROFILE_SEEDS[0], device)
    sets = [(s, harness.make_inputs(task_mod, s, device)) for s in PROFILE_SEEDS]
    seed0, args0 = sets[0]
    out = {}

    def run():
        out["y"] = harness.call(model, harness.clone_args(args0), seed0)

    counted, fallback = roofline.count_flops(run)
    outs = harness.flatten_outputs(out.pop("y"))
    nbytes = roofline.tensor_bytes(args0) + roofline.tensor_bytes(outs) + roofline.model_state_bytes(model)
    dtype_name = roofline.compute_dtype(args0, model)
    sol = roofline.speed_of_light(counted + fallback, nbytes, peaks, dtype_name)

    state = {"n": 0, "args": None}

    def before():
        seed, args = sets[state["n"] % len(sets)]
        torch.manual_seed(seed)
        state["args"] = harness.clone_args(args)
        state["n"] += 1

    def fn():
        with torch.no_grad():
            model(*state["args"])

    t = req["timing"]
    timing = harness.time_calls(fn, device, warmup=t["warmup"], min_calls=t["min_calls"], max_calls=t["max_calls"],
                                budget_s=t["budget_s"], stable_rel=t["stable_rel"],
                                warmup_s=t.get("ref_warmup_s", t["warmup_s"]),
                                flusher=harness.L2Flusher(device, req["l2_flush_bytes"]), before=before,
                                retime_spread=t.get("retime_spread", 0.0), attempts=t.get("attempts", 1),
                                min_wall_s=t.get("ref_min_wall_s", 0.0))
    if timing["median_ms"] < sol["t_min_ms"]:
        # The reference beat the formula (cuDNN's Winograd/FFT convolutions do fewer FLOPs than the
        # direct count): the floor is what was observed, or an equally good kernel would be flagged.
        sol = {**sol, "t_min_formula_ms": sol["t_min_ms"], "t_min_ms": timing["median_ms"]}
    prof = {
        "task_id": req["task_id"], "device_name": name, "torch_version": torch.__version__,
        "flops": counted + fallback, "flops_counted": counted, "flops_fallback": fallback, "bytes": nbytes,
        "dtype": dtype_name, **sol, "t_ref_ms": timing["median_ms"], "ref_calls": len(timing["times_ms"]),
        "ref_spreads": [round(x, 4) for x in timing["spreads"]], "ref_timing": timing["timing"],
        "ref_roofline_frac": sol["t_min_ms"] / timing["median_ms"] if timing["median_ms"] > 0 else None,
        "outputs": [{"dtype": harness.DTYPE_NAMES.get(o.dtype, str(o.dtype)), "shape": list(o.shape)} for o in outs],
    }
    if extras:  # the outputs of the profile's seed are those profile_extras would make again
        prof["out_rms"] = [harness.rms_finite(o) for o in outs]
    del model, sets, outs
    if extras:
        prof = profile_extras(prof, task_mod, device)
    _atomic_write(path, prof)
    return prof


def _claimed_mismatch(ref: list, headers) -> dict | None:
    """What the candidate says it produced, for a precise message (the slots are what is checked)."""
    if not isinstance(headers, list):
        return {"what": "count", "message": "no outputs were reported"}
    if len(headers) != len(ref):
        return {"what": "count", "message": f"returned {len(headers)} output(s), expected {len(ref)}"}
    for k, (r, h) in enumerate(zip(ref, headers)):
        if not isinstance(h, dict):
            return {"what": "count", "message": "malformed output report"}
        name = f"output {k}" if len(ref) > 1 else "the output"
        if h.get("shape") != list(r.shape):
            shape = h.get("shape")  # the runner's report: a list, unless something forged it
            said = tuple(shape) if isinstance(shape, list) else repr(shape)
            return {"what": "shape", "output": k, "message": f"{name} has shape {str(said)[:200]}, "
                    f"expected {tuple(r.shape)}"}
        if h.get("dtype") != harness.DTYPE_NAMES.get(r.dtype):
            return {"what": "dtype", "output": k, "message": f"{name} has dtype {str(h.get('dtype'))[:60]}, "
                    f"expected {harness.DTYPE_NAMES.get(r.dtype)}"}
    return None


def _open_slot(w: dict) -> int | None:
    """A CPU slot's file, opened for reading, if it is still the one make_slots made, whole. The slot
    sits in the candidate's folder: it may have been truncated (reading our mapping of it would crash
    us), or its path may now hold a named pipe (opening that waits for a writer that never comes), a
    link to a file of the judge's, or another file."""
    try:
        fd = os.open(w["file"], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or [st.st_dev, st.st_ino] != w.get("inode") or st.st_size < w["nbytes"]:
        os.close(fd)
        return None
    return fd


def _slots_intact(wire_row: list) -> bool:
    """CPU slots are files the candidate could have truncated or replaced (_open_slot)."""
    for w in wire_row:
        if "file" in w:
            fd = _open_slot(w)
            if fd is None:
                return False
            os.close(fd)
    return True


def _all_finite(outs: list) -> bool:
    return all(bool(torch.isfinite(o).all()) for o in outs if o.is_floating_point() or o.is_complex())


def task_dists(task_mod, device: torch.device, outputs: list, alts=harness.ALT_DISTS) -> list:
    """The input distributions (harness.INPUT_DISTS) a task can take, found once per task on the
    profile's seed and cached with its profile: float inputs that the map changes (|x| of inputs that
    are already non-negative teaches nothing), a reference output that stays finite (no log of
    negatives, no overflow), and no ties when an output is an integer tensor (index outputs such as
    argmax or topk would be ambiguous). A trial whose reference still overflows for its own seed is
    not counted (compare)."""
    seed = PROFILE_SEEDS[0]
    alts = [d for d in alts if d in harness.INPUT_DISTS and d != "normal"]
    if any(not o["dtype"].startswith(("float", "bfloat", "complex")) for o in outputs):
        alts = [d for d in alts if d != "edges"]
    model = harness.make_model(task_mod.Model, task_mod, seed, device)
    own = [x for x in harness.make_inputs(task_mod, seed, device) if isinstance(x, torch.Tensor) and x.is_floating_point()]
    ok = []
    for d in alts:
        args = harness.make_inputs(task_mod, seed, device, d)
        new = [x for x in args if isinstance(x, torch.Tensor) and x.is_floating_point()]
        if all(torch.equal(a, b) for a, b in zip(own, new)):
            continue
        if _all_finite(harness.flatten_outputs(harness.call(model, args, seed))):
            ok.append(d)
        del args, new
    del model, own
    return ok


def profile_extras(prof: dict, task_mod, device: torch.device) -> dict:
    """What every evaluation of a task needs besides the timing, computed once and cached with the
    profile: the distributions the task can take, and the RMS of its own outputs (the scale that
    other distributions' tolerances are widened against). Profiles cached before these existed get
    them here."""
    prof = dict(prof)
    if "out_rms" not in prof:
        model = harness.make_model(task_mod.Model, task_mod, PROFILE_SEEDS[0], device)
        outs = harness.flatten_outputs(harness.call(model, harness.make_inputs(task_mod, PROFILE_SEEDS[0], device),
                                                    PROFILE_SEEDS[0]))
        prof["out_rms"] = [harness.rms_finite(o) for o in outs]
        del model, outs
    if "alt_dists" not in prof:
        prof["alt_dists"] = task_dists(task_mod, device, prof["outputs"])
    return prof


def choose_dists(req: dict, prof: dict) -> list:
    """Per trial, the input distribution. The first `timing_sets` trials use the task's own inputs
    (the timing runs on them); the others take the distributions this task can take (task_dists, in
    its profile) that the judge allows, one after the other in a fresh random order that starts with
    one of each family (harness.DIST_FAMILIES: sign, magnitude, ties) the task can take."""
    import random
    rng = random.SystemRandom()
    seeds, k = req["seeds"], req["timing_sets"]
    allowed = req.get("input_dists") or harness.ALT_DISTS
    alts = [d for d in prof.get("alt_dists", ()) if d in allowed]
    dists = ["normal"] * len(seeds)
    if not alts or len(seeds) <= k:
        return dists
    families = [[d for d in fam if d in alts] for fam in harness.DIST_FAMILIES]
    families += [[d] for d in alts if not any(d in fam for fam in harness.DIST_FAMILIES)]
    first = [rng.choice(fam) for fam in families if fam]
    rng.shuffle(first)
    rest = [d for d in alts if d not in first]
    rng.shuffle(rest)
    order = first + rest
    for i in range(k, len(seeds)):
        dists[i] = order[(i - k) % len(order)]
    return dists


def check_row(req: dict, task_mod, device: torch.device, model, row: int, headers, slot_row: list,
              wire_row: list, dist: str, own_rms: list, clock) -> tuple[str, dict | None]:
    """One row of the slots against the reference: a trial (rows below len(seeds)) on its seed and input
    distribution, or the recheck of a timed call, rebuilt from (seed, salt). ("passed" | "skipped" |
    "failed", the mismatch). `clock` gets the seconds making inputs, in the forward and comparing."""
    seeds = req["seeds"]
    kind = "trial" if row < len(seeds) else "recheck"
    idx = row if kind == "trial" else row - len(seeds)
    seed, scale = seeds[idx], None
    if kind == "trial":
        args = harness.make_inputs(task_mod, seed, device, dist)
        clock("inputs_s")
        ref = harness.flatten_outputs(harness.call(model, args, seed))  # args are not used again
        del args
        clock("forward_s")
        if dist != "normal":
            if not _all_finite(ref):  # the reference itself overflowed: the trial is not counted
                return "skipped", None
            # the tolerances are set for the task's own output scale: scale atol with the output
            # (1024x inputs give a 1024x..1e6x output and rounding errors to match)
            scale = [max(1.0, harness.rms_finite(r) / o) if isinstance(o, (int, float)) and o > 0 else 1.0
                     for r, o in zip(ref, own_rms + [None] * len(ref))]
            clock("compare_s")
    else:
        salt = headers[0].get("salt") if isinstance(headers, list) and headers and isinstance(headers[0], dict) else None
        if not (isinstance(salt, int) and 0 < salt <= 1_000_000):
            return "failed", {"what": "count", "recheck": idx, "message": "the outputs of the timed calls were not reported"}
        # the checked call's own inputs (harness.perturb_inputs): any timed call may be the one checked
        args = harness.perturb_inputs(harness.make_inputs(task_mod, seed, device), salt)
        clock("inputs_s")
        ref = harness.flatten_outputs(harness.call(model, args, seed))
        del args
        clock("forward_s")
    bad = _claimed_mismatch(ref, headers)
    if bad is None and not _slots_intact(wire_row):
        bad = {"what": "tampered", "message": "an output slot was truncated, removed or replaced"}
    if bad is None:
        bad = compare_outputs(ref, slot_row, req["tolerance"], atol_scale=scale)
    del ref  # before the next row's inputs: outputs of GBs
    clock("compare_s")
    if not bad:
        return "passed", None
    bad[kind] = idx
    if kind == "recheck":
        bad["message"] = "outputs of the timed calls differ from the reference: " + bad["message"]
    elif dist != "normal":
        bad["dist"] = dist
        bad["message"] += f" [inputs of this trial: {harness.INPUT_DISTS[dist]}]"
    return "failed", bad


def _model(req: dict, task_mod, device: torch.device, held: dict):
    """The reference model of this evaluation (its init seed), made once for its checks and its compare:
    the rows are checked in order on one model, early checks or not."""
    if held.get("model") is None:
        held["model"] = harness.make_model(task_mod.Model, task_mod, req["init_seed"], device)
    return held["model"]


def compare(req: dict, task_mod, device: torch.device, held: dict, phases: dict | None = None) -> dict:
    """Reference outputs for the trial seeds and the timed calls' rechecks against what the candidate
    left in the slots (it has exited); the trials checked before the timing (check_trials) are not
    checked again.
    `phases` gets the seconds spent making inputs, in the reference's forwards and comparing."""
    seeds, dists = req["seeds"], held.get("dists") or ["normal"] * len(req["seeds"])
    own_rms = (held.get("prof") or {}).get("out_rms") or []
    trials, rechecks = req.get("trials") or [], req.get("rechecks") or []
    early = held.get("checked") or {}
    passed = sum(1 for s in early.values() if s == "passed")
    skipped = sum(1 for s in early.values() if s == "skipped")
    clock = _Clock(device, phases if phases is not None else {})
    model = _model(req, task_mod, device, held)
    for row in range(len(seeds) + held.get("timing_sets", req["timing_sets"])):
        if row in early:
            continue
        if row < len(seeds):
            headers, dist = (trials[row] if row < len(trials) else None), dists[row]
        else:
            j = row - len(seeds)
            headers, dist = (rechecks[j] if j < len(rechecks) else None), "normal"
        at = slot_index(held, row, len(seeds))
        status, bad = check_row(req, task_mod, device, model, row, headers, held["slots"][at], held["wire"][at],
                                dist, own_rms, clock)
        if bad:
            return {"passed": passed, "mismatch": bad, "dists": dists}
        passed += status == "passed" and row < len(seeds)
        skipped += status == "skipped"
    return {"passed": passed, "mismatch": None, "dists": dists, "skipped": skipped}


def slot_index(held: dict, row: int, n_trials: int) -> int:
    """Where a row's outputs are: the trials take the first `trial_rows` slots in turn (a slot is used
    again once its trial was checked), the rechecks of the timing sets the slots after them."""
    k = held.get("trial_rows") or n_trials
    return row % k if row < n_trials else k + row - n_trials


def device_free(device: torch.device) -> int | None:
    """The device's free memory once this worker has given back what it caches; None on the CPU."""
    if device.type != "cuda":
        return None
    torch.cuda.empty_cache()  # what a profile made just now is not the evaluation's
    return torch.cuda.mem_get_info(device)[0]


def slot_plan(req: dict, prof: dict, device: torch.device, free: int | None) -> tuple[int, int]:
    """(trial_rows, timing_sets): how many trials' output slots exist at once, and how many input sets
    the timing keeps. All the trials and req's timing sets, unless the device's free memory says
    otherwise: the slots, the candidate's own inputs and outputs (the timing keeps its input sets beside
    a call's inputs and outputs) and this worker's check of a trial (its inputs and the reference's
    outputs) must fit beside each other. Fewer trial slots first (the candidate then waits for the
    check of each batch before the next), then one timing set: a multi-GB task fits a card of 80 GB.
    `free`: the device's free memory (device_free), None on the CPU."""
    n, most = len(req["seeds"]), req["timing_sets"]
    fixed = req.get("trial_rows") or 0
    if fixed:
        return max(1, min(n, int(fixed))), most
    if device.type != "cuda" or free is None:
        return n, most
    for sets in range(most, 0, -1):
        for k in range(n, 0, -1):
            if plan_bytes(prof, k, sets) <= free:
                return k, sets
    return 1, 1


def plan_bytes(prof: dict, trial_rows: int, timing_sets: int) -> int:
    """The device memory an evaluation with this many trial slots and timing sets needs at once: its
    slots, the candidate's inputs and outputs (the timing keeps its input sets beside a call's), a
    kernel's own temporaries and the caching allocator's rounding (the candidate counted twice over)."""
    out_b = sum(harness.spec_nbytes(harness.DTYPES[o["dtype"]], o["shape"]) for o in prof["outputs"])
    in_b = max(int(prof.get("bytes") or 0) - out_b, 0)  # the inputs, and the model's state: an overestimate
    candidate = max((timing_sets + 1) * in_b + 2 * out_b, 2 * (in_b + out_b) + in_b + out_b)
    return (trial_rows + timing_sets) * out_b + candidate + MEMORY_MARGIN


MEMORY_MARGIN = 1 << 30


def check_trials(req: dict, task_mod, device: torch.device, held: dict, phases: dict) -> dict:
    """A batch of trials' slots against the reference (`trials`: their output headers, the first of them
    trial `first`), before the candidate is timed (it waits, alive: wrong outputs are never timed).
    Rows in order on the evaluation's one model; when every trial has a slot of its own, those it cannot
    check now (out of device memory beside the waiting candidate, the problem file changed) are left to
    compare, after the candidate has exited, as without this check. When the slots are used again
    (trial_rows) nothing can wait: out of memory is the worker's error, retried, then the judge's."""
    seeds, trials, first = req["seeds"], req.get("trials") or [], int(req.get("first") or 0)
    checked = held.setdefault("checked", {})
    reused = (held.get("trial_rows") or len(seeds)) < len(seeds)
    # the problem file must be the one prepare saw: compare reports an edit made since
    if held.get("slots") is None or held.get("task_sha") is None or _file_sha(req["task_path"]) != held["task_sha"]:
        return {"rows": 0, "passed": 0, "mismatch": None, "deferred": True}
    dists = held.get("dists") or ["normal"] * len(seeds)
    own_rms = (held.get("prof") or {}).get("out_rms") or []
    clock = _Clock(device, phases)
    passed, deferred = 0, False
    try:
        model = _model(req, task_mod, device, held)
        for row in range(first, min(first + len(trials), len(seeds))):
            at = slot_index(held, row, len(seeds))
            # the candidate is alive: its slot files (CPU) are read into memory of our own, which it
            # cannot truncate under us; a CUDA slot is this worker's own allocation
            status, bad = check_row(req, task_mod, device, model, row, trials[row - first],
                                    _private_copy(held["slots"][at], held["wire"][at]), held["wire"][at],
                                    dists[row], own_rms, clock)
            if bad:
                return {"rows": len(checked), "passed": passed, "mismatch": bad}
            checked[row] = status
            passed += status == "passed"
    except torch.OutOfMemoryError:
        gc.collect()
        if reused:
            raise
        deferred = True
    finally:
        if device.type == "cuda":  # what the checks allocated goes back to the device for the candidate
            torch.cuda.empty_cache()
        clock("free_s")
    return {"rows": len(checked), "passed": passed, "mismatch": None, "deferred": deferred}


def _private_copy(slot_row: list, wire_row: list) -> list:
    """A CPU slot's bytes read into this process's memory (a short file stays short: the comparison
    reports it); a CUDA slot as it is."""
    out = []
    for t, w in zip(slot_row, wire_row):
        if "file" not in w:
            out.append(t)
            continue
        nbytes = t.numel() * t.element_size()
        fd, data = _open_slot(w), b""
        if fd is not None:
            with open(fd, "rb") as f:
                data = f.read(nbytes)
        if len(data) < nbytes:
            out.append(torch.full(t.shape, float("nan")).to(t.dtype) if t.is_floating_point() else torch.zeros_like(t))
        else:
            out.append(torch.frombuffer(bytearray(data), dtype=t.dtype).reshape(t.shape) if nbytes else t.clone())
    return out


def warm_kernels(device: torch.device, tol: dict) -> None:
    """The kernels of compare, once on tiny tensors: their loading happens before the device slot."""
    harness.warm_kernels(device)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(64, device=device).to(dtype)
        compare_outputs([x], [x.clone()], tol)
        _all_finite([x])
        harness.rms_finite(x)
    warm_fused(device)  # the one-pass comparison of large outputs is a Triton kernel: compiled now
    harness.synchronize(device)


class _Clock:
    """Adds the seconds since its last call to phases[name] (the device synchronised first)."""

    def __init__(self, device: torch.device, phases: dict):
        self.device, self.phases = device, phases
        harness.synchronize(device)
        self.t = time.monotonic()

    def __call__(self, name: str) -> None:
        harness.synchronize(self.device)
        t = time.monotonic()
        self.phases[name] = round(self.phases.get(name, 0.0) + t - self.t, 4)
        self.t = t


def main() -> int:
    fd = int(sys.argv[1])
    # per evaluation (the judge's id in "eval"), its slots and the rest it holds between "prepare" and
    # "compare" (or "release"): the next evaluation on the device prepares and has its trials checked
    # while the one before it ends and is compared (judge/devices.py, Turn)
    evals: dict[str, dict] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        device = harness.device_of(req["device"])
        if device.type == "cpu":
            torch.set_num_threads(req.get("cpu_threads", 1))
        name = device_name(device)  # on CUDA, this makes the context
        if req["mode"] == P.WARM_UP:  # before the device slot: the context and the task's imports, nothing measured
            try:
                if req.get("task_path"):  # started ahead of any evaluation (Judge.start_ahead): no task yet
                    harness.load_module(req["task_path"], "reference_problem")
                warm_kernels(device, req["tolerance"])
                # torch's objects (~180k) out of the collector's way: the full collection that ends
                # each evaluation (_give_back, inside the device slot) then walks only what the
                # evaluations made, ~0.2 s less on the dev machine
                gc.freeze()
                res = {"ok": True}
            except Exception as e:
                res = {"ok": False, "error": _exc_line(e)}
            harness.emit(fd, res)
            continue
        if req["mode"] == P.RELEASE:  # the candidate failed before compare: its slots go
            drop_slots(evals.pop(req.get("eval", ""), {}))
            harness.emit(fd, _give_back(device, {"ok": True}, evals))
            continue
        try:
            peaks = get_peaks(Path(req["cache_dir"]), device, name)
        except Exception as e:
            harness.emit(fd, {"ok": False, "error": f"measuring device peaks failed: {e}"})
            continue
        mode = req["mode"]
        held = {} if mode == P.PROFILE else evals.setdefault(req.get("eval", ""), {})
        for t in (req["tasks"] if mode == P.PROFILE else [req]):
            for attempt in range(OOM_RETRIES + 1):
                try:
                    others = sum(_bytes_held(h) for h in evals.values() if h is not held) if mode == P.PREPARE else 0
                    res = handle(mode, req, t, device, name, peaks, held, others)
                    break
                except torch.OutOfMemoryError as e:
                    # the memory of a candidate process that was just killed comes back to the device a
                    # little later: wait for it rather than fail the evaluation
                    res = {"ok": False, "task_id": t.get("task_id"), "error": _exc_line(e)}
                    gc.collect()
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    time.sleep(0.5 * (attempt + 1))
                except Exception as e:
                    res = {"ok": False, "task_id": t.get("task_id"), "error": _exc_line(e)}
                    break
            if mode == P.COMPARE:
                evals.pop(req.get("eval", ""), None)  # its slots went in handle()
            # a check frees its own memory (the evaluation goes on); the others end a use of the device
            harness.emit(fd, res if mode in (P.PREPARE, P.CHECK) else _give_back(device, res, evals))
    return 0


def drop_slots(held: dict) -> None:
    """An evaluation's slots and the rest it held go; only once its candidate has exited (the judge
    asks for COMPARE or RELEASE after that): the candidate's uses of the slots are released here, on
    its behalf (harness.make_slots), so the memory is freed even when it was killed holding them."""
    harness.release_slot_users(held.get("counters") or [])
    held.clear()


def _give_back(device: torch.device, res: dict, evals: dict) -> dict:
    """After a request that ends an evaluation's use of the device: its memory goes back, and the
    answer says how much this worker still holds beyond what the evaluations still under way
    (`evals`) hold. Whatever stays (a block torch still counts as shared, memory a leak keeps): the
    judge then has a fresh worker serve the next evaluations, and ends this one, and its memory with
    it, once those under way are done."""
    if device.type == "cuda":
        t = time.monotonic()
        gc.collect()
        torch.cuda.ipc_collect()  # shared blocks whose users are all released (drop_slots)
        torch.cuda.empty_cache()
        live = sum(_bytes_held(h) for h in evals.values())
        res["held_bytes"] = max(0, torch.cuda.memory_reserved(device) - live)
        if isinstance(res.get("phases"), dict):
            res["phases"]["give_back_s"] = round(time.monotonic() - t, 4)
    return res


def _bytes_held(held: dict) -> int:
    """The device memory an evaluation under way holds here: its slots and its reference model."""
    tensors = [t for row in held.get("slots") or [] for t in row]
    model = held.get("model")
    if model is not None:
        tensors += list(model.parameters()) + list(model.buffers())
    return sum(t.untyped_storage().nbytes() for t in tensors if t.is_cuda)


OOM_RETRIES = 6  # about 10 s in all


def _exc_line(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]


def handle(mode: str, req: dict, t: dict, device: torch.device, name: str, peaks: dict, held: dict,
           others: int = 0) -> dict:
    """One prepare, compare or profile request; `held` keeps an evaluation's slots from prepare to compare;
    `others`: the device memory the other evaluations under way hold here (their slots, their models)."""
    task_mod = harness.load_module(t["task_path"], "reference_problem")
    if mode == P.CHECK:
        phases = {}
        return {"ok": True, **check_trials(req, task_mod, device, held, phases), "phases": phases}
    if mode == P.COMPARE:
        if held.get("task_sha") is None or _file_sha(t["task_path"]) != held.get("task_sha"):
            # the problem file changed while the candidate ran: never compare against it
            res = {"ok": True, "compare": {"passed": 0, "mismatch": {
                "what": "tampered", "trial": 0, "message": "the problem's files changed while your "
                "code was imported or ran: editing files outside your folder is not allowed"}}}
        else:
            phases = {}
            res = {"ok": True, "compare": compare(req, task_mod, device, held, phases), "phases": phases}
        drop_slots(held)  # the slots go: empty_cache gives their memory back before we answer
        return res
    t0 = time.monotonic()
    beside = mode == P.PREPARE and bool(req.get("beside"))
    prof = get_profile({**req, **t}, task_mod, device, name, peaks, extras=mode == P.PREPARE, cached_only=beside)
    if prof is None:  # the reference would be timed to make it: never beside another evaluation's GPU work
        return {"ok": True, "task_id": t["task_id"], "wait": "profile"}
    res = {"ok": True, "task_id": t["task_id"], "profile": prof, "peaks": peaks}
    if mode == P.PREPARE:
        drop_slots(held)  # an earlier prepare of this evaluation's
        t1 = time.monotonic()
        free = device_free(device)
        k, sets = slot_plan(req, prof, device, free)
        if beside and free is not None and ((k, sets) != slot_plan(req, prof, device, free + others)
                                            or plan_bytes(prof, k, sets) > free):
            # beside the end of the evaluation before, whose memory is not back yet: fewer slots than
            # once it is, or slots that do not fit now (trial_rows fixed by the judge's config, or not
            # even one slot of each fits). The judge asks again later, rather than shrink this
            # evaluation's for nothing or run out of memory beside the other one
            return {"ok": True, "task_id": t["task_id"], "wait": "memory"}
        held["prof"] = prof
        # source_sha is the judge's hash of the problem file: when it is taken before the
        # candidate starts, an edit made while the submission was imported shows here
        sha = _file_sha(t["task_path"])
        held["task_sha"] = sha if sha and sha.startswith(str(t.get("source_sha", ""))) else None
        held["trial_rows"], held["timing_sets"] = res["trial_rows"], res["timing_sets"] = k, sets
        held["pool"] = harness.slot_pool(device)  # segments that hold these slots and nothing else
        held["slots"], held["wire"], held["counters"] = harness.make_slots(prof["outputs"], k + sets, device,
                                                                           Path(req["slot_dir"]), held["pool"])
        # the judge forwards the slots, the trials' input distributions, trial_rows and timing_sets to
        # the candidate
        held["dists"] = res["dists"] = choose_dists({**req, "timing_sets": sets}, prof)
        res["phases"] = {"profile_s": round(t1 - t0, 4), "slots_s": round(time.monotonic() - t1, 4)}
        res["slots"] = held["wire"]
    return res


if __name__ == "__main__":
    rc = main()
    os._exit(rc)
