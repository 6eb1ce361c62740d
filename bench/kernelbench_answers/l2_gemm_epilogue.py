"""KernelBench level2/12_Gemm_Multiply_LeakyReLU, a partial (KernelBench-policy) answer.

The GEMM x @ W^T stays in PyTorch (F.linear without its bias: one cuBLAS call, fp32); the epilogue
  out = leaky_relu((acc + b[n]) * multiplier, negative_slope)
is one CUDA kernel: the bias add, the multiply and the LeakyReLU in a single read and write of the
(1024, 8192) GEMM output, where the reference runs the bias in cuBLAS and then two elementwise passes.

Layout: the (M, N) row-major output, grid.y over rows (grid-stride past 65535), grid.x over the
columns of a row, as float4 when N is a multiple of 4 and the pointers are 16-byte aligned, else
scalars. LeakyReLU as torch: v > 0 ? v : v * slope.
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

__device__ __forceinline__ float epi(float acc, float b, float mult, float slope) {
    const float v = (acc + b) * mult;
    return v > 0.0f ? v : v * slope;
}

__global__ void bias_mul_leaky_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ bias,
                                           float4* __restrict__ y, int64_t rows, int64_t n4,
                                           float mult, float slope) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4* xr = x + r * n4;
        float4* yr = y + r * n4;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n4;
             j += (int64_t)gridDim.x * blockDim.x) {
            const float4 a = __ldcs(xr + j);
            const float4 b = __ldg(bias + j);
            float4 o;
            o.x = epi(a.x, b.x, mult, slope);
            o.y = epi(a.y, b.y, mult, slope);
            o.z = epi(a.z, b.z, mult, slope);
            o.w = epi(a.w, b.w, mult, slope);
            __stcs(yr + j, o);
        }
    }
}

__global__ void bias_mul_leaky_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                      float* __restrict__ y, int64_t rows, int64_t n,
                                      float mult, float slope) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
             j += (int64_t)gridDim.x * blockDim.x) {
            y[r * n + j] = epi(x[r * n + j], __ldg(bias + j), mult, slope);
        }
    }
}

// x: GEMM output (M, N) float32 contiguous (no bias yet); bias: N floats.
torch::Tensor gemm_bias_mul_leaky(torch::Tensor x, torch::Tensor bias, double multiplier, double negative_slope) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "x and bias must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && bias.scalar_type() == torch::kFloat32,
                "x and bias must be float32");
    TORCH_CHECK(x.is_contiguous() && bias.is_contiguous(), "x and bias must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "x must have a feature dimension");
    const int64_t n = x.size(-1);
    TORCH_CHECK(bias.numel() == n, "bias must have out_features elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / n;
    const float* xp = x.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const float mult = (float)multiplier, slope = (float)negative_slope;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const unsigned gy = (unsigned)std::min<int64_t>(rows, 65535);
    const bool vec = (n % 4 == 0) &&
        ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp) | reinterpret_cast<uintptr_t>(bp)) % 16 == 0);
    if (vec) {
        const int64_t n4 = n / 4;
        const unsigned gx = (unsigned)std::min<int64_t>((n4 + threads - 1) / threads, 1024);
        bias_mul_leaky_vec4_kernel<<<dim3(gx, gy), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xp), reinterpret_cast<const float4*>(bp),
            reinterpret_cast<float4*>(yp), rows, n4, mult, slope);
    } else {
        const unsigned gx = (unsigned)std::min<int64_t>((n + threads - 1) / threads, 1024);
        bias_mul_leaky_kernel<<<dim3(gx, gy), threads, 0, stream>>>(xp, bp, yp, rows, n, mult, slope);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_CPP_SRC = ("torch::Tensor gemm_bias_mul_leaky(torch::Tensor x, torch::Tensor bias, double multiplier, "
            "double negative_slope);")

_ext = load_inline(
    name="kb_answers_l2_12_gemm_mul_leaky",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["gemm_bias_mul_leaky"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        # Constructed exactly as Model (nn.LeakyReLU holds no parameter; kept for the same module tree).
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        acc = F.linear(x, self.gemm.weight)        # cuBLAS GEMM, the bias is added in the epilogue kernel
        return _ext.gemm_bias_mul_leaky(acc.contiguous(), self.gemm.bias.contiguous(),
                                        float(self.multiplier), float(self.leaky_relu.negative_slope))
