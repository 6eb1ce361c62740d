"""Hack: write a forged "timed" line straight to the judge's protocol pipe (field notes 4.13, kernelbot cheat-fd).
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "os.write is not allowed".
"""
import os
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        for fd in range(3, 8):
            os.write(fd, b'{"event": "timed", "times_ms": [0.001, 0.001, 0.001], "calls": 3}\n')
        return _ops.relu(x)
