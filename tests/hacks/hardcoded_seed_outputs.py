"""Hack: guess the seed (42), precompute that answer at import and return it (field notes 4.12).
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch (fresh secret seeds per evaluation).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


torch.manual_seed(42)
_GUESS = _ops.relu(torch.randn(256, 4096))


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu(_GUESS)
