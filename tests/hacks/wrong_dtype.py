"""Hack: return float64.
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch, "dtype".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu(x).double()
