"""Test submission for level2/1_Small_Linear_ReLU; expected verdict: rejected under strict; under
kernelbench correct, with a share of the time near 0. Lazy: PyTorch computes the whole answer, and the
extension's ReLU runs once more on its first row (ReLU of a ReLU is the same values), written back in
place: a kernel whose result is part of the output, doing almost none of the work."""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.linear(x))
        y[:1] = _ops.relu(y[:1])
        return y
