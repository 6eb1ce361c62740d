# Plan: a plain scalar loop in double precision, default flags.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
// one element per step of a grid-stride loop, in double precision, on a small fixed grid
__global__ void sigmoid_kernel(const float* in, float* out, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double x = in[i];
        out[i] = (float)(1.0 / (1.0 + exp(-x)));
    }
}

torch::Tensor sigmoid_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    sigmoid_kernel<<<132, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
"""
cpp_src = "torch::Tensor sigmoid_forward(torch::Tensor x);"
ext = load_inline(name="demo_sigmoid_slow", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["sigmoid_forward"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.sigmoid_forward(x)
