"""TRUSTED: the reference process. It never imports candidate code.

    python -m kernel_env.judge.reference_worker PROTOCOL_FD

Reads one JSON request per line on stdin and answers one JSON line per result on the protocol pipe:

  {"mode": "warm", ...}      before the device slot: CUDA context and the task's imports only
  {"mode": "prepare", ...}   the task's profile (FLOPs, bytes, speed of light, reference timing:
                             computed once, cached per task source, device name and torch version)
                             and poisoned output slots for the candidate to fill (harness.make_slots)
  {"mode": "compare", ...}   after the candidate process has exited: reference outputs for the
                             trial seeds, compared with what the candidate left in the slots
  {"mode": "profile", "tasks": [...]}   profiles only, one answer line per task (the roofline table).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import traceback
from pathlib import Path

import torch

from kernel_env import harness
from kernel_env.judge import roofline
from kernel_env.judge.compare import compare_outputs

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


def get_profile(req: dict, task_mod, device: torch.device, name: str, peaks: dict) -> dict:
    cache_dir = Path(req["cache_dir"])
    key = f"{req['task_id']}|{req['source_sha']}|{name}|{torch.__version__}|{req.get('cpu_threads', 1)}"
    path = cache_dir / "profiles" / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")
    prof = _read_json(path)
    if prof is not None:
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
                                budget_s=t["budget_s"], stable_rel=t["stable_rel"], warmup_s=t["warmup_s"],
                                flusher=harness.L2Flusher(device, req["l2_flush_bytes"]), before=before)
    if timing["median_ms"] < sol["t_min_ms"]:
        # The reference beat the formula (cuDNN's Winograd/FFT convolutions do fewer FLOPs than the
        # direct count): the floor is what was observed, or an equally good kernel would be flagged.
        sol = {**sol, "t_min_formula_ms": sol["t_min_ms"], "t_min_ms": timing["median_ms"]}
    prof = {
        "task_id": req["task_id"], "device_name": name, "torch_version": torch.__version__,
        "flops": counted + fallback, "flops_counted": counted, "flops_fallback": fallback, "bytes": nbytes,
        "dtype": dtype_name, **sol, "t_ref_ms": timing["median_ms"], "ref_calls": len(timing["times_ms"]),
        "ref_roofline_frac": sol["t_min_ms"] / timing["median_ms"] if timing["median_ms"] > 0 else None,
        "outputs": [{"dtype": harness.DTYPE_NAMES.get(o.dtype, str(o.dtype)), "shape": list(o.shape)} for o in outs],
    }
    _atomic_write(path, prof)
    del model, sets, outs
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
            return {"what": "shape", "output": k, "message": f"{name} has shape {tuple(h.get('shape') or ())}, "
                    f"expected {tuple(r.shape)}"}
        if h.get("dtype") != harness.DTYPE_NAMES.get(r.dtype):
            return {"what": "dtype", "output": k, "message": f"{name} has dtype {h.get('dtype')}, "
                    f"expected {harness.DTYPE_NAMES.get(r.dtype)}"}
    return None


def _slots_intact(wire_row: list) -> bool:
    """CPU slots are files the candidate could have truncated: reading such a mapping would crash us."""
    for w in wire_row:
        if "file" in w:
            try:
                if os.stat(w["file"]).st_size < w["nbytes"]:
                    return False
            except OSError:
                return False
    return True


def _all_finite(outs: list) -> bool:
    return all(bool(torch.isfinite(o).all()) for o in outs if o.is_floating_point() or o.is_complex())


def _rms(t: torch.Tensor) -> float:
    if not t.is_floating_point():
        return 0.0
    f = t.double()
    f = f[torch.isfinite(f)]
    return float(f.pow(2).mean().sqrt()) if f.numel() else 0.0


def choose_dists(req: dict, task_mod, device: torch.device, prof: dict) -> list:
    """Per trial, the input distribution (harness.INPUT_DISTS). The first `timing_sets` trials use the
    task's own inputs (the timing runs on them); the others draw other distributions in a random
    order, where the task allows it: float inputs that the map changes (|x| of inputs that are
    already non-negative teaches nothing), a reference output that stays finite (else another
    distribution, else the task's own: the trial still counts), and no ties when an output is an
    integer tensor (index outputs such as argmax or topk would be ambiguous)."""
    import random
    seeds, k = req["seeds"], req["timing_sets"]
    alts = [d for d in (req.get("input_dists") or harness.ALT_DISTS) if d in harness.INPUT_DISTS and d != "normal"]
    if any(not o["dtype"].startswith(("float", "bfloat", "complex")) for o in prof["outputs"]):
        alts = [d for d in alts if d != "edges"]
    dists = ["normal"] * len(seeds)
    if not alts or len(seeds) <= k:
        return dists
    order = random.SystemRandom().sample(alts, len(alts))
    model = harness.make_model(task_mod.Model, task_mod, req.get("init_seed", seeds[0]), device)
    for i in range(k, len(seeds)):
        own = [x for x in harness.make_inputs(task_mod, seeds[i], device)
               if isinstance(x, torch.Tensor) and x.is_floating_point()]
        for _ in range(len(order)):
            d = order.pop(0)
            order.append(d)  # the next trial starts with the next distribution
            args = harness.make_inputs(task_mod, seeds[i], device, d)
            new = [x for x in args if isinstance(x, torch.Tensor) and x.is_floating_point()]
            if all(torch.equal(a, b) for a, b in zip(own, new)):
                continue
            # a distribution the task cannot take (log of negatives, overflow) is not used for this trial
            if _all_finite(harness.flatten_outputs(harness.call(model, args, seeds[i]))):
                dists[i] = d
                break
        del own
    del model
    return dists


def compare(req: dict, task_mod, device: torch.device, slots: list, wire: list, dists: list | None = None) -> dict:
    """Reference outputs for the trial seeds against what the candidate left in the slots (it has exited)."""
    model = harness.make_model(task_mod.Model, task_mod, req["init_seed"], device)
    tol = req["tolerance"]
    seeds = req["seeds"]
    dists = dists or ["normal"] * len(seeds)
    trials, rechecks = req.get("trials") or [], req.get("rechecks") or []
    passed, skipped = 0, 0
    checks = [(i, seed, "trial") for i, seed in enumerate(seeds)]
    checks += [(len(seeds) + j, seeds[j], "recheck") for j in range(req["timing_sets"])]
    for row, seed, kind in checks:
        idx = row if kind == "trial" else row - len(seeds)
        dist, scale = "normal", None
        if kind == "trial":
            dist = dists[idx]
            args = harness.make_inputs(task_mod, seed, device, dist)
            ref = harness.flatten_outputs(harness.call(model, harness.clone_args(args), seed))
            del args
            headers = trials[idx] if idx < len(trials) else None
            if dist != "normal":
                if not _all_finite(ref):  # the reference itself overflowed: the trial is not counted
                    skipped += 1
                    continue
                # the tolerances are set for the task's own output scale: scale atol with the output
                # (1024x inputs give a 1024x..1e6x output and rounding errors to match)
                own = harness.flatten_outputs(harness.call(model, harness.make_inputs(task_mod, seed, device), seed))
                scale = [max(1.0, _rms(r) / _rms(o)) if _rms(o) > 0 else 1.0 for r, o in zip(ref, own)]
                del own
        else:
            headers = rechecks[idx] if idx < len(rechecks) else None
            salt = headers[0].get("salt") if isinstance(headers, list) and headers and isinstance(headers[0], dict) else None
            if not (isinstance(salt, int) and 0 < salt <= 1_000_000):
                return {"passed": passed, "mismatch": {"what": "count", "recheck": idx, "message":
                        "the outputs of the timed calls were not reported"}, "dists": dists}
            # the checked call's own inputs (harness.perturb_inputs): any timed call may be the one checked
            args = harness.perturb_inputs(harness.make_inputs(task_mod, seed, device), salt)
            ref = harness.flatten_outputs(harness.call(model, args, seed))
            del args
        bad = _claimed_mismatch(ref, headers)
        if bad is None and not _slots_intact(wire[row]):
            bad = {"what": "tampered", "message": "an output slot was truncated or removed"}
        if bad is None:
            bad = compare_outputs(ref, slots[row], tol, atol_scale=scale)
        if bad:
            bad[kind] = idx
            if kind == "recheck":
                bad["message"] = "outputs of the timed calls differ from the reference: " + bad["message"]
            elif dist != "normal":
                bad["dist"] = dist
                bad["message"] += f" [inputs of this trial: {harness.INPUT_DISTS[dist]}]"
            return {"passed": passed, "mismatch": bad, "dists": dists}
        passed += kind == "trial"
    return {"passed": passed, "mismatch": None, "dists": dists, "skipped": skipped}


def main() -> int:
    fd = int(sys.argv[1])
    held = {}  # the slots of the current evaluation, between "prepare" and "compare"
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        device = harness.device_of(req["device"])
        if device.type == "cpu":
            torch.set_num_threads(req.get("cpu_threads", 1))
        name = device_name(device)  # on CUDA, this makes the context
        if req["mode"] == "warm":  # before the device slot: the context and the task's imports, nothing measured
            try:
                harness.load_module(req["task_path"], "reference_problem")
                res = {"ok": True}
            except Exception as e:
                res = {"ok": False, "error": "".join(traceback.format_exception_only(type(e), e)).strip()[-2000:]}
            harness.emit(fd, res)
            continue
        try:
            peaks = get_peaks(Path(req["cache_dir"]), device, name)
        except Exception as e:
            harness.emit(fd, {"ok": False, "error": f"measuring device peaks failed: {e}"})
            continue
        mode = req["mode"]
        for t in (req["tasks"] if mode == "profile" else [req]):
            try:
                task_mod = harness.load_module(t["task_path"], "reference_problem")
                if mode == "compare":
                    if held.get("task_sha") is None or _file_sha(t["task_path"]) != held.get("task_sha"):
                        # the problem file changed while the candidate ran: never compare against it
                        res = {"ok": True, "compare": {"passed": 0, "mismatch": {
                            "what": "tampered", "trial": 0, "message": "the problem's files changed while your "
                            "code was imported or ran: editing files outside your folder is not allowed"}}}
                    else:
                        res = {"ok": True, "compare": compare(req, task_mod, device, held["slots"], held["wire"],
                                                              held.get("dists"))}
                else:
                    prof = get_profile({**req, **t}, task_mod, device, name, peaks)
                    res = {"ok": True, "task_id": t["task_id"], "profile": prof, "peaks": peaks}
                    if mode == "prepare":
                        # source_sha is the judge's hash of the problem file: when it is taken before the
                        # candidate starts, an edit made while the submission was imported shows here
                        sha = _file_sha(t["task_path"])
                        held["task_sha"] = sha if sha and sha.startswith(str(t.get("source_sha", ""))) else None
                        n = len(req["seeds"]) + req["timing_sets"]
                        held["slots"], held["wire"] = harness.make_slots(prof["outputs"], n, device,
                                                                         Path(req["slot_dir"]))
                        held["dists"] = res["dists"] = choose_dists(req, task_mod, device, prof)
                        # The candidate learns each trial's input distribution from its slots: the
                        # judge forwards "slots" to it unchanged (see candidate/runner.py).
                        for row, d in zip(held["wire"], held["dists"]):
                            for w in row:
                                w["dist"] = d
                        res["slots"] = held["wire"]
            except Exception as e:
                res = {"ok": False, "task_id": t.get("task_id"), "error": "".join(
                    traceback.format_exception_only(type(e), e)).strip()[-2000:]}
            finally:
                if device.type == "cuda" and mode != "prepare":
                    torch.cuda.empty_cache()
            harness.emit(fd, res)
    return 0


if __name__ == "__main__":
    rc = main()
    os._exit(rc)
