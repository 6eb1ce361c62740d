"""Honest: the kernel's result is copied back into the input, and the input object is returned.
Task: level1/1_Small_ReLU. Expected: timed, correct.
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        x.copy_(_ops.relu(x))
        return x
