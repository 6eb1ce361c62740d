"""Honest (GPU-only): an autotuned Triton kernel. The autotuner benchmarks its configurations on the
first call with torch ops of its own (inside forward): those are not the submission computing.

Task: level1/1_Small_ReLU on the cuda device. Expected: timed, correct.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 4096}, num_warps=8)],
                 key=["n"])
@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m, other=0.0), 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y
