"""KernelBench level3/1_MLP, a partial (KernelBench-policy) answer.

Linear(16384 -> 16384), ReLU, Linear(16384 -> 16384), ReLU, Linear(16384 -> 8192) on a (128, 16384)
batch. Each layer's GEMM x @ W^T stays in PyTorch (torch.matmul: cuBLAS, fp32); its bias add, and
the ReLU after every hidden layer, are one CUDA kernel per layer (out = relu(acc + b[n]); the last
layer: out = acc + b[n]).

Layout: the (M, N) row-major GEMM output, grid.y over rows (grid-stride past 65535), grid.x over the
columns, as float4 when N is a multiple of 4 and the pointers are 16-byte aligned, else scalars.
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

template <bool RELU>
__device__ __forceinline__ float epi(float acc, float b) {
    const float v = acc + b;
    return RELU ? (v < 0.0f ? 0.0f : v) : v;     // relu as torch: NaN stays NaN
}

template <bool RELU>
__global__ void bias_act_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ bias,
                                     float4* __restrict__ y, int64_t rows, int64_t n4) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float4* xr = x + r * n4;
        float4* yr = y + r * n4;
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n4;
             j += (int64_t)gridDim.x * blockDim.x) {
            const float4 a = xr[j];
            const float4 b = __ldg(bias + j);
            float4 o;
            o.x = epi<RELU>(a.x, b.x);
            o.y = epi<RELU>(a.y, b.y);
            o.z = epi<RELU>(a.z, b.z);
            o.w = epi<RELU>(a.w, b.w);
            yr[j] = o;
        }
    }
}

template <bool RELU>
__global__ void bias_act_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                float* __restrict__ y, int64_t rows, int64_t n) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
             j += (int64_t)gridDim.x * blockDim.x) {
            y[r * n + j] = epi<RELU>(x[r * n + j], __ldg(bias + j));
        }
    }
}

// x: GEMM output (M, N) float32 contiguous; bias: N floats. Returns relu(x + bias) or x + bias.
torch::Tensor bias_act(torch::Tensor x, torch::Tensor bias, bool relu) {
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
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const unsigned gy = (unsigned)std::min<int64_t>(rows, 65535);
    const bool vec = (n % 4 == 0) &&
        ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp) | reinterpret_cast<uintptr_t>(bp)) % 16 == 0);
    if (vec) {
        const int64_t n4 = n / 4;
        const dim3 grid((unsigned)std::min<int64_t>((n4 + threads - 1) / threads, 1024), gy);
        auto xv = reinterpret_cast<const float4*>(xp);
        auto bv = reinterpret_cast<const float4*>(bp);
        auto yv = reinterpret_cast<float4*>(yp);
        if (relu) bias_act_vec4_kernel<true><<<grid, threads, 0, stream>>>(xv, bv, yv, rows, n4);
        else      bias_act_vec4_kernel<false><<<grid, threads, 0, stream>>>(xv, bv, yv, rows, n4);
    } else {
        const dim3 grid((unsigned)std::min<int64_t>((n + threads - 1) / threads, 1024), gy);
        if (relu) bias_act_kernel<true><<<grid, threads, 0, stream>>>(xp, bp, yp, rows, n);
        else      bias_act_kernel<false><<<grid, threads, 0, stream>>>(xp, bp, yp, rows, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_CPP_SRC = "torch::Tensor bias_act(torch::Tensor x, torch::Tensor bias, bool relu);"

_ext = load_inline(
    name="kb_answers_l3_1_mlp_bias_relu",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["bias_act"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        # Constructed exactly as Model: the same Sequential of Linear/ReLU, so the same parameters
        # in the same order (and the same state_dict keys).
        layers = []
        current_input_size = input_size
        for layer_size in layer_sizes:
            layers.append(nn.Linear(current_input_size, layer_size))
            layers.append(nn.ReLU())
            current_input_size = layer_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        mods = list(self.network)
        h = x
        for i, m in enumerate(mods):
            if not isinstance(m, nn.Linear):
                continue                      # the ReLU after a Linear is fused into that Linear's kernel
            relu = i + 1 < len(mods) and isinstance(mods[i + 1], nn.ReLU)
            acc = torch.matmul(h, m.weight.t())                       # cuBLAS GEMM, no bias
            h = _ext.bias_act(acc.contiguous(), m.bias.contiguous(), relu)
        return h
