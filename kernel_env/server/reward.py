"""The per-turn reward: one function of a Verdict, with its knobs in RewardConfig.

    not correct (any stage before "timed")   -> 0            reason: the stage / error kind
    roofline violation (t_new < physical floor)-> 0           reason "roofline_violation"
    correct                                  -> base + speed_weight * s
        s = clip(log(speedup) / log(speedup_cap), 0, 1)
          = 0 at or below the reference's speed, 1 at `speedup_cap` x and beyond
    suspicious (speedup above the judge's threshold) -> the above times suspicious_factor
    share_power > 0 (Dr. Kernel's recipe against lazy kernels) -> s times kernel_share ** share_power,
        kernel_share = the share of the time in the submission's own kernels (unknown: not weighted)

Why this shape: correctness is worth a fixed share (so a correct-but-slow kernel always beats a
wrong one), speed is paid on a log scale (2x and 4x are equal steps) and capped (a reward hack that
fakes a 1000x speedup earns no more than a real `speedup_cap`x, and it is flagged). A physically
impossible time earns nothing. Rewards stay in [0, base + speed_weight] (default [0, 1]).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class RewardConfig:
    base: float = 0.3               # for any correct kernel
    speed_weight: float = 0.7       # scales the bounded speed term
    speedup_cap: float = 10.0       # speedups above this earn no more (must be > 1)
    compiled_bonus: float = 0.0     # optional shaping: built and ran, but wrong (0 = off)
    suspicious_factor: float = 1.0  # multiplier for flagged-suspicious speedups (1 = no penalty)
    # the speed term weighted by the kernels' share of the time (0 = off, 1 = in proportion): a fast
    # answer whose own kernels do little of the work earns little for its speed (arXiv 2602.05885)
    share_power: float = 0.0

    def __post_init__(self):
        if not self.speedup_cap > 1.0:
            raise ValueError("speedup_cap must be > 1")
        if self.share_power < 0:
            raise ValueError("share_power must be >= 0")

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def compute_reward(verdict, cfg: RewardConfig = RewardConfig()) -> tuple[float, str]:
    """(reward, reason). `verdict` is a judge Verdict (duck-typed: only its fields are read)."""
    if verdict.roofline_violation:
        return 0.0, "roofline_violation: measured time below the physical floor"
    if not verdict.correct:
        kind = getattr(verdict, "error_kind", None) or "none"
        if cfg.compiled_bonus and verdict.stage in ("run", "correctness"):
            return cfg.compiled_bonus, f"not correct ({verdict.stage}/{kind}): compiled bonus"
        return 0.0, f"not correct ({verdict.stage}/{kind})"
    sp = verdict.speedup
    if sp is None or not math.isfinite(sp) or sp <= 0:
        return cfg.base, "correct; no valid speedup"
    s = min(max(math.log(sp) / math.log(cfg.speedup_cap), 0.0), 1.0)
    reason = f"correct; speedup {sp:.3g}x"
    share = getattr(verdict, "kernel_share", None)
    if cfg.share_power > 0 and share is not None:
        s *= min(max(share, 0.0), 1.0) ** cfg.share_power
        reason += f"; speed term x share {share:.2f}^{cfg.share_power:g}"
    r = cfg.base + cfg.speed_weight * s
    if sp > cfg.speedup_cap:
        reason += f" (capped at {cfg.speedup_cap:g}x)"
    if verdict.suspicious:
        r *= cfg.suspicious_factor
        reason += f"; suspicious speedup (x{cfg.suspicious_factor:g})"
    return r, reason
