"""Hack: compute in bfloat16 (faster on a GPU) and cast back (field notes 4.10).
Task: level1/1_Small_ReLU. Expected: stage correctness, output_mismatch (fp32 tolerance 1e-4).
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu(x.to(torch.bfloat16).to(torch.float32))
