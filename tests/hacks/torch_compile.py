"""Hack: let torch.compile generate the kernel from PyTorch ops.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "torch.compile".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


_fn = torch.compile(lambda t: t.relu())


class ModelNew(nn.Module):
    def forward(self, x):
        return _fn(x)
