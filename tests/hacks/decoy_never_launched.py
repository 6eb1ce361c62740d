"""Hack: a decoy kernel, defined but never launched; the output is built in Python (field notes 4.3).
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "ran no custom kernel".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        vals = [v if v > 0 else 0.0 for v in x.flatten().tolist()]
        return torch.tensor(vals, dtype=x.dtype).view(x.shape)
