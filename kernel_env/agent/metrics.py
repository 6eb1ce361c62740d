"""Numbers over episodes: the kernel/* metrics, per-task tables, the episode's return, flagged turns.

An episode is a dict with `turns`: one record per judged turn, a `kernel_env.models.TurnResult` or the
same as a plain dict (episode files, the seed's own turn dicts); `history` (the env state's) is read
when `turns` is absent.
"""
from __future__ import annotations

import math
import statistics
from typing import Optional, Sequence

from ..models import COMPILED_STAGES, TurnResult

SUMMARY_KEYS = ("compile_pct", "correct_pct", "correct_turn1_pct", "faster_than_ref_pct", "mean_speedup",
                "median_roofline_frac", "suspicious")
__all__ = ["COMPILED_STAGES", "SUMMARY_KEYS", "summarize", "per_task", "format_table", "episode_return",
           "flagged_turns", "turn_results", "counts_correct"]


def turn_results(ep: dict) -> list[TurnResult]:
    """The episode's turns as records."""
    return [TurnResult.of(t) for t in (ep.get("turns") or ep.get("history") or [])]


def counts_correct(ep: dict) -> bool:
    """The episode has a turn that counts as correct."""
    return any(t.counts_correct for t in turn_results(ep))


def _pct(k: int, n: int) -> Optional[float]:
    return 100.0 * k / n if n else None


def summarize(episodes: Sequence[dict]) -> dict:
    """Metrics over episodes (one episode = one task attempt of up to max_turns judged turns).

    Each episode is a dict with `turns`: a list of per-turn dicts with at least `stage`, `correct`,
    `speedup`, `roofline_frac`, `suspicious`, `roofline_violation` (the trainer's and this CLI's
    records; an env `history` list is used when `turns` is absent). A turn *compiles* when its stage
    is run, correctness or timed (it built and ran); it *counts as correct* when `correct` is true and
    it has no roofline violation (a time below the physical floor is not trusted). Percentages are
    0-100 over all N episodes, and None when N == 0:

    - compile_pct: episodes with at least one compiling turn.
    - correct_pct: episodes with at least one correct turn (any turn).
    - correct_turn1_pct: episodes whose first turn is correct (single-shot accuracy).
    - faster_than_ref_pct: episodes with a correct turn whose speedup (t_ref / t_new) is > 1.
    - mean_speedup: arithmetic mean, over episodes with a correct turn that has a speedup, of the best
      such speedup; None if there is none.
    - median_roofline_frac: median, over episodes with a correct turn that has a roofline fraction
      (t_min / t_new, 1 = the speed-of-light floor), of the best such fraction; None if there is none.
    - suspicious: the number of turns (all episodes) the judge flagged as suspicious or as a roofline
      violation — kernels to read by hand (0 when N == 0).
    Extra keys: episodes (N), turns (total judged turns), mean_turns, mean_return (mean of the
    episodes' `return` where recorded, else None), correct_by_turn (a list: % of episodes correct
    by turn k, k = 1..max turns, best-so-far).
    """
    n = len(episodes)
    compiled = correct = correct1 = faster = suspicious = 0
    speedups, fracs, returns = [], [], []
    max_t = max((len(turn_results(ep)) for ep in episodes), default=0)
    by_turn = [0] * max_t
    n_turns = 0
    for ep in episodes:
        turns = turn_results(ep)
        n_turns += len(turns)
        if any(t.compiled for t in turns):
            compiled += 1
        ok = [t for t in turns if t.counts_correct]
        if ok:
            correct += 1
        if turns and turns[0].counts_correct:
            correct1 += 1
        sp = [t.speedup for t in ok if t.speedup is not None and math.isfinite(t.speedup)]
        if sp:
            speedups.append(max(sp))
            if max(sp) > 1.0:
                faster += 1
        fr = [t.roofline_frac for t in ok if t.roofline_frac is not None]
        if fr:
            fracs.append(max(fr))
        suspicious += sum(1 for t in turns if t.flagged)
        first_ok = next((k for k, t in enumerate(turns) if t.counts_correct), None)
        if first_ok is not None:
            for k in range(first_ok, max_t):
                by_turn[k] += 1
        if ep.get("return") is not None:
            returns.append(float(ep["return"]))
    return {
        "compile_pct": _pct(compiled, n), "correct_pct": _pct(correct, n), "correct_turn1_pct": _pct(correct1, n),
        "faster_than_ref_pct": _pct(faster, n),
        "mean_speedup": sum(speedups) / len(speedups) if speedups else None,
        "median_roofline_frac": statistics.median(fracs) if fracs else None,
        "suspicious": suspicious,
        "episodes": n, "turns": n_turns, "mean_turns": n_turns / n if n else None,
        "mean_return": sum(returns) / len(returns) if returns else None,
        "correct_by_turn": [_pct(c, n) for c in by_turn],
    }



def episode_return(rewards: Sequence[float], mode: str = "discounted", gamma: float = 0.9) -> float:
    """The episode's scalar reward: sum_t gamma^t r_t ("discounted", t from 0) or max_t r_t ("best")."""
    if mode == "best":
        return max(rewards, default=0.0)
    if mode != "discounted":
        raise ValueError(f"unknown return mode {mode!r}: use discounted or best")
    return sum(gamma**t * r for t, r in enumerate(rewards))



def flagged_turns(ep: dict) -> list[dict]:
    """The turns of an episode that the judge flagged (suspicious speedup or roofline violation), each
    with the task, the turn's code and its numbers: what goes to suspicious.jsonl for review."""
    out = []
    codes = ep.get("codes") or []
    for k, t in enumerate(turn_results(ep) if ep.get("turns") else []):
        if t.flagged:
            out.append({"task_id": ep.get("task_id"), "mode": ep.get("mode"), "step": ep.get("step"),
                        "episode_id": ep.get("episode_id"), **t.model_dump(), "turn": t.turn or k + 1,
                        "code": codes[k] if k < len(codes) else ""})
    return out


def per_task(episodes: Sequence[dict]) -> dict:
    """summarize() per task id, plus the best speedup and roofline fraction over its correct turns."""
    by: dict[str, list] = {}
    for ep in episodes:
        by.setdefault(ep["task_id"], []).append(ep)
    out = {}
    for tid, eps in by.items():
        s = summarize(eps)
        ok = [t for ep in eps for t in turn_results(ep) if t.counts_correct]
        sp = [t.speedup for t in ok if t.speedup is not None]
        fr = [t.roofline_frac for t in ok if t.roofline_frac is not None]
        stages = [t.stage for ep in eps for t in turn_results(ep)]
        s.update(best_speedup=max(sp) if sp else None, best_roofline_frac=max(fr) if fr else None,
                 last_stage=stages[-1] if stages else None)
        out[tid] = s
    return out


def _fmt(v, pct=False) -> str:
    if v is None:
        return "-"
    if pct:
        return f"{v:.1f}%"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def format_table(summary: dict, tasks: dict) -> str:
    rows = [("task", "eps", "compile", "correct", "turn1", "faster", "best speedup", "best roofline", "last stage")]
    for tid, s in sorted(tasks.items()):
        rows.append((tid, str(s["episodes"]), _fmt(s["compile_pct"], True), _fmt(s["correct_pct"], True),
                     _fmt(s["correct_turn1_pct"], True), _fmt(s["faster_than_ref_pct"], True),
                     _fmt(s["best_speedup"]), _fmt(s["best_roofline_frac"]), _fmt(s["last_stage"])))
    rows.append(("ALL", str(summary["episodes"]), _fmt(summary["compile_pct"], True),
                 _fmt(summary["correct_pct"], True), _fmt(summary["correct_turn1_pct"], True),
                 _fmt(summary["faster_than_ref_pct"], True), f"mean {_fmt(summary['mean_speedup'])}",
                 f"median {_fmt(summary['median_roofline_frac'])}", f"suspicious {summary['suspicious']}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, lines[1])
    return "\n".join(lines)

