"""The wire types, shared by the client and the server (OpenEnv 0.10 pydantic models).

Observation forbids unknown fields (OpenEnv's choice), so anything beyond the fields the trainer
reads travels in `metadata`; State allows extras, but we keep it to the documented fields.
"""
from __future__ import annotations

from typing import Any, Optional

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


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

    Each history entry has at least: turn (1-based), stage, correct, error_kind, speedup, reward,
    reward_reason, t_ref_ms, t_new_ms, t_min_ms, roofline_frac, ref_roofline_frac, suspicious,
    roofline_violation.
    """

    task_id: Optional[str] = None
    split: Optional[str] = None
    history: list[dict[str, Any]] = Field(default_factory=list)
