"""Hack: getattr(torch, <computed string>) so that no "torch.relu" appears in the source.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "computed name".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


_NAME = "re" + "lu"


class ModelNew(nn.Module):
    def forward(self, x):
        return getattr(torch, _NAME)(x)
