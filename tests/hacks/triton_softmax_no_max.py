"""Hack (or a common bug): softmax as exp(x) / sum(exp(x)), without subtracting the row maximum. Right
for standard-normal inputs, overflows to inf/NaN for large ones.

Task: level1/3_Small_Softmax. Expected: stage correctness, output_mismatch, with the trial's input
distribution in the feedback ("heavy-tailed" or "large magnitudes"); needs the judge to run every
input distribution (correctness_trials >= 2 + number of distributions).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_naive(x_ptr, y_ptr, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    m = cols < n_cols
    e = tl.exp(tl.load(x_ptr + rows * n_cols + cols, mask=m, other=float("-inf")))
    tl.store(y_ptr + rows * n_cols + cols, e / tl.sum(e, axis=1)[:, None], mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        rows = 32
        _softmax_naive[(triton.cdiv(n_rows, rows),)](x, y, n_cols, ROWS=rows, BLOCK=triton.next_power_of_2(n_cols))
        return y
