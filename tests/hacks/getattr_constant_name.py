"""Hack: getattr(torch, "relu"): no call of the form torch.relu(...) in the source.
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "aten.relu" (runtime watch on forward).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


_act = getattr(torch, "relu")


class ModelNew(nn.Module):
    def forward(self, x):
        return _act(x)
