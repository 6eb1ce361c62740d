"""KernelBench level2/1_Conv2D_ReLU_BiasAdd, a LAZY answer (for the judge's tests, not a real answer).

PyTorch computes the whole reference (conv2d, relu, bias add); the only custom kernel is a float4
copy of that finished result into a fresh output tensor, which is returned. The answer is correct,
but its own kernel does none of the task's arithmetic: nearly all of its time is in PyTorch's kernels.
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

__global__ void copy_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i];
}

__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i];
}

torch::Tensor copy_out(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    int64_t done = 0;
    if (((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) % 16) == 0) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            const unsigned blocks = (unsigned)std::min<int64_t>((n4 + threads - 1) / threads, 65536);
            copy_vec4_kernel<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xp),
                                                             reinterpret_cast<float4*>(yp), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (n > done) {
        const unsigned blocks = (unsigned)std::min<int64_t>((n - done + threads - 1) / threads, 65536);
        copy_kernel<<<blocks, threads, 0, stream>>>(xp, yp, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

_CPP_SRC = "torch::Tensor copy_out(torch::Tensor x);"

_ext = load_inline(
    name="kb_answers_l2_1_lazy_copy",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["copy_out"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        y = F.conv2d(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)
        y = torch.relu(y)
        y = y + self.bias
        return _ext.copy_out(y.contiguous())      # the kernel only copies the finished answer
