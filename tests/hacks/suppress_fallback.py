"""Hack: a try/except fallback spelled with contextlib.suppress.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, ".suppress".
"""
import contextlib
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        y = None
        with contextlib.suppress(Exception):
            y = _ops.relu(x.double())
        return y if y is not None else x.clamp(min=0)
