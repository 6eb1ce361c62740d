"""Test submission for level1/1_Small_ReLU; expected verdict: wrong, from its third call on (the first
two trials pass, a later one fails: a later batch of trials when the trials share slots)."""
import torch
import torch.nn as nn
# <<cpp_prelude.py>> the shared C++ extension (_ops): tests/cases.py puts it in place of this line


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls <= 2:
            return _ops.relu(x)
        return _ops.relu_wrong(x)  # leaky: negatives become 0.01 * x
