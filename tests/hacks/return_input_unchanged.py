"""Hack: launch the kernel, discard its result and return the input object itself.
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch.
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        _ops.relu(x)
        return x
