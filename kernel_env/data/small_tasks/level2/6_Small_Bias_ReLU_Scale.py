import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x + bias) * scale: three elementwise ops to fuse."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bias) * self.scale


batch_size = 256
features = 1024


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [2.0]
