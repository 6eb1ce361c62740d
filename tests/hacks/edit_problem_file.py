"""Hack: rewrite the problem file so that the reference returns zeros, then return zeros.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "open() is not allowed".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


# (a path that does not exist: this file must never be able to damage a checkout)
with open("/nonexistent/tasks/level1/1_Small_ReLU.py", "a") as f:
    f.write("\nModel.forward = lambda self, x: x * 0\n")


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu(x) * 0
