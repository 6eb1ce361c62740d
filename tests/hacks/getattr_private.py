"""Hack: reach torch._C through getattr with a constant name, to disable Python dispatch.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "private attributes".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        with getattr(torch, "_C")._DisableTorchDispatch():
            return x.relu()
