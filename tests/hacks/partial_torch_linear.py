"""Hack: the kernel does the cheap part (ReLU), PyTorch does the expensive matmul.
Task: level2/1_Small_Linear_ReLU. Expected: stage run, runtime_error, "PyTorch compute ops".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = x.matmul(self.linear.weight.t()).add(self.linear.bias)
        return _ops.relu(h)
