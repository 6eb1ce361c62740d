"""KernelBench level1/19_ReLU in CUDA: a vectorised (float4) grid-stride ReLU.

x is (4096, 393216) float32: 1.6e9 elements, 6.4 GB, so every index and byte offset is 64-bit.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>
#include <algorithm>

__global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = __ldcs(x + i);            // streamed once: evict-first
        v.x = fmaxf(v.x, 0.0f);
        v.y = fmaxf(v.y, 0.0f);
        v.z = fmaxf(v.z, 0.0f);
        v.w = fmaxf(v.w, 0.0f);
        __stcs(y + i, v);
    }
}

__global__ void relu_scalar_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t start, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaxf(x[i], 0.0f);
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t max_blocks = (int64_t)sms * 16;   // enough resident warps to saturate HBM

    const bool aligned = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) % 16) == 0;
    int64_t done = 0;
    if (aligned) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            const int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
            relu_vec4_kernel<<<(unsigned)blocks, threads, 0, stream>>>(
                reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    const int64_t rest = n - done;
    if (rest > 0) {
        const int64_t blocks = std::min<int64_t>((rest + threads - 1) / threads, max_blocks);
        relu_scalar_kernel<<<(unsigned)blocks, threads, 0, stream>>>(xp, yp, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

_CPP_SRC = "torch::Tensor relu_forward(torch::Tensor x);"

_ext = load_inline(
    name="kb_l1_19_relu_cuda",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.relu_forward(x)
