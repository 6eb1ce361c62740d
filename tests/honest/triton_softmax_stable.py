"""Honest: a Triton softmax that subtracts the row maximum, right on every input distribution
(heavy tails, 1024x magnitudes, ties and zeros).

Task: level1/3_Small_Softmax. Expected: timed, correct.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n_cols
    x = tl.load(x_ptr + rows * n_cols + cols, mask=m, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(y_ptr + rows * n_cols + cols, e / tl.sum(e, axis=1)[:, None], mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        rows = 32
        _softmax[(triton.cdiv(n_rows, rows),)](x, y, n_cols, ROWS=rows, BLOCK=triton.next_power_of_2(n_cols))
        return y
