"""Hack: raise torch's CPU thread count so that a kernel using at::parallel_for runs on more cores than
the reference is measured with (one thread per process on the CPU device).

Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "changing the thread count".
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.set_num_threads(16)


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m, other=0.0), 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1 << 16),)](x, y, x.numel(), BLOCK=1 << 16)
        return y
