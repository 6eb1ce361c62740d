"""KernelBench level2/30_Gemm_GroupNorm_Hardtanh, a partial (KernelBench-policy) answer.

The GEMM stays in PyTorch (F.linear with the very weight and bias of `self.gemm`: cuBLAS, fp32);
GroupNorm and Hardtanh are one CUDA kernel:
  y = clamp((x - mean_g) * rsqrt(var_g + eps) * gamma[c] + beta[c], min_val, max_val)
with mean_g and var_g (biased, as nn.GroupNorm) over each sample's group of C/G channels (times the
spatial size, 1 here). GroupNorm has no running statistics, so training and eval mode are the same.

One block per (sample, group): pass 1 sums the group (block reduction: warp shuffles, then one warp
over the per-warp sums), pass 2 sums the squared deviations from the mean (two-pass variance, no
E[x^2] - E[x]^2 cancellation), pass 3 normalises, applies the affine and clamps. The group is 512
contiguous floats (2 KB) here, so passes 2 and 3 re-read it from L1/L2. float4 path when the group's
channels are contiguous (spatial size 1), C/G is a multiple of 4 and the pointers are 16-byte aligned.
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

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// sh holds 33 floats; the first __syncthreads keeps a previous call's readers ahead of the writes.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < nwarps ? sh[lane] : 0.0f;
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
        if (lane == 0) sh[32] = w;
    }
    __syncthreads();
    return sh[32];
}

// hardtanh as torch.clamp: NaN stays NaN
__device__ __forceinline__ float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// x, y: (N, C, spatial) contiguous, seen as N*G groups of gs = (C/G)*spatial floats.
__global__ void groupnorm_hardtanh_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float* __restrict__ y,
                                          int64_t ngroups, int64_t G, int64_t cpg, int64_t spatial,
                                          float eps, float lo, float hi) {
    __shared__ float sh[33];
    const int64_t gs = cpg * spatial;
    const float inv_n = 1.0f / (float)gs;
    for (int64_t ng = blockIdx.x; ng < ngroups; ng += gridDim.x) {
        const float* xg = x + ng * gs;
        float* yg = y + ng * gs;
        const int64_t c0 = (ng % G) * cpg;
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < gs; i += blockDim.x) s += xg[i];
        const float mean = block_sum(s, sh) * inv_n;
        float q = 0.0f;
        for (int64_t i = threadIdx.x; i < gs; i += blockDim.x) { const float d = xg[i] - mean; q += d * d; }
        const float rstd = rsqrtf(block_sum(q, sh) * inv_n + eps);
        for (int64_t i = threadIdx.x; i < gs; i += blockDim.x) {
            const int64_t c = c0 + i / spatial;
            yg[i] = clampf((xg[i] - mean) * rstd * __ldg(gamma + c) + __ldg(beta + c), lo, hi);
        }
    }
}

// spatial == 1, cpg % 4 == 0, 16-byte aligned: the group is cpg/4 float4s of consecutive channels.
__global__ void groupnorm_hardtanh_vec4_kernel(const float4* __restrict__ x, const float4* __restrict__ gamma,
                                               const float4* __restrict__ beta, float4* __restrict__ y,
                                               int64_t ngroups, int64_t G, int64_t cpg4,
                                               float eps, float lo, float hi) {
    __shared__ float sh[33];
    const float inv_n = 1.0f / (float)(cpg4 * 4);
    for (int64_t ng = blockIdx.x; ng < ngroups; ng += gridDim.x) {
        const float4* xg = x + ng * cpg4;
        float4* yg = y + ng * cpg4;
        const float4* gg = gamma + (ng % G) * cpg4;
        const float4* bg = beta + (ng % G) * cpg4;
        float s = 0.0f;
        for (int64_t i = threadIdx.x; i < cpg4; i += blockDim.x) { const float4 v = xg[i]; s += (v.x + v.y) + (v.z + v.w); }
        const float mean = block_sum(s, sh) * inv_n;
        float q = 0.0f;
        for (int64_t i = threadIdx.x; i < cpg4; i += blockDim.x) {
            const float4 v = xg[i];
            const float a = v.x - mean, b = v.y - mean, c = v.z - mean, d = v.w - mean;
            q += (a * a + b * b) + (c * c + d * d);
        }
        const float rstd = rsqrtf(block_sum(q, sh) * inv_n + eps);
        for (int64_t i = threadIdx.x; i < cpg4; i += blockDim.x) {
            const float4 v = xg[i], g = __ldg(gg + i), b = __ldg(bg + i);
            float4 o;
            o.x = clampf((v.x - mean) * rstd * g.x + b.x, lo, hi);
            o.y = clampf((v.y - mean) * rstd * g.y + b.y, lo, hi);
            o.z = clampf((v.z - mean) * rstd * g.z + b.z, lo, hi);
            o.w = clampf((v.w - mean) * rstd * g.w + b.w, lo, hi);
            yg[i] = o;
        }
    }
}

// x: (N, C, *) float32 contiguous (here the (N, C) GEMM output); gamma, beta: C floats.
torch::Tensor groupnorm_hardtanh(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t num_groups,
                                 double eps, double min_val, double max_val) {
    TORCH_CHECK(x.is_cuda() && gamma.is_cuda() && beta.is_cuda(), "x, gamma and beta must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && gamma.scalar_type() == torch::kFloat32 &&
                beta.scalar_type() == torch::kFloat32, "x, gamma and beta must be float32");
    TORCH_CHECK(x.is_contiguous() && gamma.is_contiguous() && beta.is_contiguous(), "inputs must be contiguous");
    TORCH_CHECK(x.dim() >= 2, "x must be (N, C, ...)");
    const int64_t N = x.size(0), C = x.size(1), G = num_groups;
    TORCH_CHECK(G > 0 && C % G == 0, "num_channels must be divisible by num_groups");
    TORCH_CHECK(gamma.numel() == C && beta.numel() == C, "gamma and beta must have C elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t spatial = x.numel() / (N * C);
    const int64_t cpg = C / G, ngroups = N * G, gs = cpg * spatial;
    const float* xp = x.data_ptr<float>();
    const float* gp = gamma.data_ptr<float>();
    const float* bp = beta.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const unsigned blocks = (unsigned)std::min<int64_t>(ngroups, (int64_t)1 << 20);
    const bool vec = spatial == 1 && cpg % 4 == 0 &&
        ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp) |
          reinterpret_cast<uintptr_t>(gp) | reinterpret_cast<uintptr_t>(bp)) % 16 == 0);
    if (vec) {
        const int64_t cpg4 = cpg / 4;
        const int threads = cpg4 <= 128 ? 128 : 256;
        groupnorm_hardtanh_vec4_kernel<<<blocks, threads, 0, stream>>>(
            reinterpret_cast<const float4*>(xp), reinterpret_cast<const float4*>(gp),
            reinterpret_cast<const float4*>(bp), reinterpret_cast<float4*>(yp),
            ngroups, G, cpg4, (float)eps, (float)min_val, (float)max_val);
    } else {
        const int threads = gs <= 512 ? 128 : 256;
        groupnorm_hardtanh_kernel<<<blocks, threads, 0, stream>>>(
            xp, gp, bp, yp, ngroups, G, cpg, spatial, (float)eps, (float)min_val, (float)max_val);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_CPP_SRC = ("torch::Tensor groupnorm_hardtanh(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, "
            "int64_t num_groups, double eps, double min_val, double max_val);")

_ext = load_inline(
    name="kb_answers_l2_30_gemm_groupnorm_hardtanh",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["groupnorm_hardtanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, hardtanh_min, hardtanh_max):
        super().__init__()
        # Constructed exactly as Model: same parameters in the same order.
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x):
        h = F.linear(x, self.gemm.weight, self.gemm.bias)      # cuBLAS GEMM (+ bias), kept in PyTorch
        gn = self.group_norm
        if gn.affine:
            gamma, beta = gn.weight.contiguous(), gn.bias.contiguous()
        else:
            gamma = torch.ones(gn.num_channels, device=h.device, dtype=h.dtype)
            beta = torch.zeros(gn.num_channels, device=h.device, dtype=h.dtype)
        return _ext.groupnorm_hardtanh(h.contiguous(), gamma, beta, gn.num_groups, float(gn.eps),
                                       float(self.hardtanh.min_val), float(self.hardtanh.max_val))
