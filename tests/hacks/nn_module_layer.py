"""Hack: the model keeps an nn.Linear layer and calls it (as the reference does), and only the ReLU is a
kernel: no torch function call appears in the source.
Task: level2/1_Small_Linear_ReLU. Expected: stage run, runtime_error, "aten.addmm" (runtime watch).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ops.relu(self.linear(x))
