"""Containment of hangs and faults on one device: how long each holds the device slot before its
verdict, and whether the device is clean afterwards (an honest kernel's time and verdict as before,
device memory back where it was, no candidate process left).

    PYTHONPATH=$PWD python3 scripts/h200_containment_check.py --kernelbench-dir .kb --out $OUT/containment.json
    python scripts/h200_containment_check.py --device cpu --out /tmp/containment.json   # the small tasks, C++

One judge (its pools and reference worker kept between evaluations, as a server keeps them), one
evaluation at a time, in this order: the honest kernel --repeats times (the baseline), then each
fault followed by the honest kernel --repeats times. Faults on cuda (level1/19_ReLU): a kernel that
never ends (tests/faults_cuda/infinite_loop_kernel.py: while(clock64() >= 0) in a __global__), a module
that loops forever at import (in the build process: no GPU), one that loops at import only where it
sees a GPU (so in the run process, inside the device slot), an illegal address
(tests/faults_cuda/illegal_memory_access.py). On cpu (level1/1_Small_ReLU): a C++ forward that never
returns, the two import loops, a segfault. Honest kernel: examples/submissions/19_ReLU_cuda.py (cuda),
tests/submissions/relu_ok.py (cpu).

Per case it prints and records: verdict, seconds to verdict (total, and the build and device-slot parts),
the deadline that ended it, the honest kernel's median time after it against the baseline (within
--tolerance, default 2 % on cuda), device memory in use with the pools settled (within 256 MiB of the
baseline), candidate processes left once the judge has stopped. Exits 1 when a check fails.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "native"))
from kernel_env.judge import Judge, JudgeConfig, deadlines  # noqa: E402
from kernel_env.judge.config import default_cache_dir  # noqa: E402
from kernel_env.tasks import TaskSet  # noqa: E402
from bench.workload import submission  # noqa: E402  (a test file as the judge gets it: tests/cases.py)
from h200_hardening_check import candidate_processes, device_memory_used  # noqa: E402
from kernel_env.tasks import task_folder  # noqa: E402
from native_host import submission as native  # noqa: E402

MEM_SLACK = 256 << 20
LOOP_AT_IMPORT = "\nwhile True:\n    pass\n\n\nclass ModelNew("
# the build process sees no GPU: this loops only in the run process, inside the device slot
LOOP_WITH_GPU = {"cuda": "\nwhile torch.cuda.is_available():\n    pass\n\n\nclass ModelNew(",
                 "cpu": "\nwhile not __import__('os').environ.get('CUDA_VISIBLE_DEVICES') == '':\n    pass\n\n\nclass ModelNew("}



def _ends(text: str) -> str:
    """A verdict's feedback, its start and its end: an exception's own message comes last."""
    return text if len(text) <= 1500 else text[:300] + "\n...\n" + text[-1200:]

def cases(device: str) -> tuple[str, str, list]:
    """(task, honest source, [(name, source, expected (stage, error_kind))])."""
    if device == "cuda":
        task, honest = "level1/19_ReLU", submission(ROOT / "examples/submissions/19_ReLU_cuda.py")
        faults = [("spinning kernel", submission(ROOT / "tests/faults_cuda/infinite_loop_kernel.py"), ("run", "run_timeout")),
                  ("loop at import", honest.replace("\nclass ModelNew(", LOOP_AT_IMPORT, 1), ("build", "build_timeout")),
                  ("loop at import, GPU seen", honest.replace("\nclass ModelNew(", LOOP_WITH_GPU["cuda"], 1),
                   ("build", "build_timeout")),
                  ("illegal address", submission(ROOT / "tests/faults_cuda/illegal_memory_access.py"), ("run", "runtime_error")),
                  # the native battery's host code (tests/native/native_host.py) beside CUDA kernels
                  ("host code spins (native)", native("host code spins", in_forward="bomb 10; spin -", device="cuda"),
                   ("run", "run_timeout")),
                  ("spinning kernel (native)", native("a kernel that never ends", kernel="spin", device="cuda"),
                   ("run", "run_timeout"))]
    else:
        task, honest = "level1/1_Small_ReLU", submission(ROOT / "tests/submissions/relu_ok.py")
        faults = [("spinning kernel", submission(ROOT / "tests/submissions/relu_hang.py"), ("run", "run_timeout")),
                  ("loop at import", honest.replace("\nclass ModelNew(", LOOP_AT_IMPORT, 1), ("build", "build_timeout")),
                  ("segfault", submission(ROOT / "tests/submissions/relu_segfault.py"), ("run", "crash"))]
    return task, honest, faults


async def settled_memory(judge: Judge, device: str) -> int | None:
    """Device memory in use once the judge's idle run processes have all started (their contexts are
    part of every reading alike)."""
    await judge.pools.settle()
    for procs in list(judge.pools.idle.values()):
        for p in list(procs):
            if getattr(p, "warmed", None) is not None:
                await asyncio.gather(p.warmed, return_exceptions=True)
    return await asyncio.to_thread(device_memory_used, device)


def _row(name: str, v, wall: float) -> dict:
    return {"case": name, "stage": v.stage, "error_kind": v.error_kind, "correct": v.correct,
            "t_new_ms": v.t_new_ms, "t_ref_ms": v.t_ref_ms, "verdict_s": round(wall, 2),
            "build_s": v.timings.get("build_s"), "run_s": v.timings.get("run_s"), "close_s": v.timings.get("close_s"),
            "deadline": v.details.get("deadline"), "feedback": _ends(v.feedback)}


async def run(args) -> dict:
    task, honest, faults = cases(args.device)
    tasks_dir = task_folder({task}, args.kernelbench_dir)
    cfg = JudgeConfig(device=args.device, cache_dir=Path(args.cache_dir or default_cache_dir()), idle_runners=2,
                      staged_builders=1, work_dir=tempfile.mkdtemp(prefix="kernel_env_containment_"),
                      **({"timing_budget_s": 0.3} if args.device == "cpu" else {}))
    judge = Judge(cfg, TaskSet(tasks_dir))
    out = {"device": args.device, "task": task, "config": {k: getattr(cfg, k) for k in (
        "import_timeout_s", "build_timeout_s", "run_timeout_s", "run_step_floor_s", "run_ref_factor",
        "run_first_call_s", "run_call_overhead_s", "run_construct_s", "kill_wait_s")}, "honest": [], "faults": []}
    mem0 = await asyncio.to_thread(device_memory_used, args.device)
    try:
        async def honest_times(label: str) -> dict:
            times, rows = [], []
            for _ in range(args.repeats):
                t = time.monotonic()
                v = await judge.evaluate(task, honest)
                rows.append(_row(label, v, time.monotonic() - t))
                if v.correct and v.t_new_ms:
                    times.append(v.t_new_ms)
            return {"label": label, "times_ms": times, "median_ms": statistics.median(times) if times else None,
                    "all_correct": len(times) == args.repeats, "rows": rows,
                    "memory_bytes": await settled_memory(judge, args.device)}

        # the first honest evaluation builds its kernel and profiles the task: not part of the baseline
        await judge.evaluate(task, honest)
        if args.device == "cuda":  # the faults' own extension, built now (its build is not what is measured)
            await judge.evaluate(task, faults[0][1])
        base = await honest_times("baseline")
        out["honest"].append(base)
        out["t_ref_ms"] = judge._profiles.get(task, {}).get("t_ref_ms")
        out["spin_bound_s"] = deadlines.spin_bound_s(cfg, out["t_ref_ms"]) if out["t_ref_ms"] else None
        for name, src, want in faults:
            t = time.monotonic()
            v = await judge.evaluate(task, src)
            row = _row(name, v, time.monotonic() - t)
            row["expected"] = list(want)
            row["as_expected"] = (v.stage, v.error_kind) == want
            after = await honest_times(f"after {name}")
            row["honest_after_ms"] = after["median_ms"]
            row["honest_after_ratio"] = (after["median_ms"] / base["median_ms"]
                                         if after["median_ms"] and base["median_ms"] else None)
            row["honest_after_correct"] = after["all_correct"]
            row["memory_bytes"] = after["memory_bytes"]
            out["faults"].append(row)
            out["honest"].append(after)
    finally:
        await judge.aclose()
    await asyncio.sleep(1.0)
    out["memory_before_bytes"], out["memory_after_bytes"] = mem0, await asyncio.to_thread(device_memory_used, args.device)
    out["processes_left"] = candidate_processes()
    return out


def checks(out: dict, tol: float) -> list[str]:
    bad = []
    base = out["honest"][0]
    if not base["all_correct"]:
        bad.append("the honest kernel was not correct in the baseline")
    for row in out["faults"]:
        if not row["as_expected"]:
            bad.append(f"{row['case']}: {row['stage']}/{row['error_kind']}, expected {'/'.join(row['expected'])}")
        if not row["honest_after_correct"]:
            bad.append(f"after {row['case']}: the honest kernel was not correct")
        r = row["honest_after_ratio"]
        if r is None or abs(r - 1) > tol:
            bad.append(f"after {row['case']}: the honest kernel's time changed by x{r}")
        if row["memory_bytes"] is not None and base["memory_bytes"] is not None \
                and row["memory_bytes"] > base["memory_bytes"] + MEM_SLACK:
            bad.append(f"after {row['case']}: device memory {row['memory_bytes'] >> 20} MiB, "
                       f"baseline {base['memory_bytes'] >> 20} MiB")
    if out["memory_before_bytes"] is not None and out["memory_after_bytes"] is not None \
            and out["memory_after_bytes"] > out["memory_before_bytes"] + MEM_SLACK:
        bad.append("device memory in use grew once the judge had stopped")
    if out["processes_left"]:
        bad.append(f"candidate processes left: {out['processes_left']}")
    return bad


def table(out: dict) -> str:
    base = out["honest"][0]
    lines = [f"device {out['device']}, task {out['task']}, t_ref {out.get('t_ref_ms') or 0:.4g} ms, "
             f"spin bound {out.get('spin_bound_s') or 0:.1f} s; honest baseline median {base['median_ms']} ms "
             f"({', '.join(f'{t:.4g}' for t in base['times_ms'])}), memory {(base['memory_bytes'] or 0) >> 20} MiB",
             "| case | verdict | expected | to verdict s | build s | slot run s | deadline | honest after (x baseline) | memory MiB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in out["faults"]:
        d = r["deadline"] or {}
        dl = f"{d.get('step')} {d.get('deadline_s')} s" if d else ""
        ratio = f"{r['honest_after_ms']:.4g} ms (x{r['honest_after_ratio']:.3f})" if r["honest_after_ratio"] else "-"
        lines.append(f"| {r['case']} | {r['stage']}/{r['error_kind']} | {'yes' if r['as_expected'] else 'NO'} | "
                     f"{r['verdict_s']} | {r['build_s']} | {r['run_s']} | {dl} | {ratio}"
                     f"{'' if r['honest_after_correct'] else ' NOT CORRECT'} | {(r['memory_bytes'] or 0) >> 20} |")
    lines.append(f"memory before the judge {(out['memory_before_bytes'] or 0) >> 20} MiB, after it stopped "
                 f"{(out['memory_after_bytes'] or 0) >> 20} MiB; candidate processes left: {len(out['processes_left'])}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--kernelbench-dir", default="")
    ap.add_argument("--out", required=True, help="JSON file for the results")
    ap.add_argument("--cache-dir", default=None, help="judge cache (default $KERNEL_ENV_CACHE or ~/.cache/kernel_env)")
    ap.add_argument("--repeats", type=int, default=3, help="honest evaluations per point")
    ap.add_argument("--tolerance", type=float, default=None,
                    help="allowed change of the honest kernel's median time (default 0.02 cuda, 0.5 cpu: a shared CPU)")
    args = ap.parse_args()
    tol = args.tolerance if args.tolerance is not None else (0.02 if args.device == "cuda" else 0.5)
    out = asyncio.run(run(args))
    out["failed"] = checks(out, tol)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(table(out))
    for b in out["failed"]:
        print("FAILED:", b)
    return 1 if out["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
