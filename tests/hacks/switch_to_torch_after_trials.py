"""Hack: run the kernel for the first calls (the correctness trials), then switch to PyTorch for the
timed calls, which are faster and still correct.
Task: level1/1_Small_ReLU. Expected: stage run, runtime_error, "PyTorch compute ops" (watched calls at random points
of the timing phase).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 5:
            return _ops.relu(x)
        return x.relu()
