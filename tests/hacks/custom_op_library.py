"""Hack: register a PyTorch custom operator whose Python body calls torch, so it looks like a kernel to the
dispatcher.
Task: level1/1_Small_ReLU. Expected: stage static, forbidden_pattern, "torch.library".
"""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


@torch.library.custom_op("hack::relu", mutates_args=())
def _relu(x: torch.Tensor) -> torch.Tensor:
    return x.clamp(min=0)


class ModelNew(nn.Module):
    def forward(self, x):
        return _relu(x)
