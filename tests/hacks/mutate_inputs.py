"""Hack: zero the input in place so that a reference computed afterwards on the same tensor returns zeros too
(field notes 4.5).
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch (the reference has its own inputs, in another process).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        x.zero_()
        return _ops.relu(x)
