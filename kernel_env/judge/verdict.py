"""The verdict on one submission: plain data, and how the judge finishes one that reached the
comparison (`finish`)."""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from enum import Enum

from ..compute_policy import KERNELBENCH
from . import feedback as fb


class Stage(str, Enum):
    """How far a submission got. Each stage is a failure point, in this order."""
    FORMAT = "format"        # no code, not UTF-8, too large, syntax error, or no `class ModelNew`
    STATIC = "static"        # a forbidden pattern in the source (checks.py)
    BUILD = "build"          # importing the submission failed (load_inline compile errors, import errors)
    RUN = "run"              # constructing or calling ModelNew crashed, hung or misbehaved
    CORRECTNESS = "correctness"  # ran, but the outputs differ from the reference
    TIMED = "timed"          # correct and timed: speedup and roofline numbers are set


class ErrorKind(str, Enum):
    NONE = "none"
    EMPTY_CODE = "empty_code"
    CODE_TOO_LARGE = "code_too_large"
    NOT_UTF8 = "not_utf8"
    SYNTAX_ERROR = "syntax_error"
    NO_MODEL_NEW = "no_model_new"
    FORBIDDEN_PATTERN = "forbidden_pattern"
    NO_KERNEL = "no_kernel"
    BUILD_ERROR = "build_error"
    BUILD_TIMEOUT = "build_timeout"
    RUNTIME_ERROR = "runtime_error"
    CRASH = "crash"                  # killed by a signal or exited without a report
    RUN_TIMEOUT = "run_timeout"
    OUTPUT_MISMATCH = "output_mismatch"  # count, shape, dtype, NaN/inf pattern or values
    LOW_KERNEL_SHARE = "low_kernel_share"  # correct, but its own kernels ran less than the minimum share
    TIMING_INVALID = "timing_invalid"    # the timing report contradicts the judge's clock, or was forged (not the runner's)
    INTERNAL = "internal"            # the judge itself failed (reference crashed, ...): not the candidate's fault


@dataclass
class Verdict:
    task_id: str
    stage: str
    correct: bool = False
    error_kind: str = ErrorKind.NONE.value
    feedback: str = ""
    speedup: float | None = None
    t_ref_ms: float | None = None
    t_new_ms: float | None = None
    t_min_ms: float | None = None
    roofline_frac: float | None = None
    ref_roofline_frac: float | None = None
    bound: str | None = None            # "compute" | "memory"
    suspicious: bool = False
    roofline_violation: bool = False
    device_name: str | None = None
    flops: float | None = None
    bytes_moved: float | None = None
    trials_passed: int = 0
    policy: str | None = None           # the compute rule (compute_policy.py): "strict" | "kernelbench"
    # share of the submission's device time (CPU time on the CPU device) inside its own kernels, from a
    # few calls after the timing; details["kernel_time"] has the breakdown
    kernel_share: float | None = None
    timings: dict = field(default_factory=dict)  # build_s, run_s, reference_s, queue_s, total_s
    details: dict = field(default_factory=dict)  # mismatch numbers, timed-call counts, ...

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def compiled(self) -> bool:
        return self.stage in (Stage.RUN.value, Stage.CORRECTNESS.value, Stage.TIMED.value)


def finish(v: Verdict, cfg, profile: dict, passed: int, mismatch: dict | None, times_ms: list | None,
           kernel_time: dict | None = None) -> Verdict:
    """The verdict once the outputs were compared: the task's numbers from its profile (t_ref, FLOPs,
    bytes, roofline), then wrong outputs (correctness), or the speedup, the flags and the share of the
    time in the submission's own kernels (timed). `cfg` is the JudgeConfig."""
    v.device_name, v.flops, v.bytes_moved = profile["device_name"], profile["flops"], profile["bytes"]
    v.t_ref_ms, v.t_min_ms, v.bound = profile["t_ref_ms"], profile["t_min_ms"], profile["bound"]
    v.ref_roofline_frac = profile["ref_roofline_frac"]
    v.trials_passed = passed
    if mismatch:
        mm = mismatch
        v.stage, v.error_kind = Stage.CORRECTNESS.value, ErrorKind.OUTPUT_MISMATCH.value
        where = "recheck of timed outputs" if "recheck" in mm else f"trial {mm.get('trial', 0) + 1} of {cfg.correctness_trials}"
        v.feedback = fb.clip(f"Wrong output ({where}): {mm['message']}", cfg.feedback_max_chars)
        v.details["mismatch"] = mm
        return v
    t_new = statistics.median(times_ms)
    v.stage, v.correct = Stage.TIMED.value, True
    v.t_new_ms = t_new
    v.speedup = v.t_ref_ms / t_new
    v.roofline_frac = v.t_min_ms / t_new if v.t_min_ms else None
    v.suspicious = v.speedup > cfg.suspicious_speedup
    v.roofline_violation = bool(v.t_min_ms) and t_new < v.t_min_ms * cfg.roofline_violation_factor
    v.details.update({"timed_calls": len(times_ms), "ref_calls": profile.get("ref_calls"),
                      "timing_spread": spread(times_ms)})
    v.feedback = fb.timed_summary(v.speedup, t_new, v.t_ref_ms, v.roofline_frac, v.bound, v.suspicious,
                                  v.roofline_violation)
    if kernel_time:
        v.kernel_share = kernel_time["share"]
        v.details["kernel_time"] = kernel_time
        v.feedback += " " + fb.kernel_share_line(kernel_time, cfg.device)
    if v.policy == KERNELBENCH and cfg.min_kernel_share > 0 and (v.kernel_share or 0.0) < cfg.min_kernel_share:
        v.stage, v.correct, v.error_kind = Stage.RUN.value, False, ErrorKind.LOW_KERNEL_SHARE.value
        v.details["speedup_if_accepted"], v.speedup = v.speedup, None
        v.feedback += (f" Your own kernels must take at least {100 * cfg.min_kernel_share:.0f}% of the time on this "
                       "server" + ("" if kernel_time else " (it could not be measured)") + ": do more of the work "
                       "in them, not only a small step around PyTorch's.")
    return v


def spread(times: list) -> float:
    """(p90 - p10) / median of the timed calls."""
    q = sorted(times)
    lo, hi = q[len(q) // 10], q[(9 * len(q)) // 10]
    return (hi - lo) / statistics.median(q) if q else 0.0
