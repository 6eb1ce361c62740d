"""Judge every submission of a demo corpus folder (`<level>__<task>.<variant>.py`) once, with one judge,
and print each verdict beside the variant it was written to be: what the warm start's corpus claims
(fast: correct and faster than the reference; slow: correct and slower; wrong: not correct).

    python experiments/judge_corpus.py --device cpu                                   # kernel_env/data/demo_corpus
    PYTHONPATH=$PWD python3 experiments/judge_corpus.py --device cuda --kernelbench-dir .kb \\
        --corpus kernel_env/data/demo_corpus_cuda --out $OUT/corpus.json
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel_env.agent.warm_start import load_corpus  # noqa: E402
from kernel_env.judge import JudgeConfig  # noqa: E402
from kernel_env.judge.config import default_cache_dir  # noqa: E402
from kernel_env.judge.service import Judge  # noqa: E402
from kernel_env.tasks import TaskSet, task_folder  # noqa: E402


def as_written(variant: str, v) -> bool:
    if variant == "wrong":
        return not v.correct
    if not v.correct or not v.speedup:
        return False
    return v.speedup > 1.0 if variant == "fast" else v.speedup < 1.0


async def run(args) -> list[dict]:
    subs = load_corpus(args.corpus)
    tasks_dir = task_folder({s.task_id for s in subs}, args.kernelbench_dir)
    cfg = JudgeConfig(device=args.device, cache_dir=Path(args.cache_dir or default_cache_dir()),
                      work_dir=tempfile.mkdtemp(prefix="kernel_env_corpus_"))
    judge = Judge(cfg, TaskSet(tasks_dir))
    rows = []
    try:
        async def one(s):
            t = time.monotonic()
            v = await judge.evaluate(s.task_id, s.code)
            row = {"task": s.task_id, "variant": s.variant, "stage": v.stage, "error_kind": v.error_kind,
                   "correct": v.correct, "speedup": v.speedup, "t_new_ms": v.t_new_ms, "t_ref_ms": v.t_ref_ms,
                   "as_written": as_written(s.variant, v), "seconds": round(time.monotonic() - t, 1),
                   "feedback": (v.feedback or "")[:200], "timings": v.timings}
            print(f"{s.task_id:40s} {s.variant:6s} {v.stage:12s} {str(v.error_kind or ''):18s} "
                  f"{'' if v.speedup is None else f'{v.speedup:7.3f}x'}  {'ok' if row['as_written'] else 'NOT AS WRITTEN'}"
                  f"  ({row['seconds']} s)", flush=True)
            return row
        rows = await asyncio.gather(*(one(s) for s in subs))
    finally:
        await judge.aclose()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--corpus", default=str(ROOT / "kernel_env" / "data" / "demo_corpus"))
    ap.add_argument("--kernelbench-dir", default="")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = asyncio.run(run(args))
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not r["as_written"]]
    print(f"{len(rows) - len(bad)} of {len(rows)} verdicts as written")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
