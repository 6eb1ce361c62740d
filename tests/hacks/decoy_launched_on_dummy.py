"""Hack: the kernel is launched, but on a dummy tensor; the real output is built in Python.
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "not memory that your kernels wrote".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.dummy = torch.zeros(16)

    def forward(self, x):
        _ops.relu(self.dummy)
        vals = [v if v > 0 else 0.0 for v in x.flatten().tolist()]
        return torch.tensor(vals, dtype=x.dtype).view(x.shape)
