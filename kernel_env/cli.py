"""kernel-env: evaluate one submission, list tasks, print the roofline table, or serve the environment.

    kernel-env eval --task-id ID --code FILE [--policy strict|kernelbench] [--device cpu|cuda]
                    [--kernelbench-dir D] [--json]
    kernel-env tasks [--split train|eval] [--levels 1 2 3]
    kernel-env roofline [--levels ...] [--device ...] [--tasks ID ...] [--json FILE]
    kernel-env serve --host 127.0.0.1 --port 8000 ...   (see kernel-env serve --help)

Bad input (missing folder, unknown task, unreadable code) prints one line on stderr and exits 2.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from .compute_policy import POLICIES
from .tasks import SUPPORTED_LEVELS, TaskError, TaskSet


class UsageError(Exception):
    pass


def _judge_config(args):
    from .judge import JudgeConfig
    kw = {"device": args.device}
    if getattr(args, "gpus", None):
        kw["gpus"] = tuple(int(g) for g in str(args.gpus).split(",") if g.strip())
    if getattr(args, "cache_dir", None):
        kw["cache_dir"] = args.cache_dir
    for name in ("timing_budget_s", "correctness_trials", "build_timeout_s", "run_timeout_s", "kernel_share",
                 "min_kernel_share"):
        if getattr(args, name, None) is not None:
            kw[name] = getattr(args, name)
    return JudgeConfig(**kw)


def _read_code(path: str, limit: int) -> str:
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"code file not found: {path}")
    raw = p.read_bytes()
    if not raw.strip():
        raise UsageError(f"code file is empty: {path}")
    if len(raw) > limit:
        raise UsageError(f"code file is {len(raw)} bytes; the limit is {limit}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"code file is not UTF-8 text: {path}") from None
    try:
        compile(text, p.name, "exec")
    except SyntaxError as e:
        raise UsageError(f"syntax error in {path} line {e.lineno}: {e.msg}") from None
    return text


def cmd_eval(args) -> int:
    from .judge import Judge
    cfg = _judge_config(args)
    tasks = TaskSet(args.kernelbench_dir)
    tasks.get(args.task_id)
    code = _read_code(args.code, cfg.max_code_bytes)
    v = Judge(cfg, tasks).evaluate_sync(args.task_id, code, args.policy)
    if args.json:
        print(json.dumps(v.to_dict(), indent=1))
    else:
        print(f"task      {v.task_id}\npolicy    {v.policy}\nstage     {v.stage}\ncorrect   {v.correct}")
        if v.error_kind != "none":
            print(f"error     {v.error_kind}")
        if v.correct:
            print(f"speedup   {v.speedup:.3f}x   (t_ref {v.t_ref_ms:.4f} ms, t_new {v.t_new_ms:.4f} ms)")
            print(f"roofline  {v.roofline_frac:.1%} of t_min {v.t_min_ms:.4f} ms ({v.bound}-bound); "
                  f"reference at {v.ref_roofline_frac:.1%}")
            if v.kernel_share is not None:
                print(f"kernels   {v.kernel_share:.1%} of the time in the submission's own kernels")
            if v.suspicious or v.roofline_violation:
                print(f"flags     suspicious={v.suspicious} roofline_violation={v.roofline_violation}")
        print(f"feedback  {v.feedback}")
    return 0


def cmd_tasks(args) -> int:
    for t in TaskSet(args.kernelbench_dir).ids(args.split, args.levels):
        print(t)
    return 0


def cmd_roofline(args) -> int:
    from .judge import Judge
    cfg = _judge_config(args)
    tasks = TaskSet(args.kernelbench_dir)
    ids = args.tasks or tasks.ids(None, args.levels)
    judge = Judge(cfg, tasks)

    def progress(i, n, msg):
        status = "ok" if msg.get("ok") else "FAILED"
        print(f"[{i}/{n}] {msg.get('task_id')} {status}", file=sys.stderr, flush=True)

    results = asyncio.run(judge.profiles(ids, progress=progress))
    header = f"{'task':48s} {'GFLOP':>10s} {'MB':>10s} {'t_min ms':>10s} {'bound':>8s} {'t_ref ms':>10s} {'ref/roof':>8s}"
    lines = [header]
    for r in results:
        if not r.get("ok"):
            lines.append(f"{r.get('task_id', '?'):48s} error: {str(r.get('error'))[:90]}")
            continue
        p = r["profile"]
        lines.append(f"{p['task_id']:48s} {p['flops'] / 1e9:10.3f} {p['bytes'] / 1e6:10.2f} {p['t_min_ms']:10.4f} "
                     f"{p['bound']:>8s} {p['t_ref_ms']:10.4f} {p['ref_roofline_frac']:8.1%}")
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if all(r.get("ok") for r in results) else 1


def _add_common(p, device=True):
    p.add_argument("--kernelbench-dir", default=None,
                   help="KernelBench checkout root or a folder with level1/ level2/ level3/ "
                        "(default: $KERNELBENCH_DIR, else the small built-in tasks)")
    if device:
        p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
        p.add_argument("--cache-dir", default=None, help="builds, reference timings and device peaks")


def _add_share_arguments(p) -> None:
    p.add_argument("--kernel-share", choices=["events", "profiler", "off"], default=None,
                   help="how the share of the time in the submission's own kernels is measured (default events)")
    p.add_argument("--min-kernel-share", type=float, default=None,
                   help="under kernelbench, a correct submission whose own kernels take less of the time fails "
                        "(default 0: none)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kernel-env", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("eval", help="evaluate one submission and print the verdict")
    p.add_argument("--task-id", required=True)
    p.add_argument("--code", required=True, help="Python file defining ModelNew")
    p.add_argument("--json", action="store_true")
    p.add_argument("--gpus", default=None, help="comma-separated CUDA device indices")
    p.add_argument("--timing-budget-s", type=float, default=None)
    p.add_argument("--policy", choices=list(POLICIES), default=None,
                   help="the compute rule (default: strict for level 1, kernelbench for levels 2-3)")
    _add_share_arguments(p)
    _add_common(p)
    p.set_defaults(fn=cmd_eval)
    p = sub.add_parser("tasks", help="list task ids")
    p.add_argument("--split", choices=["train", "eval"], default=None)
    p.add_argument("--levels", type=int, nargs="+", default=list(SUPPORTED_LEVELS))
    _add_common(p, device=False)
    p.set_defaults(fn=cmd_tasks)
    p = sub.add_parser("roofline", help="FLOPs, bytes, t_min, bound, t_ref and ref_roofline_frac per task")
    p.add_argument("--levels", type=int, nargs="+", default=list(SUPPORTED_LEVELS))
    p.add_argument("--tasks", nargs="+", default=None, help="these task ids instead of whole levels")
    p.add_argument("--json", default=None, help="also write the results to this file")
    p.add_argument("--timing-budget-s", type=float, default=None)
    _add_common(p)
    p.set_defaults(fn=cmd_roofline)
    try:
        from .server.app import add_serve_arguments, serve
    except ImportError:  # the server's dependencies are optional for eval / tasks / roofline
        add_serve_arguments = serve = None
    if add_serve_arguments is not None:
        p = sub.add_parser("serve", help="run the OpenEnv server")
        add_serve_arguments(p)
        p.set_defaults(fn=serve)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.fn(args) or 0
    except (TaskError, UsageError, ValueError) as e:
        print(f"kernel-env: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
