"""level1/19_ReLU: AT_DISPATCH_FLOATING_TYPES_AND_HALF, c10::cuda::getCurrentCUDAStream, C10_CUDA_CHECK.

Styles: torch/extension.h + c10/cuda/CUDAStream.h + c10/cuda/CUDAException.h, grid-stride loop,
scalar_t arithmetic through float, CHECK_INPUT macros, declarations-only cpp_sources.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

#define CHECK_CUDA(x) TORCH_CHECK(x.device().is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

template <typename scalar_t>
__global__ void relu_kernel(const scalar_t* __restrict__ input, scalar_t* __restrict__ output, int64_t size) {
    for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < size;
         idx += (int64_t)gridDim.x * blockDim.x) {
        float v = static_cast<float>(input[idx]);
        output[idx] = static_cast<scalar_t>(v > 0.0f ? v : 0.0f);
    }
}

torch::Tensor relu_cuda(torch::Tensor input) {
    CHECK_INPUT(input);
    auto output = torch::empty_like(input);
    const int64_t size = input.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((size + threads - 1) / threads, 65535);
    auto stream = c10::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND_HALF(input.scalar_type(), "relu_cuda", ([&] {
        relu_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
            input.data_ptr<scalar_t>(), output.data_ptr<scalar_t>(), size);
    }));
    C10_CUDA_CHECK(cudaGetLastError());
    return output;
}
"""

relu_cpp_source = "torch::Tensor relu_cuda(torch::Tensor input);"

relu = load_inline(
    name="rs_l1_19_relu_dispatch",
    cpp_sources=relu_cpp_source,
    cuda_sources=relu_source,
    functions=["relu_cuda"],
    verbose=False,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu.relu_cuda(x.contiguous())
