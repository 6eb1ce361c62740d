# Plan: a plain scalar loop in double precision, default flags.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
#include <vector>
torch::Tensor scale_shift_relu_slow(torch::Tensor x, torch::Tensor shift, double scale) {
    x = x.contiguous();
    shift = shift.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = shift.numel(), N = x.numel();
    const float* px = x.data_ptr<float>();
    const float* pb = shift.data_ptr<float>();
    float* py = y.data_ptr<float>();
    std::vector<double> t(N);
    for (int64_t i = 0; i < N; ++i) t[i] = px[i] * scale;
    for (int64_t i = 0; i < N; ++i) t[i] = t[i] + pb[i % C];
    for (int64_t i = 0; i < N; ++i) py[i] = (float)(t[i] > 0.0 ? t[i] : 0.0);
    return y;
}
"""
ext = load_inline(name="demo_ssr_slow", cpp_sources=cpp_src, functions=["scale_shift_relu_slow"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.shift = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.scale_shift_relu_slow(x, self.shift, self.scale)
