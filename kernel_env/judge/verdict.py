"""The verdict on one submission: plain data, built by the judge in one place (service.py)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


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
    timings: dict = field(default_factory=dict)  # build_s, run_s, reference_s, queue_s, total_s
    details: dict = field(default_factory=dict)  # mismatch numbers, timed-call counts, ...

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def compiled(self) -> bool:
        return self.stage in (Stage.RUN.value, Stage.CORRECTNESS.value, Stage.TIMED.value)
