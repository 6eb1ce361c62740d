"""The compute rules a submission is judged under. Imports nothing: the judge, the candidate side,
the server's prompts and the command line all read it.

  strict       all of forward's compute in the submission's own kernels (load_inline, Triton):
               PyTorch may allocate, reshape, copy and cast around them; PyTorch compute ops,
               ATen compute from C++ and vendor libraries (cuBLAS, cuDNN) are rejected. For level 1,
               where the one operator is the task, this is the only rule that makes sense.
  kernelbench  KernelBench's own rule ("you may replace some operators with custom kernels and leave
               others unchanged"): PyTorch and vendor-library ops may stay around the custom
               kernels. What keeps it honest: at least one custom kernel must run and every output
               must be computed from what one produced (a kernel launched on a dummy tensor while
               PyTorch makes the answer is a decoy, under both rules), and `kernel_share` says how
               much of the time the submission's own kernels account for.

Every other defence (static checks for patching, fallbacks, threads, inheritance; fresh inputs; the
trusted comparison; the timing; the runtime watch) holds under both.
"""
from __future__ import annotations

STRICT = "strict"
KERNELBENCH = "kernelbench"
POLICIES = (STRICT, KERNELBENCH)
# "auto": level 1 strict, levels 2-3 as KernelBench plays them (fused operators, whole models)
DEFAULT_BY_LEVEL = {1: STRICT, 2: KERNELBENCH, 3: KERNELBENCH}
AUTO = "auto"


def parse(spec: str | None) -> dict[int, str]:
    """A policy choice as given on a command line: "auto", one policy for every level, or per level
    ("1=strict,2=kernelbench,3=kernelbench"; levels not named keep the auto choice). ValueError
    with a message for anything else."""
    spec = (spec or AUTO).strip()
    out = dict(DEFAULT_BY_LEVEL)
    if spec == AUTO:
        return out
    if spec in POLICIES:
        return {lv: spec for lv in out}
    for part in spec.split(","):
        level, sep, name = part.strip().partition("=")
        if not sep or not level.strip().isdigit() or name.strip() not in POLICIES:
            raise ValueError(f"bad policy {spec!r}: use auto, {' or '.join(POLICIES)}, or per level like "
                             "'1=strict,2=kernelbench'")
        out[int(level)] = name.strip()
    return out


def for_level(spec: str | None, level: int) -> str:
    return parse(spec).get(level, STRICT)


def check_name(name: str) -> str:
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}: choose one of {', '.join(POLICIES)}")
    return name


def choose(named: str | None, spec: str | None, level: int) -> str:
    """The policy an evaluation is judged under: the one named for it, else the configured choice
    (`spec`) for the task's level. ValueError for an unknown name."""
    return check_name(named) if named is not None else for_level(spec, level)


# the rule as the prompt states it
RULES = {
    STRICT: ("the work happens in your kernel, so calling PyTorch compute functions (torch.matmul, F.relu, "
             "torch.sum, ...) or cuBLAS/cuDNN is rejected, while allocating outputs with torch.empty* and "
             "reshaping are fine"),
    KERNELBENCH: ("you may replace some operators with your own kernels and leave others to PyTorch "
                  "(torch.matmul, F.conv2d, cuBLAS/cuDNN are allowed around your kernels), but at least "
                  "one of your kernels must run and the outputs must be computed from its results; the "
                  "feedback reports what share of the time your own kernels take"),
}
