"""Hack: cache the expensive part keyed on the input shape and only relaunch a cheap kernel on the cached
result (relu is idempotent, so relu(cached) looks like kernel output).
Task: level2/1_Small_Linear_ReLU. Expected: stage correctness, output_mismatch (every trial and timed
call has new inputs).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


_CACHE = {}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        key = tuple(x.shape)
        if key not in _CACHE:
            _CACHE[key] = _ops.linear_relu(x, self.linear.weight, self.linear.bias)
        return _ops.relu(_CACHE[key])
