"""level1/47_Sum_reduction_over_a_dimension: reduce any dim via (outer, reduce, inner) indexing.

Styles: x.sizes().vec() edited and passed to torch::empty, a negative dim wrapped by hand,
int64_t loops, AT_DISPATCH_FLOATING_TYPES_AND_HALF with an accumulate type (at::opmath_type),
cudaGetLastError checked with TORCH_CHECK, `using namespace torch`-free, ATen/ATen.h include.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_source = r"""
#include <torch/extension.h>
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/OpMathType.h>
#include <vector>

template <typename scalar_t>
__global__ void sum_dim_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ out,
                               int64_t outer, int64_t reduce, int64_t inner) {
    using acc_t = at::opmath_type<scalar_t>;
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    int64_t o = idx / inner, i = idx % inner;
    const scalar_t* p = x + o * reduce * inner + i;
    acc_t acc = 0;
    for (int64_t r = 0; r < reduce; ++r) acc += static_cast<acc_t>(p[r * inner]);
    out[idx] = static_cast<scalar_t>(acc);
}

torch::Tensor sum_dim_cuda(torch::Tensor x, int64_t dim) {
    x = x.contiguous();
    const int64_t nd = x.dim();
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    auto sizes = x.sizes().vec();
    int64_t outer = 1, inner = 1, reduce = sizes[dim];
    for (int64_t d = 0; d < dim; ++d) outer *= sizes[d];
    for (int64_t d = dim + 1; d < nd; ++d) inner *= sizes[d];
    sizes[dim] = 1;
    auto out = torch::empty(sizes, x.options());
    const int threads = 256;
    const int64_t blocks = (outer * inner + threads - 1) / threads;
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(x.scalar_type(), "sum_dim_cuda", ([&] {
        sum_dim_kernel<scalar_t><<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), outer, reduce, inner);
    }));
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "CUDA error: ", cudaGetErrorString(err));
    return out;
}
"""

sum_cpp = "torch::Tensor sum_dim_cuda(torch::Tensor x, int64_t dim);"

sum_ext = load_inline(name="rs_l1_47_sum_dim", cpp_sources=sum_cpp, cuda_sources=sum_source,
                      functions=["sum_dim_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_cuda(x, self.dim)
