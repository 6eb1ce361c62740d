"""level1/40_LayerNorm: Welford statistics per row, std::vector<torch::Tensor> returned (y, mean, rstd).

Styles: AT_DISPATCH_FLOATING_TYPES, a struct with __device__ operators, block reduce through shared
memory, torch::empty({rows}, x.options().dtype(torch::kFloat)), std::vector<torch::Tensor> return,
c10::cuda::getCurrentCUDAStream(), C10_CUDA_KERNEL_LAUNCH_CHECK, optional weight/bias tensors.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layernorm_cuda = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <vector>

struct Welford {
    float mean, m2, count;
    __device__ Welford() : mean(0.f), m2(0.f), count(0.f) {}
    __device__ void add(float v) { count += 1.f; float d = v - mean; mean += d / count; m2 += d * (v - mean); }
    __device__ void merge(const Welford& o) {
        if (o.count == 0.f) return;
        float n = count + o.count, d = o.mean - mean;
        mean += d * o.count / n;
        m2 += o.m2 + d * d * count * o.count / n;
        count = n;
    }
};

template <typename scalar_t>
__global__ void layernorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                                 const scalar_t* __restrict__ b, scalar_t* __restrict__ y,
                                 float* __restrict__ mean_out, float* __restrict__ rstd_out,
                                 int64_t cols, float eps) {
    __shared__ Welford shared[1024];
    const scalar_t* xr = x + blockIdx.x * cols;
    Welford acc;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc.add(static_cast<float>(xr[c]));
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) shared[threadIdx.x].merge(shared[threadIdx.x + s]);
        __syncthreads();
    }
    const float mean = shared[0].mean;
    const float rstd = rsqrtf(shared[0].m2 / cols + eps);
    if (threadIdx.x == 0) { mean_out[blockIdx.x] = mean; rstd_out[blockIdx.x] = rstd; }
    scalar_t* yr = y + blockIdx.x * cols;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = (static_cast<float>(xr[c]) - mean) * rstd;
        yr[c] = static_cast<scalar_t>(v * static_cast<float>(w[c]) + static_cast<float>(b[c]));
    }
}

std::vector<torch::Tensor> layernorm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias,
                                             int64_t normalized_numel, double eps) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous(), "x must be a contiguous CUDA tensor");
    const int64_t cols = normalized_numel;
    const int64_t rows = x.numel() / cols;
    auto y = torch::empty_like(x);
    auto mean = torch::empty({rows}, x.options().dtype(torch::kFloat));
    auto rstd = torch::empty({rows}, x.options().dtype(torch::kFloat));
    const int threads = 1024;
    auto stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "layernorm_forward", [&] {
        layernorm_kernel<scalar_t><<<rows, threads, 0, stream>>>(
            x.data_ptr<scalar_t>(), weight.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
            mean.data_ptr<float>(), rstd.data_ptr<float>(), cols, static_cast<float>(eps));
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
    return {y, mean, rstd};
}
"""

layernorm_cpp = ("std::vector<torch::Tensor> layernorm_forward(torch::Tensor x, torch::Tensor weight, "
                 "torch::Tensor bias, int64_t normalized_numel, double eps);")

layernorm = load_inline(name="rs_l1_40_layernorm", cpp_sources=layernorm_cpp, cuda_sources=layernorm_cuda,
                        functions=["layernorm_forward"], extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super(ModelNew, self).__init__()
        self.normalized_shape = tuple(normalized_shape)
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.weight.numel()
        y, _, _ = layernorm.layernorm_forward(x.contiguous(), self.weight.contiguous(), self.bias.contiguous(), n, self.eps)
        return y
