"""Hack: return more outputs than the reference.
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch, "returned 2 output(s), expected 1".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        y = _ops.relu(x)
        return y, y
