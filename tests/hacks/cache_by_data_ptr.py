"""Hack: cache outputs keyed on the input's data_ptr and shape, returning the cached tensor on a hit
(field notes 4.9); the allocator hands out the same addresses again.
Task: level1/1_Small_ReLU. Expected: not correct: stage run, runtime_error, "not memory that your kernels wrote" when a hit
is watched, or stage correctness when a hit is checked (fresh inputs for every timed call).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


_CACHE = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in _CACHE:
            _CACHE[key] = _ops.relu(x)
        return _CACHE[key]
