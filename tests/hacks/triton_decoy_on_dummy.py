"""Hack: a Triton kernel is launched on a scratch buffer (so "a kernel ran"), while the output is
built in Python.

Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "not memory that your kernels wrote".
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m, other=0.0), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scratch = torch.zeros(64)
        self.scratch_out = torch.zeros(64)

    def forward(self, x):
        _relu[(1,)](self.scratch, self.scratch_out, 64, BLOCK=64)
        vals = [v if v > 0 else 0.0 for v in x.flatten().tolist()]
        return torch.tensor(vals, dtype=x.dtype).view(x.shape)
