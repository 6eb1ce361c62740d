"""The wire types, shared by the client and the server (OpenEnv 0.10 pydantic models), and the one
record of a judged turn (`TurnResult`) that the server, the client, the trainer, the metrics and the
report all read.

Observation forbids unknown fields (OpenEnv's choice), so anything beyond the fields the trainer
reads travels in `metadata`; State allows extras, but we keep it to the documented fields.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field


class KernelAction(Action):
    """One submission: the complete Python source of a module defining `class ModelNew`."""

    code: str = Field(default="", description="Python source defining ModelNew (with its kernels)")


class KernelObservation(Observation):
    """What the policy sees. After reset only `problem` is set; after a step, the judge's verdict.

    `reward` and `done` are the OpenEnv base fields. `metadata` carries the rest of the verdict
    summary (turn, max_turns, task_id, error_kind, suspicious, roofline_violation, reward_reason).
    """

    problem: str = Field(default="", description="the full prompt (set by reset; empty after a step)")
    stage: Optional[str] = Field(default=None, description="format|static|build|run|correctness|timed")
    correct: bool = False
    speedup: Optional[float] = Field(default=None, description="t_ref_ms / t_new_ms, when correct")
    roofline_frac: Optional[float] = Field(default=None, description="t_min_ms / t_new_ms")
    ref_roofline_frac: Optional[float] = Field(default=None, description="t_min_ms / t_ref_ms")
    t_ref_ms: Optional[float] = None
    t_new_ms: Optional[float] = None
    t_min_ms: Optional[float] = Field(default=None, description="roofline floor on the timing device")
    bound: Optional[str] = Field(default=None, description="compute|memory")
    feedback: str = Field(default="", description="what went wrong, or the timing summary")


class KernelState(State):
    """Episode state (`state()`): the id, the turn count, the task and one dict per judged turn.

    Each history entry is a `TurnResult` as a dict (its judge's fields: turn (1-based), stage,
    correct, error_kind, speedup, reward, reward_reason, t_ref_ms, t_new_ms, t_min_ms, roofline_frac,
    ref_roofline_frac, bound, suspicious, roofline_violation, feedback, trials_passed, timings, ...).
    """

    task_id: Optional[str] = None
    split: Optional[str] = None
    history: list[dict[str, Any]] = Field(default_factory=list)


# TurnResult fields that are KernelObservation fields of the same name; the rest of the judge's
# fields travel in the observation's metadata
_OBSERVED = ("stage", "correct", "speedup", "roofline_frac", "ref_roofline_frac", "t_ref_ms", "t_new_ms",
             "t_min_ms", "bound", "feedback")
# what the agent adds to a turn (the model's answer); the server never sets these
AGENT_FIELDS = ("truncated", "completion_tokens", "code_chars")


class TurnResult(BaseModel):
    """One judged turn: the judge's verdict summary, the reward, and (agent side) the answer's size.

    Made from a judge Verdict in one place (`from_verdict`, on the server). The step's observation is
    rendered from it (`observation`) and read back from one (`from_observation`, on the client), the
    episode's state history holds it, and the trainer's and `baseline_eval.py`'s episode records,
    the metrics (`kernel_env.agent.metrics`) and the report read it. `of()` takes a record written as
    a plain dict (older files, the seed's own turn dicts): unknown keys are ignored, missing ones
    default.
    """

    model_config = ConfigDict(extra="ignore")

    turn: Optional[int] = Field(default=None, description="1-based turn of the episode")
    stage: Optional[str] = Field(default=None, description="format|static|build|run|correctness|timed")
    correct: bool = False
    error_kind: Optional[str] = None
    speedup: Optional[float] = Field(default=None, description="t_ref_ms / t_new_ms, when correct")
    reward: float = 0.0
    reward_reason: Optional[str] = None
    t_ref_ms: Optional[float] = None
    t_new_ms: Optional[float] = None
    t_min_ms: Optional[float] = None
    roofline_frac: Optional[float] = Field(default=None, description="t_min_ms / t_new_ms")
    ref_roofline_frac: Optional[float] = Field(default=None, description="t_min_ms / t_ref_ms")
    bound: Optional[str] = Field(default=None, description="compute|memory")
    suspicious: bool = Field(default=False, description="speedup over the judge's threshold: read the code")
    roofline_violation: bool = Field(default=False, description="time under the physical floor: not trusted")
    feedback: str = ""
    trials_passed: Optional[int] = None
    timings: Optional[dict[str, Any]] = Field(default=None, description="seconds per judge stage, queues included")
    timing_spread: Optional[float] = Field(default=None, description="(p90 - p10) / median of the timed calls")
    timed_calls: Optional[int] = None
    run_phases: Optional[dict[str, Any]] = Field(default=None, description="the run process's seconds per phase")
    ref_phases: Optional[dict[str, Any]] = Field(default=None, description="the reference worker's, per request")
    build_cached: bool = False
    policy: Optional[str] = Field(default=None, description="the compute rule judged under: strict|kernelbench")
    kernel_share: Optional[float] = Field(default=None, description="share of the submission's device time in "
                                          "its own kernels (not PyTorch's or a vendor library's), when correct")
    truncated: Optional[bool] = Field(default=None, description="the model's answer hit the length limit")
    completion_tokens: Optional[int] = None
    code_chars: Optional[int] = None

    @classmethod
    def from_verdict(cls, turn: int, verdict, reward: float, reward_reason: str) -> "TurnResult":
        """The turn as the server records it. `verdict` is a judge Verdict (duck-typed: the client
        side never imports the judge)."""
        d = verdict.details or {}
        return cls(turn=turn, stage=verdict.stage, correct=bool(verdict.correct), error_kind=verdict.error_kind,
                   speedup=verdict.speedup, reward=reward, reward_reason=reward_reason,
                   t_ref_ms=verdict.t_ref_ms, t_new_ms=verdict.t_new_ms, t_min_ms=verdict.t_min_ms,
                   roofline_frac=verdict.roofline_frac, ref_roofline_frac=verdict.ref_roofline_frac,
                   bound=verdict.bound, suspicious=bool(verdict.suspicious),
                   roofline_violation=bool(verdict.roofline_violation), feedback=verdict.feedback or "",
                   trials_passed=verdict.trials_passed, timings=dict(verdict.timings or {}),
                   timing_spread=d.get("timing_spread"), timed_calls=d.get("timed_calls"),
                   run_phases=d.get("run_phases"), ref_phases=d.get("ref_phases"),
                   build_cached=bool(d.get("build_cached")), policy=verdict.policy,
                   kernel_share=verdict.kernel_share)

    @classmethod
    def of(cls, record: "TurnResult | Mapping[str, Any]") -> "TurnResult":
        return record if isinstance(record, cls) else cls.model_validate(dict(record))

    def judged(self) -> dict:
        """The server's record (the state's history entry): every field but the agent's."""
        return self.model_dump(exclude=set(AGENT_FIELDS))

    def observation(self, *, done: bool, max_turns: int, task_id: str) -> KernelObservation:
        """The step's observation: the fields the policy reads, the rest of the record in metadata."""
        rec = self.judged()
        del rec["reward"]  # the observation's own field
        return KernelObservation(problem="", done=done, reward=self.reward,
                                 **{k: rec.pop(k) for k in _OBSERVED},
                                 metadata={"max_turns": max_turns, "task_id": task_id, **rec})

    @classmethod
    def from_observation(cls, obs: KernelObservation, reward: Optional[float] = None, **agent) -> "TurnResult":
        """The record back from a step's observation (client side), with the agent's fields
        (`truncated`, `completion_tokens`, `code_chars`)."""
        meta = {k: v for k, v in (obs.metadata or {}).items() if k in cls.model_fields and k not in AGENT_FIELDS}
        meta["reward"] = float((obs.reward if reward is None else reward) or 0.0)
        return cls(**meta, **{k: getattr(obs, k) for k in _OBSERVED}, **agent)

    @property
    def counts_correct(self) -> bool:
        """Correct, and not under the physical floor (such a time is not trusted)."""
        return self.correct and not self.roofline_violation

    @property
    def compiled(self) -> bool:
        """The submission built and ran (the judge's Verdict.compiled)."""
        return self.stage in COMPILED_STAGES

    @property
    def flagged(self) -> bool:
        return self.suspicious or self.roofline_violation


COMPILED_STAGES = ("run", "correctness", "timed")
