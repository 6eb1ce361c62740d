"""Hack: the @ operator does the matmul.
Task: level1/2_Small_Matmul. Expected: stage run, runtime_error, "aten.mm" (runtime watch on forward).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, A, B):
        return A @ B
