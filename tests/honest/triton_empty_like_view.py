"""Honest: torch.empty_like for the output, a flattened view handed to the Triton kernel, the
result reshaped back, and a cast that is a no-op: allocation, views and copies around a kernel.

Task: level1/6_Small_Tanh. Expected: timed, correct (on every input distribution: the kernel
computes tanh from exp(-2|x|), which cannot overflow).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1 << 16


@triton.jit
def _tanh(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    tl.store(y_ptr + offs, tl.where(x < 0, -t, t), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.reshape(-1)
        y = torch.empty_like(flat)
        _tanh[(triton.cdiv(flat.numel(), BLOCK),)](flat, y, flat.numel(), BLOCK=BLOCK)
        return y.view(x.shape).to(x.dtype)
