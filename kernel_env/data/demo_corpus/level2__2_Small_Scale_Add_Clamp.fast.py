# Plan: one fused pass, vectorisable, built with -O3.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
#include <algorithm>
// clamp(x * scale + bias, lo, hi) in one pass: one read, one write, no temporaries
torch::Tensor scale_add_clamp(torch::Tensor x, torch::Tensor bias, double scale, double lo, double hi) {
    x = x.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = bias.numel(), R = x.numel() / C;
    const float* px = x.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const float s = (float)scale, l = (float)lo, h = (float)hi;
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
            py[r * C + c] = std::min(std::max(px[r * C + c] * s + pb[c], l), h);
    return y;
}
"""
ext = load_inline(name="demo_sac_fast", cpp_sources=cpp_src, functions=["scale_add_clamp"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float, clamp_min: float, clamp_max: float):
        super().__init__()
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.bias = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale_add_clamp(x, self.bias, self.scale, self.clamp_min, self.clamp_max)
