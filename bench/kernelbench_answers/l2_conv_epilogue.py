"""KernelBench level2/1_Conv2D_ReLU_BiasAdd, a partial (KernelBench-policy) answer.

The convolution stays in PyTorch (F.conv2d: cuDNN, with the weight of `self.conv` but without its
bias); the conv's own bias, the ReLU and the task's bias add are fused into one CUDA kernel:
  out = relu(acc + conv_bias[c]) + bias[c]
one read and one write of the 1 GB conv output. The reference makes three more passes over it:
PyTorch adds a cuDNN convolution's bias in a separate kernel after the convolution, then relu, then
the broadcast add (about 0.8 + 0.5 + 0.8 ms on an H200 at these sizes).

Layout: conv output (N, C, H, W) contiguous is N*C planes of H*W floats, each with one bias value.
grid.y walks the planes (grid-stride past 65535), grid.x the H*W floats of a plane, as float4 when H*W
is a multiple of 4 and both pointers are 16-byte aligned (126*126 = 15876 = 4 * 3969 here), else as
scalars. All offsets are 64-bit.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>
#include <algorithm>

// relu as torch.relu: negative -> 0, NaN stays NaN
__device__ __forceinline__ float relu_f(float v) { return v < 0.0f ? 0.0f : v; }

__global__ void relu_bias_plane_vec4_kernel(const float4* __restrict__ x, const float* __restrict__ conv_bias,
                                            const float* __restrict__ bias, float4* __restrict__ y,
                                            int64_t planes, int64_t hw4, int64_t C) {
    for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
        const float cb = __ldg(conv_bias + (p % C));
        const float b = __ldg(bias + (p % C));
        const float4* xp = x + p * hw4;
        float4* yp = y + p * hw4;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < hw4;
             i += (int64_t)gridDim.x * blockDim.x) {
            float4 v = __ldcs(xp + i);         // read once: evict-first
            v.x = relu_f(v.x + cb) + b;
            v.y = relu_f(v.y + cb) + b;
            v.z = relu_f(v.z + cb) + b;
            v.w = relu_f(v.w + cb) + b;
            __stcs(yp + i, v);
        }
    }
}

__global__ void relu_bias_plane_kernel(const float* __restrict__ x, const float* __restrict__ conv_bias,
                                       const float* __restrict__ bias, float* __restrict__ y,
                                       int64_t planes, int64_t hw, int64_t C) {
    for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
        const float cb = __ldg(conv_bias + (p % C));
        const float b = __ldg(bias + (p % C));
        const float* xp = x + p * hw;
        float* yp = y + p * hw;
        for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < hw;
             i += (int64_t)gridDim.x * blockDim.x) {
            yp[i] = relu_f(xp[i] + cb) + b;
        }
    }
}

// x: conv output without its bias, (N, C, *spatial) float32 contiguous; conv_bias: the conv's C biases;
// bias: C floats (the task's (C, 1, 1) parameter).
torch::Tensor conv_relu_bias(torch::Tensor x, torch::Tensor conv_bias, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && conv_bias.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && conv_bias.scalar_type() == torch::kFloat32 &&
                bias.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(x.is_contiguous() && conv_bias.is_contiguous() && bias.is_contiguous(), "inputs must be contiguous");
    TORCH_CHECK(x.dim() >= 2, "x must be (N, C, ...)");
    const int64_t N = x.size(0), C = x.size(1);
    TORCH_CHECK(conv_bias.numel() == C && bias.numel() == C, "biases must hold one value per channel");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const int64_t planes = N * C;
    const int64_t hw = n / planes;
    const float* xp = x.data_ptr<float>();
    const float* cbp = conv_bias.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const unsigned gy = (unsigned)std::min<int64_t>(planes, 65535);
    const bool vec = (hw % 4 == 0) &&
        ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) % 16 == 0);
    if (vec) {
        const int64_t hw4 = hw / 4;
        const unsigned gx = (unsigned)std::min<int64_t>((hw4 + threads - 1) / threads, 1024);
        relu_bias_plane_vec4_kernel<<<dim3(gx, gy), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xp), cbp, bp, reinterpret_cast<float4*>(yp), planes, hw4, C);
    } else {
        const unsigned gx = (unsigned)std::min<int64_t>((hw + threads - 1) / threads, 1024);
        relu_bias_plane_kernel<<<dim3(gx, gy), threads, 0, stream>>>(xp, cbp, bp, yp, planes, hw, C);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_CPP_SRC = "torch::Tensor conv_relu_bias(torch::Tensor x, torch::Tensor conv_bias, torch::Tensor bias);"

_ext = load_inline(
    name="kb_answers_l2_1_conv_relu_bias",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["conv_relu_bias"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        # Constructed exactly as Model: same parameters, same order, same values under the same seed.
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        # cuDNN convolution (kept in PyTorch), nn.Conv2d's call for padding_mode="zeros" but without the
        # bias, which PyTorch would add in a pass of its own: the epilogue kernel adds it instead.
        acc = F.conv2d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups)
        cb = c.bias if c.bias is not None else torch.zeros(acc.shape[1], device=acc.device, dtype=acc.dtype)
        return _ext.conv_relu_bias(acc.contiguous(), cb.contiguous(), self.bias.contiguous())
