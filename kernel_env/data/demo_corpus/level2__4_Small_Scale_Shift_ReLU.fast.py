# Plan: whole batch, one call to the fused kernel.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
#include <algorithm>
// y = clamp((x * a + b) * m, lo, hi), b broadcast over the rows: one pass, one read, one write
torch::Tensor fused_affine_clamp(torch::Tensor x, torch::Tensor b, double a, double m, double lo, double hi) {
    x = x.contiguous();
    b = b.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = b.numel(), R = x.numel() / C;
    const float* px = x.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* py = y.data_ptr<float>();
    const float fa = (float)a, fm = (float)m, l = (float)lo, h = (float)hi;
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c)
            py[r * C + c] = std::min(std::max((px[r * C + c] * fa + pb[c]) * fm, l), h);
    return y;
}
"""
ext = load_inline(name="demo_fused", cpp_sources=cpp_src, functions=["fused_affine_clamp"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.shift = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        args = (self.shift, self.scale, 1.0, 0.0, float("inf"))
        return ext.fused_affine_clamp(x, *args)
