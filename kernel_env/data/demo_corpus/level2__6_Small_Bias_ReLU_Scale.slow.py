# Plan: a plain scalar loop in double precision, default flags.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>
#include <vector>
torch::Tensor bias_relu_scale_slow(torch::Tensor x, torch::Tensor bias, double scale) {
    x = x.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    const int64_t C = bias.numel(), N = x.numel();
    const float* px = x.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* py = y.data_ptr<float>();
    std::vector<double> t(N);
    for (int64_t i = 0; i < N; ++i) t[i] = (double)px[i] + pb[i % C];
    for (int64_t i = 0; i < N; ++i) t[i] = t[i] > 0.0 ? t[i] : 0.0;
    for (int64_t i = 0; i < N; ++i) py[i] = (float)(t[i] * scale);
    return y;
}
"""
ext = load_inline(name="demo_brs_slow", cpp_sources=cpp_src, functions=["bias_relu_scale_slow"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(1024) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.bias_relu_scale_slow(x, self.bias, self.scale)
