"""Honest: the kernel runs on a transposed copy and the output is a non-contiguous (transposed) view.
Task: level1/1_Small_ReLU. Expected: timed, correct.
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu(x.t().contiguous()).t()
