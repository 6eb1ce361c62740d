"""Numbers over episodes: the kernel/* metrics, per-task tables, the episode's return, flagged turns.

An episode is a dict with `turns`: one record per judged turn, a `kernel_env.models.TurnResult` or the
same as a plain dict (episode files, the seed's own turn dicts); `history` (the env state's) is read
when `turns` is absent.

The metrics the field reports, defined here and nowhere else (docs/metrics.md cites the sources). An
episode is scored by its best turn: the counting-correct turn (`TurnResult.counts_correct`: correct
and not under the roofline floor) with the largest speedup.

  key                      meaning                                                  matches
  fast_0_pct               % of episodes with a correct turn (= correct_pct)         KernelBench fast_0
  fast_<p>_pct             % of episodes whose best turn has speedup > p (strict),   KernelBench fast_p,
                           p in FAST_P (1.0, 1.2, 1.5, 2.0), over ALL episodes        Dr. Kernel Fast@1.2
  mean_speedup             arithmetic mean of the episodes' best speedups            -
  geomean_speedup          geometric mean of the same speedups                       KernelBench geomean
  mean_kernel_share        mean of the best turn's kernel_share (own kernels' share  -
                           of the device time), where recorded
  pass@1, pass@k           mean over tasks of the unbiased pass@k (Chen et al. 2021)  Codex pass@k
                           of "the episode has a correct turn", episodes grouped by
                           task_id as samples, in %
  policies                 judged turns per compute rule (strict|kernelbench)         -

Percentages are 0-100 and None when there is no episode; means are None when nothing enters them.
"""
from __future__ import annotations

import math
import statistics
from typing import Optional, Sequence

from ..models import COMPILED_STAGES, TurnResult

SUMMARY_KEYS = ("compile_pct", "correct_pct", "correct_turn1_pct", "faster_than_ref_pct", "mean_speedup",
                "median_roofline_frac", "suspicious")
# the speedup thresholds of fast_p: 0 (correct), 1 (faster than the reference), 1.2 (Dr. Kernel's
# "meaningful" speedup), 1.5 and 2
FAST_P = (0.0, 1.0, 1.2, 1.5, 2.0)
__all__ = ["COMPILED_STAGES", "SUMMARY_KEYS", "FAST_P", "summarize", "per_task", "format_table", "format_headline",
           "episode_return", "flagged_turns", "turn_results", "counts_correct", "best_turn", "best_speedup",
           "is_fast", "fast_key", "pass_at_k", "pass_at", "fast_p_at", "pass_k_for"]


def turn_results(ep: dict) -> list[TurnResult]:
    """The episode's turns as records."""
    return [TurnResult.of(t) for t in (ep.get("turns") or ep.get("history") or [])]


def counts_correct(ep: dict) -> bool:
    """The episode has a turn that counts as correct."""
    return any(t.counts_correct for t in turn_results(ep))


def _pct(k: int, n: int) -> Optional[float]:
    return 100.0 * k / n if n else None


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)


def _best(turns: Sequence[TurnResult]) -> Optional[TurnResult]:
    ok = [t for t in turns if t.counts_correct]
    timed = [t for t in ok if _finite(t.speedup)]
    if timed:
        return max(timed, key=lambda t: t.speedup)  # the first of equals
    return ok[0] if ok else None


def _fast(best: Optional[TurnResult], p: float) -> bool:
    if best is None:
        return False
    return p <= 0 or (_finite(best.speedup) and best.speedup > p)


def best_turn(ep: dict) -> Optional[TurnResult]:
    """The turn an episode is scored by: of the turns that count as correct, the one with the largest
    speedup (a correct turn without a speedup only when none has one); None when none is correct."""
    return _best(turn_results(ep))


def best_speedup(ep: dict) -> Optional[float]:
    """The best turn's speedup (None when the episode has no correct turn with one)."""
    t = best_turn(ep)
    return t.speedup if t is not None and _finite(t.speedup) else None


def fast_key(p: float) -> str:
    """summarize's key for fast_p: fast_0_pct, fast_1.0_pct, fast_1.2_pct, ..."""
    return "fast_0_pct" if p == 0 else f"fast_{float(p)!r}_pct"


def is_fast(ep: dict, p: float) -> bool:
    """KernelBench's fast_p for one episode: it has a correct turn and, for p > 0, its best speedup is
    strictly greater than p (a speedup equal to p is not fast)."""
    return _fast(best_turn(ep), p)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. 2021 from n samples of which c pass:
    1 - C(n-c, k) / C(n, k), the chance that k of the n drawn without replacement hold a passing one
    (a probability in [0, 1]). Exact: the binomials are Python integers."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _by_task(episodes: Sequence[dict]) -> dict:
    by: dict = {}
    for ep in episodes:
        by.setdefault(ep.get("task_id"), []).append(ep)
    return by


def _mean_pass(groups: Sequence[Sequence[bool]], k: int) -> Optional[float]:
    vals = [pass_at_k(len(g), sum(g), k) for g in groups if len(g) >= k]
    return 100.0 * sum(vals) / len(vals) if vals else None


def fast_p_at(episodes: Sequence[dict], p: float, k: int) -> Optional[float]:
    """fast_p@k in %: the mean over tasks of pass_at_k(n, c, k), n = the task's episodes (samples, e.g.
    GRPO's generations), c = those that are fast_p. Episodes are grouped by `task_id` (those without
    one form one group); a task with fewer than k episodes is left out; None when no task has k."""
    groups = [[is_fast(ep, p) for ep in eps] for eps in _by_task(episodes).values()]
    return _mean_pass(groups, k)


def pass_at(episodes: Sequence[dict], k: int) -> Optional[float]:
    """pass@k in % of "the episode has a correct turn", averaged over tasks (fast_p_at with p = 0)."""
    return fast_p_at(episodes, 0.0, k)


def pass_k_for(episodes: Sequence[dict]) -> Optional[int]:
    """The k summarize reports pass@k for: the largest power of two not above the fewest episodes of
    a task, when every task has more than one; else None."""
    sizes = [len(g) for g in _by_task(episodes).values()]
    if not sizes or min(sizes) < 2:
        return None
    return 1 << (min(sizes).bit_length() - 1)


def _geomean(xs: Sequence[float]) -> Optional[float]:
    if not xs:
        return None
    if min(xs) <= 0:
        return 0.0  # a zero factor (speedup 0.0 in a seed record): the product is 0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


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

    The field's metrics (the module's table; each episode scored by its best turn, `best_turn`):
    - fast_0_pct, fast_1.0_pct, fast_1.2_pct, fast_1.5_pct, fast_2.0_pct (`fast_key(p)`, p in FAST_P):
      episodes whose best turn is correct with speedup > p (strictly), over all N; fast_0 = correct.
    - geomean_speedup: geometric mean over the same population as mean_speedup; None if empty.
    - mean_kernel_share: mean of the best turn's kernel_share over the episodes whose best turn has
      one; None if none has.
    - policies: {policy: judged turns} over all turns that record one; None if none does.
    - pass@1: `pass_at(episodes, 1)`, the mean over tasks (task_id) of the share of a task's episodes
      that have a correct turn; pass@k also, for k = `pass_k_for(episodes)` (the largest power of two
      not above the fewest episodes of a task), only when every task has more than one episode.
    """
    n = len(episodes)
    compiled = correct = correct1 = faster = suspicious = 0
    speedups, fracs, returns = [], [], []
    max_t = max((len(turn_results(ep)) for ep in episodes), default=0)
    by_turn = [0] * max_t
    n_turns = 0
    fast = dict.fromkeys(FAST_P, 0)
    shares, policies, correct_by_task = [], {}, {}
    for ep in episodes:
        turns = turn_results(ep)
        n_turns += len(turns)
        best = _best(turns)
        for p in FAST_P:
            fast[p] += _fast(best, p)
        if best is not None and best.kernel_share is not None and math.isfinite(best.kernel_share):
            shares.append(best.kernel_share)
        for t in turns:
            if t.policy:
                policies[t.policy] = policies.get(t.policy, 0) + 1
        correct_by_task.setdefault(ep.get("task_id"), []).append(best is not None)
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
    out = {
        "compile_pct": _pct(compiled, n), "correct_pct": _pct(correct, n), "correct_turn1_pct": _pct(correct1, n),
        "faster_than_ref_pct": _pct(faster, n),
        "mean_speedup": sum(speedups) / len(speedups) if speedups else None,
        "median_roofline_frac": statistics.median(fracs) if fracs else None,
        "suspicious": suspicious,
        "episodes": n, "turns": n_turns, "mean_turns": n_turns / n if n else None,
        "mean_return": sum(returns) / len(returns) if returns else None,
        "correct_by_turn": [_pct(c, n) for c in by_turn],
        **{fast_key(p): _pct(fast[p], n) for p in FAST_P},
        "geomean_speedup": _geomean(speedups),
        "mean_kernel_share": sum(shares) / len(shares) if shares else None,
        "policies": dict(sorted(policies.items())) or None,
        "pass@1": _mean_pass(list(correct_by_task.values()), 1),
    }
    k = pass_k_for(episodes)
    if k is not None and k > 1:
        out[f"pass@{k}"] = _mean_pass(list(correct_by_task.values()), k)
    return out



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



def format_headline(summary: dict) -> str:
    """The field's numbers on one line (fast_p, speedup means, kernel share, pass@k); a key the summary
    lacks (one written before it existed) shows as "-"."""
    parts = [f"{fast_key(p)[:-4]} {_fmt(summary.get(fast_key(p)), True)}" for p in FAST_P]
    parts.append(f"speedup geomean {_fmt(summary.get('geomean_speedup'))} mean {_fmt(summary.get('mean_speedup'))}")
    parts.append(f"kernel share {_fmt(summary.get('mean_kernel_share'))}")
    passes = sorted((k for k in summary if k.startswith("pass@") and k[5:].isdigit()), key=lambda k: int(k[5:]))
    parts += [f"{k} {_fmt(summary[k], True)}" for k in passes] or ["pass@1 -"]
    if summary.get("policies"):
        parts.append("turns by policy " + ", ".join(f"{p} {c}" for p, c in summary["policies"].items()))
    return "  ".join(parts)
