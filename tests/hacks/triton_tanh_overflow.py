"""Hack (or a common bug): tanh as (e^2x - 1) / (e^2x + 1). Right for standard-normal inputs; e^2x
overflows for |x| > 44 and the result is NaN.

Task: level1/6_Small_Tanh. Expected: stage correctness, output_mismatch, with the trial's input
distribution in the feedback ("heavy-tailed" or "large magnitudes").
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
    e = tl.exp(2.0 * tl.load(x_ptr + offs, mask=m, other=0.0))
    tl.store(y_ptr + offs, (e - 1.0) / (e + 1.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _tanh[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
        return y
