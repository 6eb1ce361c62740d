# Plan: one fused pass, vectorisable, built with -O3.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
// relu(x + bias) * scale in one pass: one read, one write, no temporaries
torch::Tensor bias_relu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
    x = x.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = bias.numel(), R = x.numel() / C;
    const float* px = x.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const float s = (float)scale;
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
            const float v = px[r * C + c] + pb[c];
            py[r * C + c] = (v > 0.0f ? v : 0.0f) * s;
        }
    return y;
}
"""
ext = load_inline(name="demo_brs_fast", cpp_sources=cpp_src, functions=["bias_relu_scale"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.bias_relu_scale(x, self.bias, self.scale)
