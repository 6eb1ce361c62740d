"""The policies on real KernelBench level-2/3 answers, on a GPU box: each answer of
bench/kernelbench_answers/manifest.json through the judge under kernelbench and under strict, with the
share measured by CUDA events (the default) and, in a second judge, by torch.profiler (CUPTI), side
by side. Prints one line per evaluation and writes the verdicts as JSON and a markdown table.

    PYTHONPATH=$PWD python3 scripts/h200_policy_check.py --kernelbench-dir KB --out OUT_DIR
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from kernel_env.judge import Judge, JudgeConfig
from kernel_env.tasks import TaskSet

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = ROOT / "bench" / "kernelbench_answers"


def row(entry: dict, policy: str, method: str, v) -> dict:
    phases = (v.details or {}).get("run_phases") or {}
    kt = (v.details or {}).get("kernel_time") or {}
    return {"file": entry["file"], "task": entry["task"], "kind": entry["kind"], "policy": policy, "method": method,
            "stage": v.stage, "error_kind": v.error_kind, "correct": v.correct, "speedup": v.speedup,
            "t_ref_ms": v.t_ref_ms, "t_new_ms": v.t_new_ms, "kernel_share": v.kernel_share,
            "profile_s": phases.get("profile_s"), "run_s": v.timings.get("run_s"), "total_s": v.timings.get("total_s"),
            "top": kt.get("top"), "feedback": v.feedback[:400]}


async def run_all(judge: Judge, jobs: list, method: str, log) -> list:
    async def one(entry, policy):
        v = await judge.evaluate(entry["task"], (ANSWERS / entry["file"]).read_text(), policy)
        r = row(entry, policy, method, v)
        log(r)
        return r
    judge.start_ahead()  # its idle processes and reference worker, as a server has them
    try:
        return await asyncio.gather(*[one(e, p) for e, p in jobs])
    finally:
        await judge.aclose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernelbench-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((ANSWERS / "manifest.json").read_text())
    tasks = TaskSet(args.kernelbench_dir)

    def log(r):
        share = "-" if r["kernel_share"] is None else f"{r['kernel_share']:.3f}"
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.3f}"
        print(f"[{time.strftime('%H:%M:%S')}] {r['method']:8s} {r['policy']:11s} {r['file']:22s} {r['stage']:>11s}/"
              f"{r['error_kind']:<18s} speedup {sp:>7s} share {share:>6s} profile_s {r['profile_s']}", flush=True)

    rows = []
    for method, policies in (("events", ("kernelbench", "strict")), ("profiler", ("kernelbench",))):
        judge = Judge(JudgeConfig(device=args.device, kernel_share=method), tasks)
        jobs = [(e, p) for p in policies for e in manifest]
        rows += asyncio.run(run_all(judge, jobs, method, log))
    (out / "policy_check.json").write_text(json.dumps(rows, indent=1))
    lines = ["| answer | task | kind | policy | share by | verdict | speedup | kernel share | share's cost (s) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        verdict = "correct" if r["correct"] else f"{r['stage']}/{r['error_kind']}"
        sp = "" if r["speedup"] is None else f"{r['speedup']:.3f}"
        share = "" if r["kernel_share"] is None else f"{r['kernel_share']:.3f}"
        lines.append(f"| {r['file']} | {r['task']} | {r['kind']} | {r['policy']} | {r['method']} | {verdict} | {sp} | "
                     f"{share} | {r['profile_s'] if r['profile_s'] is not None else ''} |")
    (out / "policy_check.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
