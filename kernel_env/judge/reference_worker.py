"""TRUSTED: the reference process. It never imports candidate code.

    python -m kernel_env.judge.reference_worker PROTOCOL_FD

Reads one JSON request per line on stdin and answers one JSON line per result on the protocol pipe:

  {"mode": "compare", ...}   reference outputs for the trial seeds, compared with the files the
                             candidate wrote (after the candidate process has exited); the task's
                             profile (FLOPs, bytes, speed of light, reference timing) is attached,
                             computed once and cached per (task source, device name, torch version).
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
                                budget_s=t["budget_s"], stable_rel=t["stable_rel"],
                                flusher=harness.L2Flusher(device, req["l2_flush_bytes"]), before=before)
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


def compare(req: dict, task_mod, device: torch.device) -> dict:
    """First mismatch across trials and rechecks, or None. Candidate files are read, never unpickled."""
    cand_dir = Path(req["cand_dir"])
    model = harness.make_model(task_mod.Model, task_mod, req["init_seed"], device)
    tol = req["tolerance"]
    trials, rechecks = req.get("trials") or [], req.get("rechecks") or []
    refs_kept = {}
    passed = 0
    for i, seed in enumerate(req["seeds"]):
        args = harness.make_inputs(task_mod, seed, device)
        ref = harness.flatten_outputs(harness.call(model, harness.clone_args(args), seed))
        if i < len(rechecks):
            refs_kept[i] = ref
        if i >= len(trials):
            return {"passed": passed, "mismatch": {"what": "count", "trial": i,
                                                   "message": f"no outputs were written for trial {i + 1}"}}
        try:
            got = [harness.read_tensor(h, cand_dir, req["max_output_bytes"], device) for h in trials[i]]
        except (ValueError, TypeError, RuntimeError) as e:
            return {"passed": passed, "mismatch": {"what": "unreadable", "trial": i, "message": f"outputs unreadable: {e}"}}
        bad = compare_outputs(ref, got, tol)
        del got, args
        if bad:
            bad["trial"] = i
            return {"passed": passed, "mismatch": bad}
        passed += 1
    for j, headers in enumerate(rechecks):
        if j not in refs_kept:
            break
        try:
            got = [harness.read_tensor(h, cand_dir, req["max_output_bytes"], device) for h in headers]
        except (ValueError, TypeError, RuntimeError) as e:
            return {"passed": passed, "mismatch": {"what": "unreadable", "recheck": j, "message": f"outputs unreadable: {e}"}}
        bad = compare_outputs(refs_kept[j], got, tol)
        if bad:
            bad["recheck"] = j
            bad["message"] = "outputs of the timed calls differ from the reference: " + bad["message"]
            return {"passed": passed, "mismatch": bad}
    return {"passed": passed, "mismatch": None}


def main() -> int:
    fd = int(sys.argv[1])
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        device = harness.device_of(req["device"])
        if device.type == "cpu":
            torch.set_num_threads(req.get("cpu_threads", 1))
        name = device_name(device)
        try:
            peaks = get_peaks(Path(req["cache_dir"]), device, name)
        except Exception as e:
            harness.emit(fd, {"ok": False, "error": f"measuring device peaks failed: {e}"})
            continue
        tasks = req["tasks"] if req["mode"] == "profile" else [req]
        for t in tasks:
            try:
                task_mod = harness.load_module(t["task_path"], "reference_problem")
                prof = get_profile({**req, **t}, task_mod, device, name, peaks)
                res = {"ok": True, "task_id": t["task_id"], "profile": prof, "peaks": peaks}
                if req["mode"] == "compare":
                    res["compare"] = compare(req, task_mod, device)
            except Exception as e:
                res = {"ok": False, "task_id": t.get("task_id"), "error": "".join(
                    traceback.format_exception_only(type(e), e)).strip()[-2000:]}
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            harness.emit(fd, res)
    return 0


if __name__ == "__main__":
    rc = main()
    os._exit(rc)
