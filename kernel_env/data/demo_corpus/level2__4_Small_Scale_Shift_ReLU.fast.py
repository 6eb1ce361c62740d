# Plan: one fused pass, vectorisable, built with -O3.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
// relu(x * scale + shift) in one pass: one read, one write, no temporaries
torch::Tensor scale_shift_relu(torch::Tensor x, torch::Tensor shift, double scale) {
    x = x.contiguous();
    shift = shift.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = shift.numel(), R = x.numel() / C;
    const float* px = x.data_ptr<float>();
    const float* pb = shift.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const float s = (float)scale;
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
            const float v = px[r * C + c] * s + pb[c];
            py[r * C + c] = v > 0.0f ? v : 0.0f;
        }
    return y;
}
"""
ext = load_inline(name="demo_ssr_fast", cpp_sources=cpp_src, functions=["scale_shift_relu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.shift = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale_shift_relu(x, self.shift, self.scale)
