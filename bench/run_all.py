"""The benchmark: this project's server against the plain harness, side by side, in one run.

    python bench/run_all.py --device cpu                                   # this machine: small numbers
    python bench/run_all.py --device cuda --kernelbench-dir .kb            # one GPU box (~8-10 min)

Each harness runs the same phases on the same kernels and tasks (bench/phases.py): cold/warm
latency, timing spread alone, then the load (unique kernels from the pool, `--sessions` clients)
with spread probes under it. Both serve the KernelBench folder's problems plus the benchmark's own
(bench/tasks: a ~10 us kernel for the short-kernel spread). Prints one table and writes everything to --out (JSON).
Definitions of the numbers: bench/report.py; the goals: bench/README.md.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import phases, report  # noqa: E402
from bench.bench_env import EnvHarness  # noqa: E402
from bench.cpu_monitor import CpuMonitor  # noqa: E402
from bench.gpu_monitor import GpuMonitor  # noqa: E402
from bench.plain_harness import PlainHarness  # noqa: E402
from bench.workload import BENCH_TASKS, COLD, POOL, PROBES, ROOT, parse_sub  # noqa: E402
from kernel_env.tasks import SUPPORTED_LEVELS, TaskSet, resolve_root  # noqa: E402

DEFAULTS = {  # per device: sessions, load evals cap, load s, plain load s, spread n, plain timed calls
    "cuda": dict(sessions=64, evals=1000, load_s=90.0, plain_load_s=30.0, spread_n=10, plain_spread_n=3,
                 plain_perf_trials=100),
    "cpu": dict(sessions=8, evals=8, load_s=120.0, plain_load_s=120.0, spread_n=5, plain_spread_n=5,
                plain_perf_trials=10),
}

T_START = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T_START:6.0f} s] {msg}", flush=True)


def device_name(device: str) -> str:
    if device == "cpu":
        return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    try:  # not torch: a CUDA context in this process would sit on the GPU for the whole run
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True, timeout=30).stdout.split("\n")
        return names[0].strip() or "cuda (name unknown)"
    except Exception:
        return "cuda (name unknown)"


def git_state() -> str:
    """The commit, and '+dirty' when kernel_env/ has uncommitted changes (the server runs from the tree)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
        dirty = subprocess.run(["git", "status", "--porcelain", "kernel_env"], cwd=ROOT, capture_output=True,
                               text=True).stdout
        return head.strip() + ("+dirty" if dirty.strip() else "")
    except OSError:
        return "unknown"


def task_root(kernelbench_dir: str, work: Path) -> str:
    """A folder of the problems both harnesses serve: the KernelBench folder's (or, without one, the
    built-in small tasks) and the benchmark's own (bench/tasks), copied side by side."""
    dst, srcs = work / "tasks", (resolve_root(kernelbench_dir or None), BENCH_TASKS)
    shutil.rmtree(dst, ignore_errors=True)
    for lv in SUPPORTED_LEVELS:
        (dst / f"level{lv}").mkdir(parents=True)
        for src in srcs:
            for p in sorted((src / f"level{lv}").glob("*.py")):
                shutil.copyfile(p, dst / f"level{lv}" / p.name)
    return str(dst)


def run_harness(h, args, pool, cold, probes, load_s, spread_n, gpu_mon, cpu_mon=None) -> dict:
    res: dict = {}
    t = time.monotonic()
    h.start()
    res["startup_s"] = round(time.monotonic() - t, 2)
    try:
        t = time.monotonic()
        # env: every task it will judge (a running server has them all on disk); plain: the tasks whose
        # speedups the table shows (a baseline of 19_ReLU alone costs it ~15 s on a GPU box)
        tasks = {p.task for p in probes} | {cold.task} | ({s.task for s in pool} if isinstance(h, EnvHarness) else set())
        res["prepare"] = h.prepare(sorted(tasks))
        res["prepare_s"] = round(time.monotonic() - t, 2)
        log(f"[{h.name}] prepared the tasks' reference profiles in {res['prepare_s']} s: {res['prepare']}")
        tag = f"{h.name}-{time.time_ns()}"
        res["cold_warm"] = phases.cold_warm(h, cold, f"{tag}-cold", log)
        # the first probe's spread is "spread", the others' "spread_more" (the table's last rows)
        spreads = [phases.spread_alone(h, p, spread_n, log) for p in probes]
        res["spread"], res["spread_more"] = spreads[0], spreads[1:]
        res["load"] = phases.load(h, pool, args.sessions, args.evals, load_s, probes, spread_n, tag, log,
                                  args.progress_s)
    finally:
        h.close()
    gpus = [int(g) for g in args.gpus.split(",")] if args.gpus else None
    if isinstance(h, PlainHarness) and gpus:
        gpus = gpus[:1]
    res["summary"] = report.summarize(res, gpu_mon if args.device == "cuda" else None, gpus, cpu_mon)
    # the SM clock, temperature and power while each spread evaluation ran: a slow timing or a slow clock
    alone = [r for sp in [res.get("spread") or {}, *res.get("spread_more", [])] for r in sp.get("evals", [])]
    for r in [*alone, *(res.get("load") or {}).get("probes", [])]:
        if r.get("t_start") is not None and r.get("latency_s") is not None:
            r["gpu_clock"] = gpu_mon.clock_at(r["t_start"], r["t_start"] + r["latency_s"])
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--kernelbench-dir", default="", help="KernelBench problems (cuda: e.g. .kb); cpu: built-in small tasks")
    ap.add_argument("--sessions", type=int, help="concurrent clients in the load (default 64 cuda, 8 cpu)")
    ap.add_argument("--evals", type=int, help="cap on load evaluations per harness (default 1000 cuda, 8 cpu)")
    ap.add_argument("--load-s", type=float, help="env load: no new evaluations after this (default 90 cuda, 120 cpu)")
    ap.add_argument("--plain-load-s", type=float, help="plain load: the same (default 30 cuda, 120 cpu)")
    ap.add_argument("--spread-n", type=int, help="evaluations of each probe kernel, alone and under load (10 cuda, 5 cpu)")
    ap.add_argument("--plain-spread-n", type=int, help="the same for the plain harness (3 cuda, 5 cpu)")
    ap.add_argument("--plain-perf-trials", type=int, help="timed calls per plain evaluation (100 cuda, 10 cpu)")
    ap.add_argument("--probe", nargs="+", metavar="TASK=FILE", help="kernels for the spread, the first one the "
                    "table's main rows (default: " + "; ".join(
                        f"{d}: {' '.join(s.label for s in subs)}" for d, subs in PROBES.items()) + ")")
    ap.add_argument("--pool", nargs="+", metavar="TASK=FILE", help="the load's jobs, taken in turn and each made "
                    "unique (default: the four tasks' CUDA and Triton kernels on cuda, see bench/workload.py)")
    ap.add_argument("--cold", help="TASK=FILE for cold/warm latency (default: " + ", ".join(
        f"{d}: {s.label}" for d, s in COLD.items()) + ")")
    ap.add_argument("--only", choices=("env", "plain", "ray"), help="run one harness only (ray: the env on Ray)")
    ap.add_argument("--ray", action="store_true",
                    help="also run this project's server on a Ray cluster of this machine (--ray local: the judge "
                         "in a node actor), the same workload, as a column of its own after the env")
    ap.add_argument("--gpus", default="", help="server --gpus (the plain harness uses the first)")
    ap.add_argument("--server-args", default="", help='more server flags, e.g. "--build-slots 15 --cache-dir /x"')
    ap.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "kernel_env_bench"),
                    help="the plain harness's build folders")
    ap.add_argument("--progress-s", type=float, default=10.0, help="a progress line this often during the load")
    ap.add_argument("--out", default="", help="JSON with everything (default runs/bench/<device>-<time>.json)")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="only print the side-by-side table of earlier --out "
                    "files (e.g. one run with --only env, one with --only plain)")
    args = ap.parse_args(argv)
    if args.table:
        merged = {}
        for f in args.table:
            d = json.loads(Path(f).read_text())
            print(f"{d['meta']['date']}  {d['meta']['device_name']}  {d['meta']['git']}\n{d['meta']['command']}")
            merged.update({k: d[k] for k in ("env", "env_ray", "plain") if k in d})
        print(report.table({k: v["summary"] for k, v in merged.items()}))
        if "env" in merged and "env_ray" in merged:
            print("\n" + report.ray_against_local(merged["env"], merged["env_ray"]))
        return
    for k, v in DEFAULTS[args.device].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.device == "cuda" and not args.kernelbench_dir:
        ap.error("--device cuda needs --kernelbench-dir (the pool is KernelBench level-1 tasks)")
    if args.kernelbench_dir:
        args.kernelbench_dir = str(Path(args.kernelbench_dir).resolve())
    pool = [parse_sub(p) for p in args.pool] if args.pool else POOL[args.device]
    cold = parse_sub(args.cold) if args.cold else COLD[args.device]
    probes = [parse_sub(p) for p in args.probe] if args.probe else PROBES[args.device]
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or ROOT / "runs" / "bench" / f"{args.device}-{stamp}.json")
    work = out.parent / (out.stem + "-work")
    tasks_dir = task_root(args.kernelbench_dir, work)
    command = "python " + " ".join(shlex.quote(a) for a in (sys.argv if argv is None else ["bench/run_all.py", *argv]))
    meta = {"date": dt.datetime.now().isoformat(timespec="seconds"), "device": args.device, "git": git_state(),
            "device_name": device_name(args.device), "cpus": os.cpu_count(), "command": command,
            "args": vars(args), "pool": [s.label for s in pool], "cold": cold.label,
            "probes": [p.label for p in probes], "tasks_dir": tasks_dir}
    log(f"benchmark on {meta['device_name']}: {command}")

    gpu_mon = GpuMonitor(enabled=args.device == "cuda")
    cpu_mon = CpuMonitor()
    results: dict = {}
    try:
        if args.only in (None, "env"):
            env = EnvHarness(args.device, tasks_dir, work, gpus=args.gpus, server_args=args.server_args)
            results["env"] = run_harness(env, args, pool, cold, probes, args.load_s, args.spread_n, gpu_mon, cpu_mon)
        if args.only == "ray" or (args.ray and args.only in (None, "env")):
            on_ray = EnvHarness(args.device, tasks_dir, work, gpus=args.gpus, name="env_ray",
                                server_args=f"{args.server_args} --ray local")
            results["env_ray"] = run_harness(on_ray, args, pool, cold, probes, args.load_s, args.spread_n,
                                             gpu_mon, cpu_mon)
        if args.only in (None, "plain"):
            tasks = TaskSet(tasks_dir)
            plain = PlainHarness(args.device, tasks, work, Path(args.cache_dir), args.plain_perf_trials,
                                 gpu=args.gpus.split(",")[0] if args.gpus else "")
            results["plain"] = run_harness(plain, args, pool, cold, probes, args.plain_load_s, args.plain_spread_n,
                                           gpu_mon, cpu_mon)
    finally:
        gpu_mon.stop()
        cpu_mon.stop()
    text = report.table({k: v["summary"] for k, v in results.items()})
    if "env" in results and "env_ray" in results:
        text += "\n\n" + report.ray_against_local(results["env"], results["env_ray"])
    elif "env_ray" in results:
        text += "\n\nthe local column: bench/run_all.py --table <this file> <an --only env run's file>"
    header = f"{meta['date']}  {meta['device_name']}  ({args.device}, {meta['cpus']} CPUs)  {meta['git']}\n{command}\n"
    print("\n" + header + text, flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "table": text, **results}, indent=1, default=str))
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
