"""KernelBench level1/23_Softmax in CUDA: softmax over dim=1 of a (4096, 393216) float32 tensor.

One block per row. Pass 1 reads the row once and keeps an online (running max, running sum of
exp) pair per thread, merged across the block with warp shuffles and shared memory; pass 2 reads
the row again and writes exp(x - max) / sum. Row offsets are 64-bit (the tensor is 6.4 GB).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>
#include <cmath>

constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;

struct MaxSum { float m; float s; };

// Merge two (max, sum of exp(x - max)) pairs; an empty pair has m = -inf, s = 0.
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void online_add(MaxSum& acc, float v) {
    if (v > acc.m) {
        acc.s = acc.s * expf(acc.m - v) + 1.0f;   // expf(-inf) = 0 on the first element
        acc.m = v;
    } else {
        acc.s += expf(v - acc.m);
    }
}

__global__ void __launch_bounds__(THREADS)
softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols, bool vec4) {
    __shared__ float sm_m[WARPS];
    __shared__ float sm_s[WARPS];
    __shared__ float row_m, row_inv_s;

    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;

        // Pass 1: per-thread online max / sum.
        MaxSum acc{-INFINITY, 0.0f};
        if (vec4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            const int64_t c4 = cols / 4;
            for (int64_t i = threadIdx.x; i < c4; i += THREADS) {
                const float4 v = xr4[i];
                const float vm = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
                if (vm > acc.m) { acc.s *= expf(acc.m - vm); acc.m = vm; }
                acc.s += expf(v.x - acc.m) + expf(v.y - acc.m) + expf(v.z - acc.m) + expf(v.w - acc.m);
            }
        } else {
            for (int64_t i = threadIdx.x; i < cols; i += THREADS) online_add(acc, xr[i]);
        }

        // Block reduction of the (max, sum) pairs.
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            MaxSum o{__shfl_xor_sync(0xffffffffu, acc.m, off), __shfl_xor_sync(0xffffffffu, acc.s, off)};
            acc = merge(acc, o);
        }
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        if (lane == 0) { sm_m[warp] = acc.m; sm_s[warp] = acc.s; }
        __syncthreads();
        if (warp == 0) {
            MaxSum a = lane < WARPS ? MaxSum{sm_m[lane], sm_s[lane]} : MaxSum{-INFINITY, 0.0f};
            #pragma unroll
            for (int off = 16; off > 0; off >>= 1) {
                MaxSum o{__shfl_xor_sync(0xffffffffu, a.m, off), __shfl_xor_sync(0xffffffffu, a.s, off)};
                a = merge(a, o);
            }
            if (lane == 0) { row_m = a.m; row_inv_s = 1.0f / a.s; }
        }
        __syncthreads();
        const float m = row_m, inv_s = row_inv_s;

        // Pass 2: write the normalised exponentials.
        if (vec4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            float4* yr4 = reinterpret_cast<float4*>(yr);
            const int64_t c4 = cols / 4;
            for (int64_t i = threadIdx.x; i < c4; i += THREADS) {
                float4 v = xr4[i];
                v.x = expf(v.x - m) * inv_s;
                v.y = expf(v.y - m) * inv_s;
                v.z = expf(v.z - m) * inv_s;
                v.w = expf(v.w - m) * inv_s;
                __stcs(yr4 + i, v);
            }
        } else {
            for (int64_t i = threadIdx.x; i < cols; i += THREADS) yr[i] = expf(xr[i] - m) * inv_s;
        }
        __syncthreads();   // row_m / sm_* are reused by the next row
    }
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D (softmax over dim 1)");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    if (rows == 0 || cols == 0) return y;
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec4 = (cols % 4 == 0) &&
        ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) % 16) == 0;
    const int64_t blocks = std::min<int64_t>(rows, 1 << 30);
    softmax_rows_kernel<<<(unsigned)blocks, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(xp, yp, rows, cols, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x);"

_ext = load_inline(
    name="kb_l1_23_softmax_cuda",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.softmax_forward(x)
