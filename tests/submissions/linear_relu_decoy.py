"""Test submission for level2/1_Small_Linear_ReLU; expected verdict: rejected under both policies. PyTorch
computes the whole answer (linear, ReLU) while the extension's ReLU runs on a dummy tensor whose result
is thrown away: under strict, PyTorch compute ops; under kernelbench, an output computed from nothing a
kernel produced."""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _ops.relu(torch.randn(16))
        return torch.relu(self.linear(x))
