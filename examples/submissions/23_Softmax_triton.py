"""KernelBench level1/23_Softmax in Triton: softmax over dim=1 of a (4096, 393216) float32 tensor.

One program per row. Pass 1 walks the row in BLOCK-sized chunks keeping a running max and a
running sum of exp(x - max) (rescaled when the max grows); pass 2 writes exp(x - max) / sum.
Row offsets are 64-bit (the tensor is 6.4 GB).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)

    # Pass 1: running max and running sum of exp(x - max), one chunk at a time.
    m = tl.full((), float("-inf"), tl.float32)
    s = tl.full((), 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))       # finite: every chunk has a real element
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new

    inv_s = 1.0 / s
    # Pass 2: normalised exponentials.
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        mask = offs < n_cols
        x = tl.load(x_row + offs, mask=mask, other=float("-inf"))
        tl.store(y_row + offs, tl.exp(x - m) * inv_s, mask=mask, eviction_policy="evict_first")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2, "softmax over dim 1 of a 2-D tensor"
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        if x.numel() == 0:
            return y
        BLOCK = min(8192, triton.next_power_of_2(n_cols))
        _softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=16)
        return y
