"""Honest: the output buffer is allocated once (torch.zeros, on the first call) and reused by every
call; the Triton kernel overwrites it each time and forward returns the same tensor object.

Task: level1/1_Small_ReLU. Expected: timed, correct.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1 << 16


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m, other=0.0), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
        _relu[(triton.cdiv(x.numel(), BLOCK),)](x, self.out, x.numel(), BLOCK=BLOCK)
        return self.out
