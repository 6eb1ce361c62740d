"""KernelBench level1/40_LayerNorm in CUDA: nn.LayerNorm((64, 256, 256)) on a (16, 64, 256, 256) input.

Each of the 16 normalisation groups holds 64*256*256 = 4,194,304 elements, so one block per group
would leave the GPU idle. Three kernels instead:
  1. partial statistics: each block takes an 8192-element chunk of a group into registers and
     computes its mean and then its sum of squared deviations from that mean (two passes over
     registers, fp32), so there is no E[x^2] - E[x]^2 cancellation;
  2. one block per group merges the chunk statistics exactly (Chan's parallel formula, in fp64:
     it is a few hundred values) into the group's mean and 1/sqrt(var + eps) (biased variance);
  3. an elementwise float4 pass y = (x - mean) * rstd * weight + bias.
All offsets are 64-bit.
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

constexpr int STAT_THREADS = 256;
constexpr int STAT_ITEMS = 32;
constexpr int CHUNK = STAT_THREADS * STAT_ITEMS;   // 8192 elements per block
constexpr int MERGE_THREADS = 256;
constexpr int NORM_THREADS = 256;
constexpr unsigned MAX_GRID_Y = 65535;

__host__ __device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

template <typename T>
__device__ __forceinline__ T block_sum(T v, T* smem) {   // smem: one slot per warp; result to all threads
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    __syncthreads();                     // smem may still be read from a previous call
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    T t = lane < nwarps ? smem[lane] : T(0);
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    return t;
}

__global__ void __launch_bounds__(STAT_THREADS)
ln_partial_stats_kernel(const float* __restrict__ x, float* __restrict__ part_mean, float* __restrict__ part_m2,
                        int64_t rows, int64_t group, int64_t nchunks) {
    __shared__ float smem[STAT_THREADS / 32];
    const int64_t c = blockIdx.x;
    const int64_t start = c * CHUNK;
    const int64_t n_c = min64(CHUNK, group - start);
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float* xc = x + row * group + start;
        float v[STAT_ITEMS];
        float s = 0.0f;
        #pragma unroll
        for (int i = 0; i < STAT_ITEMS; ++i) {
            const int64_t j = (int64_t)i * STAT_THREADS + threadIdx.x;   // coalesced across the block
            v[i] = j < n_c ? xc[j] : 0.0f;
            s += v[i];
        }
        const float mean_c = block_sum(s, smem) / (float)n_c;
        float m2 = 0.0f;
        #pragma unroll
        for (int i = 0; i < STAT_ITEMS; ++i) {
            const int64_t j = (int64_t)i * STAT_THREADS + threadIdx.x;
            const float d = v[i] - mean_c;
            m2 += j < n_c ? d * d : 0.0f;
        }
        m2 = block_sum(m2, smem);
        if (threadIdx.x == 0) {
            part_mean[row * nchunks + c] = mean_c;
            part_m2[row * nchunks + c] = m2;
        }
    }
}

__global__ void __launch_bounds__(MERGE_THREADS)
ln_merge_kernel(const float* __restrict__ part_mean, const float* __restrict__ part_m2,
                float* __restrict__ mean_out, float* __restrict__ rstd_out,
                int64_t group, int64_t nchunks, double eps) {
    __shared__ double smem[MERGE_THREADS / 32];
    const int64_t row = blockIdx.x;
    const float* pm = part_mean + row * nchunks;
    const float* pq = part_m2 + row * nchunks;
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < nchunks; c += blockDim.x) {
        const double n_c = (double)min64(CHUNK, group - c * CHUNK);
        s += n_c * (double)pm[c];
    }
    const double mean = block_sum(s, smem) / (double)group;
    double q = 0.0;
    for (int64_t c = threadIdx.x; c < nchunks; c += blockDim.x) {
        const double n_c = (double)min64(CHUNK, group - c * CHUNK);
        const double d = (double)pm[c] - mean;
        q += (double)pq[c] + n_c * d * d;
    }
    const double m2 = block_sum(q, smem);
    if (threadIdx.x == 0) {
        const double var = m2 / (double)group;
        mean_out[row] = (float)mean;
        rstd_out[row] = (float)(1.0 / sqrt(var + eps));
    }
}

__global__ void __launch_bounds__(NORM_THREADS)
ln_normalize_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                    const float* __restrict__ mean_in, const float* __restrict__ rstd_in,
                    float* __restrict__ y, int64_t rows, int64_t group, bool vec4, bool affine) {
    const int64_t cstride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t row = blockIdx.y; row < rows; row += gridDim.y) {
        const float mean = mean_in[row], rstd = rstd_in[row];
        const float* xr = x + row * group;
        float* yr = y + row * group;
        if (vec4) {
            const int64_t g4 = group / 4;
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            const float4* w4 = reinterpret_cast<const float4*>(w);
            const float4* b4 = reinterpret_cast<const float4*>(b);
            float4* yr4 = reinterpret_cast<float4*>(yr);
            for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < g4; i += cstride) {
                const float4 v = xr4[i];
                float4 o;
                o.x = (v.x - mean) * rstd;
                o.y = (v.y - mean) * rstd;
                o.z = (v.z - mean) * rstd;
                o.w = (v.w - mean) * rstd;
                if (affine) {
                    const float4 wv = w4[i], bv = b4[i];
                    o.x = o.x * wv.x + bv.x;
                    o.y = o.y * wv.y + bv.y;
                    o.z = o.z * wv.z + bv.z;
                    o.w = o.w * wv.w + bv.w;
                }
                __stcs(yr4 + i, o);
            }
        } else {
            for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < group; i += cstride) {
                float o = (xr[i] - mean) * rstd;
                if (affine) o = o * w[i] + b[i];
                yr[i] = o;
            }
        }
    }
}

static bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

torch::Tensor layernorm_forward(torch::Tensor x, c10::optional<torch::Tensor> weight,
                                c10::optional<torch::Tensor> bias, int64_t group, double eps) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(group > 0 && x.numel() % group == 0, "normalized_shape does not divide the input");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    const bool affine = weight.has_value() && weight->defined();
    torch::Tensor w, b;
    if (affine) {
        w = weight->contiguous();
        TORCH_CHECK(w.is_cuda() && w.scalar_type() == torch::kFloat32 && w.numel() == group, "bad weight");
        if (bias.has_value() && bias->defined()) {
            b = bias->contiguous();
            TORCH_CHECK(b.is_cuda() && b.scalar_type() == torch::kFloat32 && b.numel() == group, "bad bias");
        } else {
            b = torch::zeros_like(w);
        }
    }
    auto y = torch::empty_like(x);
    const int64_t rows = x.numel() / group;
    if (rows == 0) return y;
    const int64_t nchunks = (group + CHUNK - 1) / CHUNK;
    TORCH_CHECK(nchunks < (1LL << 31), "group too large");
    auto opts = x.options();
    auto part_mean = torch::empty({rows, nchunks}, opts);
    auto part_m2 = torch::empty({rows, nchunks}, opts);
    auto mean = torch::empty({rows}, opts);
    auto rstd = torch::empty({rows}, opts);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();

    const unsigned gy = (unsigned)std::min<int64_t>(rows, MAX_GRID_Y);
    ln_partial_stats_kernel<<<dim3((unsigned)nchunks, gy), STAT_THREADS, 0, stream>>>(
        x.data_ptr<float>(), part_mean.data_ptr<float>(), part_m2.data_ptr<float>(), rows, group, nchunks);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    TORCH_CHECK(rows < (1LL << 31), "too many rows");
    ln_merge_kernel<<<(unsigned)rows, MERGE_THREADS, 0, stream>>>(
        part_mean.data_ptr<float>(), part_m2.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
        group, nchunks, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();

    const float* wp = affine ? w.data_ptr<float>() : nullptr;
    const float* bp = affine ? b.data_ptr<float>() : nullptr;
    const bool vec4 = group % 4 == 0 && aligned16(x.data_ptr<float>()) && aligned16(y.data_ptr<float>()) &&
                      (!affine || (aligned16(wp) && aligned16(bp)));
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t per_row = vec4 ? group / 4 : group;
    const int64_t want = std::max<int64_t>(1, ((int64_t)sms * 16 + gy - 1) / gy);   // ~16 blocks per SM in all
    const int64_t gx = std::max<int64_t>(1, std::min<int64_t>((per_row + NORM_THREADS - 1) / NORM_THREADS, want));
    ln_normalize_kernel<<<dim3((unsigned)gx, gy), NORM_THREADS, 0, stream>>>(
        x.data_ptr<float>(), wp, bp, mean.data_ptr<float>(), rstd.data_ptr<float>(), y.data_ptr<float>(),
        rows, group, vec4, affine);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_CPP_SRC = (
    "torch::Tensor layernorm_forward(torch::Tensor x, c10::optional<torch::Tensor> weight, "
    "c10::optional<torch::Tensor> bias, int64_t group, double eps);"
)

_ext = load_inline(
    name="kb_l1_40_layernorm_cuda",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["layernorm_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Same construction as Model, so the same seed gives the same weight and bias.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(self.ln.normalized_shape)
        assert tuple(x.shape[x.dim() - len(shape):]) == shape, "input does not end with normalized_shape"
        group = 1
        for s in shape:
            group *= s
        return _ext.layernorm_forward(x, self.ln.weight, self.ln.bias, group, float(self.ln.eps))
