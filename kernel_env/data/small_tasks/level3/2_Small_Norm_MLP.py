import torch
import torch.nn as nn


class Model(nn.Module):
    """A pre-norm residual MLP block: x + W2(gelu(W1(layernorm(x))))."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


batch_size = 64
dim = 256
hidden = 512


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, hidden]
