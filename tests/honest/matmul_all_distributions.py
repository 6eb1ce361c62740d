"""Honest: the naive C++ matmul (different summation order from the reference), checked on every input
distribution (large magnitudes make the output 1e6x larger; the tolerance follows the output's scale).
Task: level1/2_Small_Matmul. Expected: timed, correct.
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ops.matmul(A, B)
