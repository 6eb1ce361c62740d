"""level1/22_Tanh: CHECK_CUDA/CHECK_CONTIGUOUS/CHECK_INPUT, cudaGetLastError with TORCH_CHECK(err == ...).

Styles: torch/extension.h only, float4 vectorised loads, cudaGetErrorString in a TORCH_CHECK message,
x.options(), torch::empty(x.sizes(), ...), cpp_sources with a definition too (a wrapper that checks).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tanh_cuda = r"""
#include <torch/extension.h>
#include <cuda.h>
#include <cuda_runtime.h>

__global__ void tanh_vec4_kernel(const float4* __restrict__ in, float4* __restrict__ out, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = in[i];
        v.x = tanhf(v.x); v.y = tanhf(v.y); v.z = tanhf(v.z); v.w = tanhf(v.w);
        out[i] = v;
    }
}

__global__ void tanh_tail_kernel(const float* in, float* out, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = tanhf(in[i]);
}

torch::Tensor tanh_launch(torch::Tensor x) {
    auto out = torch::empty(x.sizes(), x.options());
    long n = x.numel();
    long n4 = n / 4;
    int threads = 256;
    if (n4 > 0) {
        int blocks = (int)std::min<long>((n4 + threads - 1) / threads, 4096);
        tanh_vec4_kernel<<<blocks, threads>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                              reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
    }
    long rest = n - n4 * 4;
    if (rest > 0) {
        tanh_tail_kernel<<<(rest + threads - 1) / threads, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
    }
    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "tanh kernel launch failed: ", cudaGetErrorString(err));
    return out;
}
"""

tanh_cpp = r"""
#include <torch/extension.h>
#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)

torch::Tensor tanh_launch(torch::Tensor x);

torch::Tensor tanh_forward(torch::Tensor x) {
    CHECK_INPUT(x);
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "float32 only");
    return tanh_launch(x);
}
"""

ext = load_inline(name="rs_l1_22_tanh", cpp_sources=tanh_cpp, cuda_sources=tanh_cuda,
                  functions=["tanh_forward"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.tanh_forward(x.contiguous())
