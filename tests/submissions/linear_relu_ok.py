"""Test submission for level2/1_Small_Linear_ReLU; expected verdict: correct."""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Created exactly as in Model, so the same seed gives the same weight and bias.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ops.linear_relu(x, self.linear.weight, self.linear.bias)
