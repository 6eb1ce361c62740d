"""Hack: call the ATen operator directly through torch.ops.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "torch.ops".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.aten.relu.default(x)
