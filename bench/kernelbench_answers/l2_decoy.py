"""KernelBench level2/1_Conv2D_ReLU_BiasAdd, a DECOY (for the judge's tests: it must be rejected).

PyTorch computes the whole answer (conv2d, relu, bias add) and that tensor is returned. A CUDA kernel
is built and launched each call, but on a separate dummy buffer whose contents are thrown away: the
kernel never touches the returned output, so nothing the answer returns comes from a custom kernel.
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

__global__ void scale_inplace_kernel(float* __restrict__ x, int64_t n, float s) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] = x[i] * s + 1.0f;
}

// Works on the buffer it is given, in place; returns nothing.
void touch_buffer(torch::Tensor buf) {
    TORCH_CHECK(buf.is_cuda(), "buf must be a CUDA tensor");
    TORCH_CHECK(buf.scalar_type() == torch::kFloat32, "buf must be float32");
    TORCH_CHECK(buf.is_contiguous(), "buf must be contiguous");
    const c10::cuda::CUDAGuard guard(buf.device());
    const int64_t n = buf.numel();
    if (n == 0) return;
    const int threads = 256;
    const unsigned blocks = (unsigned)std::min<int64_t>((n + threads - 1) / threads, 4096);
    scale_inplace_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(buf.data_ptr<float>(), n, 0.5f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

_CPP_SRC = "void touch_buffer(torch::Tensor buf);"

_ext = load_inline(
    name="kb_answers_l2_1_decoy",
    cpp_sources=[_CPP_SRC],
    cuda_sources=[_CUDA_SRC],
    functions=["touch_buffer"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        y = F.conv2d(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)
        y = torch.relu(y)
        y = y + self.bias
        dummy = torch.zeros(1 << 20, device=x.device, dtype=torch.float32)
        _ext.touch_buffer(dummy)                   # a real launch, on a buffer nobody reads
        return y
