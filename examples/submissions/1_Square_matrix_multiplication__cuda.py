"""KernelBench level1/1_Square_matrix_multiplication_ in CUDA: C = A @ B, float32, N = 4096.

A shared-memory tiled SGEMM on the ordinary FP32 units (no tensor cores, no TF32): 128x128 output
tile per block of 256 threads, K-step 8, each thread computing an 8x8 register tile. The A tile
is stored transposed in shared memory so both operands are read as float4. Loads are
bounds-checked, so any M, N, K works (the fast float4 path is used when K and N are multiples of 4).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);   // 256

__global__ void __launch_bounds__(THREADS)
sgemm_tiled_kernel(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                   int M, int N, int K, bool vecA, bool vecB) {
    __shared__ __align__(16) float As[2][BK][BM];   // A tile, transposed: As[k][m]
    __shared__ __align__(16) float Bs[2][BK][BN];

    const int tid = threadIdx.x;
    const int tRow = tid / (BN / TN);   // 0..15
    const int tCol = tid % (BN / TN);   // 0..15
    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;

    // Each thread loads 4 consecutive floats of A (row aRow, k aK..aK+3) and of B (k bK, col bC..bC+3).
    const int aRow = tid / 2, aK = (tid % 2) * 4;
    const int bK = tid / 32, bC = (tid % 32) * 4;

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    auto load_a = [&](int k0, float4& v) {
        const int r = bm + aRow, c = k0 + aK;
        if (vecA && r < M && c + 3 < K) {
            v = *reinterpret_cast<const float4*>(A + (int64_t)r * K + c);
        } else {
            const float* p = A + (int64_t)r * K;
            v.x = (r < M && c + 0 < K) ? p[c + 0] : 0.0f;
            v.y = (r < M && c + 1 < K) ? p[c + 1] : 0.0f;
            v.z = (r < M && c + 2 < K) ? p[c + 2] : 0.0f;
            v.w = (r < M && c + 3 < K) ? p[c + 3] : 0.0f;
        }
    };
    auto load_b = [&](int k0, float4& v) {
        const int r = k0 + bK, c = bn + bC;
        if (vecB && r < K && c + 3 < N) {
            v = *reinterpret_cast<const float4*>(B + (int64_t)r * N + c);
        } else {
            const float* p = B + (int64_t)r * N;
            v.x = (r < K && c + 0 < N) ? p[c + 0] : 0.0f;
            v.y = (r < K && c + 1 < N) ? p[c + 1] : 0.0f;
            v.z = (r < K && c + 2 < N) ? p[c + 2] : 0.0f;
            v.w = (r < K && c + 3 < N) ? p[c + 3] : 0.0f;
        }
    };
    auto store_tiles = [&](int buf, const float4& a, const float4& b) {
        As[buf][aK + 0][aRow] = a.x;
        As[buf][aK + 1][aRow] = a.y;
        As[buf][aK + 2][aRow] = a.z;
        As[buf][aK + 3][aRow] = a.w;
        *reinterpret_cast<float4*>(&Bs[buf][bK][bC]) = b;
    };

    float4 ra, rb;
    load_a(0, ra);
    load_b(0, rb);
    store_tiles(0, ra, rb);
    __syncthreads();

    const int nk = (K + BK - 1) / BK;
    for (int t = 0; t < nk; ++t) {
        const int cur = t & 1;
        const bool has_next = t + 1 < nk;
        if (has_next) {            // prefetch the next tile into registers while computing this one
            load_a((t + 1) * BK, ra);
            load_b((t + 1) * BK, rb);
        }
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][tRow * TM]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][tRow * TM + 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tCol * TN]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][tCol * TN + 4]);
            a[0] = a0.x; a[1] = a0.y; a[2] = a0.z; a[3] = a0.w;
            a[4] = a1.x; a[5] = a1.y; a[6] = a1.z; a[7] = a1.w;
            b[0] = b0.x; b[1] = b0.y; b[2] = b0.z; b[3] = b0.w;
            b[4] = b1.x; b[5] = b1.y; b[6] = b1.z; b[7] = b1.w;
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (has_next) {
            store_tiles(cur ^ 1, ra, rb);   // the other buffer: nobody reads it during this step
        }
        __syncthreads();
    }

    // Write the 8x8 register tile.
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = bm + tRow * TM + i;
        if (r >= M) continue;
        float* crow = C + (int64_t)r * N;
        #pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int c = bn + tCol * TN + j;
            if (vecB && c + 3 < N) {
                *reinterpret_cast<float4*>(crow + c) = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
                #pragma unroll
                for (int q = 0; q < 4; ++q) if (c + q < N) crow[c + q] = acc[i][j + q];
            }
        }
    }
}

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "A and B must be CUDA tensors");
    TORCH_CHECK(a.scalar_type() == torch::kFloat32 && b.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shapes must be (M, K) @ (K, N)");
    const c10::cuda::CUDAGuard guard(a.device());
    a = a.contiguous();
    b = b.contiguous();
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    TORCH_CHECK(M < (1LL << 31) && N < (1LL << 31) && K < (1LL << 31), "dimension too large");
    auto c = torch::empty({M, N}, a.options());
    if (M == 0 || N == 0) return c;
    if (K == 0) { c.zero_(); return c; }
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* cp = c.data_ptr<float>();
    const bool vecA = (K % 4 == 0) && (reinterpret_cast<uintptr_t>(ap) % 16 == 0);
    const bool vecB = (N % 4 == 0) && (reinterpret_cast<uintptr_t>(bp) % 16 == 0) &&
                      (reinterpret_cast<uintptr_t>(cp) % 16 == 0);
    dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM));
    TORCH_CHECK(grid.y <= 65535, "M too large for this kernel's grid");
    sgemm_tiled_kernel<<<grid, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        ap, bp, cp, (int)M, (int)N, (int)K, vecA, vecB);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}
"""

_CPP_SRC = "torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="kb_l1_1_matmul_cuda",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return _ext.matmul_forward(A, B)
