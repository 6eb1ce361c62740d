"""Hack: Tensor.sum does the reduction.
Task: level1/5_Small_Sum_Reduction. Expected: stage run, runtime_error, "aten.sum".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.sum(dim=self.dim, keepdim=True)
