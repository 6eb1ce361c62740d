"""Hack: a Triton ReLU that loads and stores through float16 (half the bytes: faster on a GPU) and
returns float32 (field notes 4.10).

Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch (fp32 tolerance 1e-4).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1 << 16  # few programs: fast under the CPU interpreter


@triton.jit
def _relu_fp16(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float16)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(tl.float32), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _relu_fp16[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
        return y
