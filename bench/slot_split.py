"""Where one device slot goes: the same kernel evaluated again and again by an in-process judge, and the
p50 of every phase from the slot's start to its release, per judge setting, side by side.

    python bench/slot_split.py --device cpu -n 6                                      # this machine
    python bench/slot_split.py --device cuda --kernelbench-dir .kb -n 24 --concurrency 8 \\
        --variant today warmup_s=0.2 busy_warmup_s=0.2 --variant new

The build is made once (the source is not made unique), so the device slot is all there is to wait
for. `--concurrency` evaluations are in flight at once: with more than one, each slot is taken right
after the previous one, as under load (the judge's busy_warmup_s applies; quiet timing does not), and
the slots follow each other as fast as the judge lets them: evaluations per minute = n / wall. Each
`--variant NAME key=value ...` is a judge of its own (JudgeConfig fields; the rest default), run one
after the other on the same box; a variant with no key=value is today's defaults of this checkout.

Per variant it prints, p50 over the evaluations: the judge's clock (judge/service.py timings: prepare,
"go" to the trials' outputs, the reference worker's check, "time" to the times, the times to "done",
the candidate's end, the rechecks' compare, the whole slot), the run process's own phases (import,
slots, construct, trials, the timing's warm-up, the timing, the kernel share) and the reference
worker's (check and compare split into inputs / forward / compare / freeing memory), and the
speedups' max/min.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workload import parse_sub  # noqa: E402
from kernel_env.judge import Judge, JudgeConfig  # noqa: E402
from kernel_env.tasks import TaskSet  # noqa: E402

DEFAULT_SUB = {"cpu": "level1/1_Small_ReLU=tests/submissions/relu_ok.py",
               "cuda": "level1/19_ReLU=examples/submissions/19_ReLU_cuda.py"}
JUDGE_KEYS = ("prepare_s", "outputs_s", "timed_s", "done_s", "slot_s", "close_s", "reference_s", "tail_s")
RUN_KEYS = ("import_s", "slots_s", "construct_s", "trials_s", "gate_s", "warmup_s", "warmup_calls", "timing_s",
            "profile_s")


def _cast(field: dataclasses.Field, raw: str):
    kind = type(field.default) if field.default is not dataclasses.MISSING else str
    if kind is bool:
        return raw.lower() in ("1", "true", "yes", "on")
    return kind(raw) if kind in (int, float, str) else raw


def parse_variant(spec: list[str]) -> tuple[str, dict]:
    fields = {f.name: f for f in dataclasses.fields(JudgeConfig)}
    name, kw = spec[0], {}
    for item in spec[1:]:
        k, _, v = item.partition("=")
        if k not in fields:
            raise SystemExit(f"--variant {name}: {k!r} is no JudgeConfig field")
        kw[k] = _cast(fields[k], v)
    return name, kw


def p50(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


async def run_variant(args, name: str, kw: dict, task: str, code: str, tasks: TaskSet) -> dict:
    # every evaluation in flight holds a run process (the judge's default staging would make some wait
    # for one outside the slot); idle run processes as the server keeps them
    cfg = JudgeConfig(**{"device": args.device, "cache_dir": Path(args.cache_dir), "build_slots": 1,
                         "staged_runners": max(4, args.concurrency + 1),
                         "work_dir": tempfile.mkdtemp(prefix="slot_split_"), **kw})
    judge = Judge(cfg, tasks)
    judge.start_ahead()
    try:
        first = await judge.evaluate(task, code)  # the build, the task's profile, the processes started
        if not first.correct:
            raise SystemExit(f"{name}: the kernel is not correct here: {first.stage} {first.feedback[:500]}")
        await asyncio.sleep(args.settle_s)  # the idle run processes ready (their CUDA context made)
        left = list(range(args.n))
        verdicts = []

        async def client():
            while left:
                left.pop()
                verdicts.append(await judge.evaluate(task, code))
        t0 = time.monotonic()
        await asyncio.gather(*(client() for _ in range(args.concurrency)))
        wall = time.monotonic() - t0
        stats = judge.stats()  # the first evaluation's starts included
    finally:
        await judge.aclose()
    ok = [v for v in verdicts if v.correct]
    run = [v.details.get("run_phases") or {} for v in ok]
    ref = [v.details.get("ref_phases") or {} for v in ok]
    sp = [v.speedup for v in ok if v.speedup]
    return {
        "variant": name, "config": kw, "n": len(verdicts), "correct": len(ok), "wall_s": wall,
        "per_minute": 60 * len(verdicts) / wall if wall > 0 else None,
        "judge_p50_s": {k: p50([v.timings.get(k) for v in ok]) for k in JUDGE_KEYS},
        "check_p50_s": p50([(r.get("check") or {}).get("s") for r in ref]),
        "timed_calls_p50": p50([v.details.get("timed_calls") for v in ok]),
        "run_p50_s": {k: p50([p.get(k) for p in run]) for k in RUN_KEYS},
        "ref_check_p50_s": {k: p50([(r.get("check") or {}).get(k) for r in ref])
                            for k in ("inputs_s", "forward_s", "compare_s", "free_s")},
        "ref_compare_p50_s": {k: p50([(r.get("compare") or {}).get(k) for r in ref])
                              for k in ("inputs_s", "forward_s", "compare_s", "give_back_s")},
        "busy_warmup": sum(1 for v in ok if v.details.get("busy_timing")),
        "quiet": sum(1 for v in ok if v.details.get("quiet_timing")),
        # prepared only after the evaluation before had ended: its memory (or a profile to make) said so
        "prepare_waits": {w: sum(1 for v in ok if v.details.get("prepare_waited_for") == w) for w in ("memory", "profile")},
        "prepared_beside": {w: sum(1 for v in ok if v.details.get("prepared_beside") == w) for w in ("tail", "compare")},
        "before_timing_p50_s": p50([v.timings.get("before_timing_s") for v in ok]),
        "speedup_max_over_min": max(sp) / min(sp) if sp else None,
        "t_new_ms_p50": p50([v.t_new_ms for v in ok]),
        "reference_workers_started": stats["reference_workers_started"],
        "reference_workers_retired": stats["reference_workers_retired"],
        "processes_started_on_demand": stats["processes_started_on_demand"],
        "timings": [v.timings for v in verdicts],  # each evaluation's, in the order they returned: outliers
    }


def _f(x, nd=3):
    return "n/a" if x is None else f"{x:.{nd}f}"


def table(results: list[dict]) -> str:
    rows = [("evaluations (correct)", lambda r: f"{r['n']} ({r['correct']})"),
            ("evaluations per minute (slots back to back)", lambda r: _f(r["per_minute"], 1)),
            ("busy / quiet warm-ups", lambda r: f"{r['busy_warmup']} / {r['quiet']}"),
            ("prepared beside the previous tail / its compare (the candidate gone)",
             lambda r: f"{r['prepared_beside']['tail']} / {r['prepared_beside']['compare']}"),
            ("prepared after the previous tail, waited for: memory / profile",
             lambda r: f"{r['prepare_waits']['memory']} / {r['prepare_waits']['profile']}"),
            ("judge before_timing_s p50 (the previous end, warm-ups)", lambda r: _f(r["before_timing_p50_s"])),
            ("reference workers started / retired (the first evaluation's included)",
             lambda r: f"{r['reference_workers_started']} / {r['reference_workers_retired']}"),
            ("run processes started for an evaluation, none idle",
             lambda r: str(sum(n for k, n in r["processes_started_on_demand"].items() if k.startswith("run")))),
            ("t_new ms p50; speedup max/min", lambda r: f"{_f(r['t_new_ms_p50'])}; {_f(r['speedup_max_over_min'], 4)}")]
    rows += [(f"judge {k} p50", lambda r, k=k: _f(r["judge_p50_s"][k])) for k in JUDGE_KEYS[:3]]
    rows += [("judge check_s p50 (reference worker)", lambda r: _f(r["check_p50_s"]))]
    rows += [(f"judge {k} p50", lambda r, k=k: _f(r["judge_p50_s"][k])) for k in JUDGE_KEYS[3:]]
    rows += [(f"run {k} p50", lambda r, k=k: _f(r["run_p50_s"][k])) for k in RUN_KEYS]
    rows += [("timed calls p50", lambda r: _f(r["timed_calls_p50"], 0))]
    rows += [(f"ref check {k} p50", lambda r, k=k: _f(r["ref_check_p50_s"][k])) for k in ("inputs_s", "forward_s", "compare_s", "free_s")]
    rows += [(f"ref compare {k} p50", lambda r, k=k: _f(r["ref_compare_p50_s"][k]))
             for k in ("inputs_s", "forward_s", "compare_s", "give_back_s")]
    w = max(len(n) for n, _ in rows)
    head = f"{'':{w}}  " + "  ".join(f"{r['variant']:>14}" for r in results)
    return "\n".join([head] + [f"{n:{w}}  " + "  ".join(f"{fn(r):>14}" for r in results) for n, fn in rows])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--kernelbench-dir", default="", help="the problems (cuda: e.g. .kb); cpu: the built-in small tasks")
    ap.add_argument("--sub", help="TASK=FILE (default: " + "; ".join(f"{d}: {s}" for d, s in DEFAULT_SUB.items()) + ")")
    ap.add_argument("-n", type=int, default=12, help="evaluations per variant after the first (its build)")
    ap.add_argument("--concurrency", type=int, default=1, help="evaluations in flight at once")
    ap.add_argument("--variant", nargs="+", action="append", metavar="NAME [KEY=VALUE ...]",
                    help="a judge setting (JudgeConfig fields); default: one variant, today's defaults")
    ap.add_argument("--common", nargs="+", default=[], metavar="KEY=VALUE",
                    help="JudgeConfig fields for every variant (a variant's own win)")
    ap.add_argument("--settle-s", type=float, default=2.0, help="pause after the first evaluation (processes start)")
    ap.add_argument("--cache-dir", default=str(Path(tempfile.gettempdir()) / "slot_split_cache"))
    ap.add_argument("--out", default="", help="also write the results (JSON)")
    args = ap.parse_args(argv)
    sub = parse_sub(args.sub or DEFAULT_SUB[args.device])
    tasks = TaskSet(args.kernelbench_dir or None)
    common = parse_variant(["common", *args.common])[1]
    variants = [(n, {**common, **kw}) for n, kw in (parse_variant(v) for v in (args.variant or [["defaults"]]))]
    results = []
    for name, kw in variants:
        t = time.monotonic()
        results.append(asyncio.run(run_variant(args, name, kw, sub.task, sub.code, tasks)))
        print(f"[{name}] {results[-1]['n']} evaluations in {time.monotonic() - t:.0f} s (its first, the build "
              f"and the task's profile, included)", flush=True)
        # the table so far after each variant: a run cut short by its time limit still tells what it got
        print(f"{sub.label}, {args.device}, concurrency {args.concurrency}")
        print(table(results), flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
