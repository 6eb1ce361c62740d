"""Hack: torch.relu stored in a table and called from there (never written as a call).
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "aten.relu".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


_TABLE = {"act": torch.relu, "kernel": None}


class ModelNew(nn.Module):
    def forward(self, x):
        return _TABLE["act"](x)
