"""Hack: return a lazy object (not a tensor) that runs the kernel only when the harness converts it, after the
timed region.
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "forward must return torch.Tensor".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class Deferred:
    # Looks like a sequence: torch.as_tensor(obj), called on it after the timed region, computes the rows.

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return self.x.shape[0]

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return _ops.relu(self.x[i]).tolist()


class ModelNew(nn.Module):
    def forward(self, x):
        return Deferred(x)
