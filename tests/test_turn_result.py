"""TurnResult: the one record of a judged turn, from the judge's Verdict to the metrics."""
from __future__ import annotations

import json

import pytest

from kernel_env.agent.metrics import flagged_turns, summarize
from kernel_env.agent.turns import turn_record
from kernel_env.judge.verdict import Verdict
from kernel_env.models import AGENT_FIELDS, KernelObservation, TurnResult
from kernel_env.server.reward import compute_reward


def _timed_verdict() -> Verdict:
    return Verdict("level1/1_Small_ReLU", "timed", correct=True, speedup=2.5, t_ref_ms=1.0, t_new_ms=0.4,
                   t_min_ms=0.1, roofline_frac=0.25, ref_roofline_frac=0.1, bound="memory", feedback="ok",
                   trials_passed=5, timings={"build_s": 1.0, "total_s": 3.0},
                   details={"timing_spread": 0.01, "timed_calls": 40, "run_phases": {"timing_s": 0.5},
                            "ref_phases": {"prepare": {"s": 0.1}}, "build_cached": True})


def test_the_record_survives_the_wire_from_verdict_to_client():
    v = _timed_verdict()
    reward, reason = compute_reward(v)
    server = TurnResult.from_verdict(2, v, reward, reason)
    obs = server.observation(done=False, max_turns=3, task_id=v.task_id)
    # the observation's own fields, and the rest in metadata (what feedback_message reads)
    assert obs.stage == "timed" and obs.speedup == 2.5 and obs.reward == reward and obs.feedback == "ok"
    assert obs.metadata["turn"] == 2 and obs.metadata["max_turns"] == 3 and obs.metadata["error_kind"] == "none"
    assert obs.metadata["timings"] == {"build_s": 1.0, "total_s": 3.0} and obs.metadata["build_cached"] is True
    # through JSON, as the server sends it and the client parses it
    wire = KernelObservation.model_validate(json.loads(obs.model_dump_json()))
    client = TurnResult.from_observation(wire, truncated=True, completion_tokens=7, code_chars=120)
    assert client.judged() == server.judged()
    assert (client.truncated, client.completion_tokens, client.code_chars) == (True, 7, 120)
    # the state's history entry is the same record without the agent's side
    assert set(server.judged()) == set(TurnResult.model_fields) - set(AGENT_FIELDS)


def test_turn_record_is_the_client_side_record():
    v = Verdict("level1/1_Small_ReLU", "build", error_kind="build_error", feedback="error: x")
    obs = TurnResult.from_verdict(1, v, 0.0, "not correct (build/build_error)").observation(
        done=True, max_turns=1, task_id=v.task_id)

    class Step:
        observation, reward = obs, 0.0

    rec = turn_record(Step, code="abc", truncated=False, completion_tokens=None)
    assert rec["stage"] == "build" and rec["error_kind"] == "build_error" and rec["code_chars"] == 3
    assert rec["correct"] is False and rec["reward"] == 0.0 and TurnResult.of(rec).compiled is False


def test_metrics_read_records_and_the_seeds_plain_dicts_alike():
    v = _timed_verdict()
    rec = TurnResult.from_verdict(1, v, *compute_reward(v)).model_dump()
    # the seed's rollout writes its own turn dicts (fewer keys, speedup 0.0 for none) and reads
    # summarize's numbers: both spellings give the same metrics
    seed_turn = {"stage": "timed", "correct": True, "speedup": 2.5, "roofline_frac": 0.25, "reward": 0.6}
    a = summarize([{"turns": [rec]}])
    b = summarize([{"turns": [seed_turn]}])
    for k in ("compile_pct", "correct_pct", "correct_turn1_pct", "faster_than_ref_pct", "mean_speedup",
              "median_roofline_frac", "suspicious"):
        assert a[k] == b[k], k
    assert a["correct_pct"] == 100.0 and a["mean_speedup"] == 2.5
    # an env history stands in when the episode has no turns of its own
    assert summarize([{"history": [rec]}])["correct_pct"] == 100.0


@pytest.mark.parametrize("flag", ["suspicious", "roofline_violation"])
def test_flagged_turns_carry_the_code_and_the_record(flag):
    v = _timed_verdict()
    setattr(v, flag, True)
    rec = TurnResult.from_verdict(1, v, *compute_reward(v)).model_dump()
    ok = TurnResult.from_verdict(2, _timed_verdict(), 0.5, "x").model_dump()
    out = flagged_turns({"task_id": "t", "mode": "train", "step": 3, "turns": [rec, ok], "codes": ["c1", "c2"]})
    assert len(out) == 1 and out[0]["code"] == "c1" and out[0][flag] is True and out[0]["turn"] == 1
    # a roofline violation does not count as correct; a suspicious speedup does, and both are counted
    s = summarize([{"turns": [rec]}])
    assert s["suspicious"] == 1 and s["correct_pct"] == (0.0 if flag == "roofline_violation" else 100.0)
