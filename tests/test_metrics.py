"""The field's metrics in kernel_env.agent.metrics: fast_p (KernelBench), geomean speedup, kernel share,
the compute rules judged under, and pass@k (Chen et al. 2021) over samples of a task."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernel_env.agent import metrics
from kernel_env.agent.metrics import FAST_P, fast_key, fast_p_at, is_fast, pass_at, pass_at_k, pass_k_for, summarize
from kernel_env.models import TurnResult

ROOT = Path(__file__).resolve().parents[1]
NEW_KEYS = [fast_key(p) for p in FAST_P] + ["geomean_speedup", "mean_kernel_share", "policies", "pass@1"]


def _t(stage="timed", correct=True, speedup=None, **kw):
    return {"stage": stage, "correct": correct, "speedup": speedup, **kw}


def _ep(*turns, task="t"):
    return {"task_id": task, "turns": list(turns)}


def test_fast_key_names():
    assert [fast_key(p) for p in FAST_P] == ["fast_0_pct", "fast_1.0_pct", "fast_1.2_pct", "fast_1.5_pct",
                                             "fast_2.0_pct"]
    assert FAST_P == (0.0, 1.0, 1.2, 1.5, 2.0)


def test_fast_p_exact_values_and_the_strict_boundary():
    eps = [
        _ep(_t(speedup=0.5)),                                              # correct, slower
        _ep(_t(speedup=1.0)),                                              # == 1.0: not fast_1.0
        _ep(_t(speedup=0.9), _t(speedup=1.2)),                             # == 1.2: not fast_1.2
        _ep(TurnResult(stage="timed", correct=True, speedup=1.3),          # records work like dicts
            TurnResult(stage="timed", correct=True, speedup=2.0)),         # best 2.0: not fast_2.0
        _ep(_t("build", False), _t(speedup=2.5)),                          # best 2.5
        _ep(_t("build", False), _t("correctness", False)),                 # never correct
        _ep(_t(speedup=90.0, roofline_violation=True, suspicious=True), _t(speedup=1.1)),  # 90x not trusted
        _ep(_t("correctness", True, None)),                                # correct without a time
    ]
    s = summarize(eps)
    assert s["episodes"] == 8
    assert s["fast_0_pct"] == pytest.approx(700 / 8) == s["correct_pct"]
    assert s["fast_1.0_pct"] == pytest.approx(400 / 8) == s["faster_than_ref_pct"]  # 1.2, 2.0, 2.5, 1.1
    assert s["fast_1.2_pct"] == pytest.approx(200 / 8)                              # 2.0, 2.5
    assert s["fast_1.5_pct"] == pytest.approx(200 / 8)
    assert s["fast_2.0_pct"] == pytest.approx(100 / 8)                              # 2.5 only
    assert [is_fast(eps[1], 1.0), is_fast(eps[2], 1.2), is_fast(eps[3], 2.0)] == [False, False, False]
    assert [is_fast(eps[2], 1.0), is_fast(eps[3], 1.5), is_fast(eps[6], 1.0)] == [True, True, True]
    assert is_fast(eps[7], 0.0) and not is_fast(eps[7], 1.0) and not is_fast(eps[5], 0.0)
    assert metrics.best_turn(eps[6]).speedup == 1.1 and metrics.best_speedup(eps[7]) is None
    # the same population as mean_speedup: each timed correct episode's best
    best = [0.5, 1.0, 1.2, 2.0, 2.5, 1.1]
    assert s["mean_speedup"] == pytest.approx(sum(best) / 6)
    assert s["geomean_speedup"] == pytest.approx(math.prod(best) ** (1 / 6))
    # fast_p never rises with p
    vals = [s[fast_key(p)] for p in FAST_P]
    assert vals == sorted(vals, reverse=True)


def test_geomean_against_the_arithmetic_mean():
    s = summarize([_ep(_t(speedup=1.0)), _ep(_t(speedup=4.0)), _ep(_t("format", False))])
    assert s["mean_speedup"] == pytest.approx(2.5) and s["geomean_speedup"] == pytest.approx(2.0)
    s = summarize([_ep(_t(speedup=0.25)), _ep(_t(speedup=4.0))])  # a 4x loss and a 4x gain cancel
    assert s["geomean_speedup"] == pytest.approx(1.0) and s["mean_speedup"] == pytest.approx(2.125)
    one = summarize([_ep(_t(speedup=3.0))])
    assert one["geomean_speedup"] == pytest.approx(3.0) == one["mean_speedup"]
    # non-finite and missing speedups stay out of both means (as mean_speedup always did)
    s = summarize([_ep(_t(speedup=float("inf")), _t(speedup=2.0)), _ep(_t(speedup=float("nan")))])
    assert s["mean_speedup"] == 2.0 and s["geomean_speedup"] == 2.0
    assert s["fast_0_pct"] == 100.0 and s["fast_1.0_pct"] == 50.0
    # the seed's turn dicts write 0.0 for "no speedup": a zero factor makes the product 0, no crash
    assert summarize([_ep(_t(speedup=0.0)), _ep(_t(speedup=2.0))])["geomean_speedup"] == 0.0


def test_kernel_share_comes_from_the_best_turn():
    eps = [
        _ep(_t(speedup=1.5, kernel_share=0.2), _t(speedup=3.0, kernel_share=0.9)),        # best turn: 0.9
        _ep(_t(speedup=2.0, kernel_share=0.4), _t(speedup=1.0, kernel_share=1.0)),        # best turn: 0.4
        _ep(_t(speedup=2.0), _t(speedup=1.5, kernel_share=0.7)),                          # best has none
        _ep(_t("correctness", False, kernel_share=0.3)),                                  # not correct
        _ep(TurnResult(stage="timed", correct=True, speedup=1.2, kernel_share=0.5)),
    ]
    assert summarize(eps)["mean_kernel_share"] == pytest.approx((0.9 + 0.4 + 0.5) / 3)
    assert summarize(eps[2:4])["mean_kernel_share"] is None
    # an untimed correct turn still is the best turn when no turn has a speedup
    assert summarize([_ep(_t("correctness", True, None, kernel_share=0.6))])["mean_kernel_share"] == 0.6


def test_policies_count_judged_turns():
    eps = [_ep(_t(policy="strict"), _t("build", False, policy="strict")),
           _ep(_t("format", False), _t(speedup=1.1, policy="kernelbench")),
           _ep(TurnResult(stage="timed", correct=True, speedup=1.0, policy="kernelbench"))]
    assert summarize(eps)["policies"] == {"kernelbench": 2, "strict": 2}
    assert summarize([_ep(_t(speedup=1.0))])["policies"] is None  # no turn records one


def _brute_pass_at_k(n, c, k):
    """The chance that k of n samples drawn without replacement (c of them passing) hold a passing one,
    by listing every draw."""
    draws = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in d) for d in draws) / len(draws)


def test_pass_at_k_matches_enumeration():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(n, c, k), abs=1e-12), (n, c, k)
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)
    assert pass_at_k(200, 0, 100) == 0.0 and pass_at_k(200, 101, 100) == 1.0
    assert 0.0 < pass_at_k(1000, 1, 10) == pytest.approx(0.01)  # big binomials stay exact
    for bad in ((3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_at_groups_episodes_by_task():
    ok, bad = _t(speedup=1.5), _t("build", False)
    eps = ([_ep(ok, task="a")] + [_ep(bad, task="a")] * 3        # a: 1 of 4
           + [_ep(ok, task="b")] * 4                              # b: 4 of 4
           + [_ep(bad, task="c")] * 4)                            # c: 0 of 4
    assert pass_at(eps, 1) == pytest.approx((25 + 100 + 0) / 3)
    assert pass_at(eps, 2) == pytest.approx(100 * (0.5 + 1 + 0) / 3)  # a: 1 - C(3,2)/C(4,2)
    assert pass_at(eps, 4) == pytest.approx(200 / 3)
    assert pass_at(eps, 5) is None  # no task has 5 samples
    assert fast_p_at(eps, 1.5, 2) == 0.0 and fast_p_at(eps, 1.2, 1) == pass_at(eps, 1)
    s = summarize(eps)
    assert pass_k_for(eps) == 4 and s["pass@1"] == pytest.approx(125 / 3) and s["pass@4"] == pytest.approx(200 / 3)
    assert s["correct_pct"] == pytest.approx(500 / 12)
    # unequal samples: pass@1 averages tasks, correct_pct episodes; no pass@k when a task has one sample
    uneven = [_ep(ok, task="a")] + [_ep(bad, task="b")] * 3
    s = summarize(uneven)
    assert s["pass@1"] == 50.0 and s["correct_pct"] == 25.0 and pass_k_for(uneven) is None
    assert not [k for k in s if k.startswith("pass@") and k != "pass@1"]
    # a task with fewer than k samples is left out of pass@k
    assert pass_at(uneven + [_ep(ok, task="b")], 2) == pytest.approx(100 * pass_at_k(4, 1, 2))
    # k: the largest power of two not above the fewest samples of a task
    for m, k in ((2, 2), (3, 2), (5, 4), (8, 8), (15, 8)):
        assert pass_k_for([_ep(ok, task="a")] * m + [_ep(bad, task="b")] * 20) == k
        assert f"pass@{k}" in summarize([_ep(ok, task="a")] * m + [_ep(bad, task="b")] * 20)
    # episodes without a task_id are one group (the seed's plain episodes)
    assert pass_at([{"turns": [ok]}, {"turns": [bad]}], 2) == 100.0


def test_empty_input_has_every_key():
    s = summarize([])
    assert all(k in s and s[k] is None for k in NEW_KEYS), s
    assert not [k for k in s if k.startswith("pass@") and k != "pass@1"]
    assert pass_at([], 1) is None and fast_p_at([], 1.2, 1) is None and pass_k_for([]) is None
    # episodes without a correct turn: percentages 0, means None
    s = summarize([_ep(_t("build", False)), _ep()])
    assert all(s[fast_key(p)] == 0.0 for p in FAST_P) and s["pass@1"] == 0.0 and s["pass@2"] == 0.0
    assert s["geomean_speedup"] is None and s["mean_kernel_share"] is None and s["policies"] is None
    json.dumps(s)  # summary.json takes it as is


def test_per_task_and_the_headline():
    eps = [_ep(_t(speedup=1.5, kernel_share=0.8, policy="strict"), task="a"), _ep(_t("build", False), task="a"),
           _ep(_t(speedup=1.1), task="b")]
    tasks = metrics.per_task(eps)
    assert tasks["a"]["fast_1.2_pct"] == 50.0 and tasks["b"]["fast_1.2_pct"] == 0.0 and tasks["a"]["pass@1"] == 50.0
    line = metrics.format_headline(summarize(eps))
    for part in ("fast_0 66.7%", "fast_1.0 66.7%", "fast_1.2 33.3%", "fast_2.0 0.0%", "geomean 1.28",
                 "mean 1.3", "kernel share 0.8", "pass@1 75.0%", "strict 1"):
        assert part in line, (part, line)
    old = {k: v for k, v in summarize(eps).items() if k in metrics.SUMMARY_KEYS}  # a summary.json from before
    assert "fast_1.2 -" in metrics.format_headline(old) and "pass@1 -" in metrics.format_headline(old)


@pytest.mark.slow  # imports TRL
def test_trainer_logs_the_new_keys():
    pytest.importorskip("trl")
    import sys
    sys.path.insert(0, str(ROOT))
    import grpo_kernel
    trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=1, is_main_process=False),
                              state=SimpleNamespace(global_step=1))
    eps = [dict(_ep(_t(speedup=2.0, kernel_share=0.5), task="a"), ended="done"),
           dict(_ep(_t("build", False), task="a"), ended="done")]
    # the metrics the rollout returns, which the reward function logs through TRL's log_metric
    m = grpo_kernel.log_episodes(trainer, "train", eps, "/nonexistent/suspicious.jsonl")
    assert m["kernel/fast_1.2_pct"] == 50.0 and m["kernel/fast_2.0_pct"] == 0.0 and m["kernel/pass@1"] == 50.0
    assert m["kernel/geomean_speedup"] == 2.0 and m["kernel/mean_kernel_share"] == 0.5
    assert m["kernel/pass@2"] == 100.0  # two samples of the task
    assert m["kernel/correct_pct"] == 50.0 and m["kernel/turns"] == 1.0
    # None values are not logged
    m = grpo_kernel.log_episodes(trainer, "eval", [dict(_ep(_t("build", False)), ended="done")], "/nonexistent/s.jsonl")
    assert "kernel/geomean_speedup" not in m and "kernel/mean_kernel_share" not in m and m["kernel/fast_0_pct"] == 0.0
