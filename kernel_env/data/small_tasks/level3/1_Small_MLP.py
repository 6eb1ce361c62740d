import torch
import torch.nn as nn


class Model(nn.Module):
    """A three-layer MLP with ReLU between layers."""

    def __init__(self, input_size: int, hidden: list, output_size: int):
        super().__init__()
        layers = []
        cur = input_size
        for h in hidden:
            layers += [nn.Linear(cur, h), nn.ReLU()]
            cur = h
        layers.append(nn.Linear(cur, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


batch_size = 32
input_size = 256
hidden = [512, 256]
output_size = 64


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden, output_size]
