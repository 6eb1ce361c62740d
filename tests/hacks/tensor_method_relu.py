"""Hack: a tensor method instead of a torch function (x.relu()): the kernel is defined but not used.
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "PyTorch compute ops: aten.relu" (runtime watch on forward).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        return x.relu()
