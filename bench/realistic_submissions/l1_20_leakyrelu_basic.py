"""level1/20_LeakyReLU: the plainest KernelBench answer.

Styles: torch/extension.h + cuda_runtime.h, float only, default stream `<<<blocks, threads>>>`,
torch::zeros_like, a float argument, declarations-only cpp_sources, no error checks.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

leaky_relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void leaky_relu_kernel(const float* x, float* out, float negative_slope, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = x[idx];
        out[idx] = v > 0 ? v : v * negative_slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor x, float negative_slope) {
    auto size = x.numel();
    auto out = torch::zeros_like(x);

    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;

    leaky_relu_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), negative_slope, size);

    return out;
}
"""

leaky_relu_cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor x, float negative_slope);"

leaky_relu = load_inline(
    name="rs_l1_20_leaky_relu",
    cpp_sources=leaky_relu_cpp_source,
    cuda_sources=leaky_relu_source,
    functions=["leaky_relu_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope
        self.leaky_relu = leaky_relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # 1.6e9 elements overflow the kernel's int index: split into int-sized chunks
        x = x.contiguous()
        flat = x.view(-1)
        out = torch.empty_like(flat)
        step = 1 << 30
        for s in range(0, flat.numel(), step):
            out[s:s + step] = self.leaky_relu.leaky_relu_cuda(flat[s:s + step], self.negative_slope)
        return out.view_as(x)
