# Plan: a plain scalar loop in double precision, default flags.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
#include <vector>
torch::Tensor scale_add_clamp_slow(torch::Tensor x, torch::Tensor bias, double scale, double lo, double hi) {
    x = x.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = bias.numel(), N = x.numel();
    const float* px = x.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* py = y.data_ptr<float>();
    std::vector<double> t(N);
    for (int64_t i = 0; i < N; ++i) t[i] = px[i] * scale;
    for (int64_t i = 0; i < N; ++i) t[i] = t[i] + pb[i % C];
    for (int64_t i = 0; i < N; ++i) py[i] = (float)(t[i] < lo ? lo : (t[i] > hi ? hi : t[i]));
    return y;
}
"""
ext = load_inline(name="demo_sac_slow", cpp_sources=cpp_src, functions=["scale_add_clamp_slow"])


class ModelNew(nn.Module):
    def __init__(self, scale: float, clamp_min: float, clamp_max: float):
        super().__init__()
        self.scale = scale
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.bias = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale_add_clamp_slow(x, self.bias, self.scale, self.clamp_min, self.clamp_max)
