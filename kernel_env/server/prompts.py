"""The problem prompt a reset returns: what to write, the reference, the submission format with a
short example, the device it is timed on and the task's roofline numbers.

Pure string building (no I/O) so it can be tested without a judge.
"""
from __future__ import annotations

from ..compute_policy import RULES, STRICT

_CUDA_EXAMPLE = '''```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int64_t n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""
ext = load_inline(name="add_ext", cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=cuda_src, functions=["add"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.add(a.contiguous(), b.contiguous())
```'''

_CPU_EXAMPLE = '''```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    a = a.contiguous(); b = b.contiguous();
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>(); const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0, n = a.numel(); i < n; ++i) po[i] = pa[i] + pb[i];
    return out;
}
"""
ext = load_inline(name="add_ext", cpp_sources=cpp_src, functions=["add"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.add(a, b)
```'''


def _fmt_ms(v) -> str:
    return "unknown" if v is None else f"{v:.4g} ms"


def _timing_section(profile: dict | None, device: str) -> str:
    if not profile:
        return (f"It will be timed on the server's {device.upper()} device "
                "(device details and roofline numbers are not available right now).")
    name = profile.get("device_name") or device
    lines = [f"It will be timed on: {name}.",
             f"- Reference (the PyTorch `Model` below) takes {_fmt_ms(profile.get('t_ref_ms'))} per call."]
    t_min = profile.get("t_min_ms")
    if t_min is not None:
        work = []
        if profile.get("flops") is not None:
            work.append(f"{profile['flops'] / 1e9:.3g} GFLOP")
        if profile.get("bytes") is not None:
            work.append(f"{profile['bytes'] / 1e6:.3g} MB moved")
        bound = profile.get("bound")
        lines.append(f"- Roofline floor (the fastest this device could possibly run it): {_fmt_ms(t_min)}"
                     + (f", {bound}-bound" if bound else "") + (f" ({', '.join(work)})" if work else "") + ".")
        frac = profile.get("ref_roofline_frac")
        if frac is not None:
            lines.append(f"- The reference reaches {100 * frac:.3g}% of that floor; "
                         "times below the floor are rejected as measurement tricks.")
    return "\n".join(lines)


def build_problem(task_id: str, reference_source: str, profile: dict | None, device: str,
                  max_turns: int, policy: str = STRICT) -> str:
    """The full first user message for one task.

    `profile` is the judge's task_profile (or None if it could not be computed); `device` is
    "cuda" or "cpu" (which kernel language and example to show); `policy` the compute rule in force
    for the task (kernel_env/compute_policy.py), stated in the rules.
    """
    if device == "cuda":
        kind = ("a custom CUDA kernel compiled with `torch.utils.cpp_extension.load_inline` "
                "(`__global__` functions in `cuda_sources`), or a Triton kernel (`@triton.jit`)")
        example = _CUDA_EXAMPLE
    else:
        kind = ("a custom C++ kernel compiled with `torch.utils.cpp_extension.load_inline` "
                "(`cpp_sources`; this server measures on the CPU)")
        example = _CPU_EXAMPLE
    hw = "GPU" if device == "cuda" else "CPU"
    return f"""You are an expert in writing fast {hw} kernels. Make the PyTorch model below faster.

Task {task_id}. Write `class ModelNew(nn.Module)`: a drop-in replacement for `Model` with the same
constructor arguments and the same `forward` signature, returning the same outputs (within
tolerance) for the inputs that `get_inputs()` produces. Implement the computation with {kind}.

Rules ({policy} policy): {RULES[policy]}; no try/except, no threads or subprocesses, no patching
of torch or of timers, and ModelNew must not inherit from or call `Model`. Outputs are compared on
fresh random inputs, and timing runs in a separate process.

{_timing_section(profile, device)}

Reference:
```python
{reference_source.rstrip()}
```

Submission format: reply with exactly one ```python code block holding the complete module
(imports, kernel source, the `load_inline`/Triton code and `class ModelNew`). Do not redefine
`Model`, `get_inputs` or `get_init_inputs`. A minimal example of the format (an elementwise add):

{example}

You have {max_turns} attempt{'s' if max_turns != 1 else ''}. After each one you get feedback (build errors,
wrong outputs, or the measured speedup); each attempt is scored on its own: correct first, then faster.
"""
