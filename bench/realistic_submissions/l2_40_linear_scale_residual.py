"""level2/40_Matmul_Scaling_ResidualAdd: nn.Linear in Python, x * s + x fused into one elementwise kernel.

Styles: the minimal "fused elementwise" answer: torch/extension.h only, float-only kernel,
torch::empty_like, a float scalar argument, `size` as int, no checks, no stream.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_residual_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_residual_kernel(const float* x, float* out, float scaling_factor, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = x[idx];
        out[idx] = v * scaling_factor + v;
    }
}

torch::Tensor scale_residual_cuda(torch::Tensor x, float scaling_factor) {
    auto size = x.numel();
    auto out = torch::empty_like(x);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    scale_residual_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), scaling_factor, size);
    return out;
}
"""

scale_residual_cpp = "torch::Tensor scale_residual_cuda(torch::Tensor x, float scaling_factor);"

scale_residual = load_inline(
    name="rs_l2_40_scale_residual",
    cpp_sources=scale_residual_cpp,
    cuda_sources=scale_residual_source,
    functions=["scale_residual_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
        self.scale_residual = scale_residual

    def forward(self, x):
        x = self.matmul(x)
        return self.scale_residual.scale_residual_cuda(x.contiguous(), self.scaling_factor)
