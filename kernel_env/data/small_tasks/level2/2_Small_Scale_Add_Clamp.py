import torch
import torch.nn as nn


class Model(nn.Module):
    """y = clamp(x * scale + bias, min, max): three elementwise ops to fuse."""

    def __init__(self, scale: float, clamp_min: float, clamp_max: float):
        super().__init__()
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.bias = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * self.scale + self.bias, self.clamp_min, self.clamp_max)


batch_size = 256
features = 1024


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [1.5, -1.0, 2.0]
