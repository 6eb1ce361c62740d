"""level2/1_Conv2D_ReLU_BiasAdd: nn.Conv2d in Python, ReLU + per-channel bias fused, 4D packed accessors.

Styles: torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> / .packed_accessor32,
a 3D grid (blockIdx.z = n * C + c), bias of shape (C, 1, 1) read with .view({-1}), TORCH_CHECK on
bias.numel(), c10/cuda/CUDAGuard.h with c10::cuda::CUDAGuard, cudaGetLastError.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_bias_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

__global__ void relu_bias_kernel(const torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> x,
                                 const float* __restrict__ bias,
                                 torch::PackedTensorAccessor32<float, 4, torch::RestrictPtrTraits> y) {
    const int C = x.size(1);
    const int n = blockIdx.z / C, c = blockIdx.z % C;
    const int h = blockIdx.y * blockDim.y + threadIdx.y;
    const int w = blockIdx.x * blockDim.x + threadIdx.x;
    if (h < x.size(2) && w < x.size(3)) {
        y[n][c][h][w] = fmaxf(x[n][c][h][w], 0.f) + bias[c];
    }
}

torch::Tensor relu_bias_cuda(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 4, "NCHW expected");
    TORCH_CHECK(bias.numel() == x.size(1), "one bias per channel");
    c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    auto b = bias.contiguous().view({-1});
    dim3 block(32, 8);
    dim3 grid((x.size(3) + 31) / 32, (x.size(2) + 7) / 8, x.size(0) * x.size(1));
    relu_bias_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.packed_accessor32<float, 4, torch::RestrictPtrTraits>(), b.data_ptr<float>(),
        y.packed_accessor32<float, 4, torch::RestrictPtrTraits>());
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));
    return y;
}
"""

relu_bias_cpp = "torch::Tensor relu_bias_cuda(torch::Tensor x, torch::Tensor bias);"

relu_bias = load_inline(name="rs_l2_1_relu_bias", cpp_sources=relu_bias_cpp, cuda_sources=relu_bias_source,
                        functions=["relu_bias_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(ModelNew, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return relu_bias.relu_bias_cuda(self.conv(x), self.bias)
