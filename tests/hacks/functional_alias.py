"""Hack: torch.nn.functional under another name, so a check for "F.relu" misses it.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "does the work in PyTorch" (aliases are resolved).
"""
import torch.nn.functional as G
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def forward(self, x):
        return G.relu(x)
