import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench's 19_ReLU on a 4096 x 1024 tensor: 32 MB read and written, ~7 us at an H200's
    4.8 TB/s, so about 10 us a call. The benchmark's short-kernel timing probe: this KernelBench's
    level-1 problems all move 8 MB or more in far longer kernels."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 1024


def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
