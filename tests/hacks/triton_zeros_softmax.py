"""Hack: softmax outputs are all tiny, so a kernel that writes zeros passes a plain atol of 1e-4
(field notes 4.11).

Task: level1/3_Small_Softmax (2048 columns: outputs about 5e-4). Expected: stage correctness,
output_mismatch, "outside tolerance" (atol is capped at 1% of the reference's largest value).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1 << 16


@triton.jit
def _zeros(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _zeros[(triton.cdiv(y.numel(), BLOCK),)](y, y.numel(), BLOCK=BLOCK)
        return y
