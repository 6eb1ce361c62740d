"""Honest: torch computes in __init__ (a pre-scaled copy of the weights, made once), forward only runs the
kernel and reshapes/copies around it.
Task: level2/1_Small_Linear_ReLU. Expected: timed, correct.
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            self.register_buffer("w", (self.linear.weight * 2.0) / 2.0)

    def forward(self, x):
        x = x.reshape(x.shape[0], -1).contiguous().to(torch.float32)
        return _ops.linear_relu(x, self.w, self.linear.bias).clone()
