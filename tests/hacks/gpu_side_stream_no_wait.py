"""Hack (GPU-only): launch on a side stream and return at once, hoping the timer (events on the current
stream) stops before the work is done (field notes 4.6).
Task: level1/19_ReLU on the cuda device. Expected: no gain: either wrong (stage correctness: the output copy races
the kernel) or timed no faster than gpu_side_stream_wait.py, since a device-wide synchronize ends every
timed call. The task's kernel takes milliseconds (6.4 GB per tensor): on a launch-bound task the
twin's two events cost more than the kernel, and an honest kernel without streams is as fast as this.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# GPU-only. One CUDA extension shared, byte for byte, by every gpu_*.py file in tests/hacks and
# tests/honest (same name, sources, functions and flags): built once per judge cache.
_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAEvent.h>
#include <algorithm>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = fmaxf(x[i], 0.0f);
}

__global__ void scale_add_clamp_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                       float* __restrict__ y, int64_t n, int64_t cols,
                                       float scale, float lo, float hi) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = fminf(fmaxf(x[i] * scale + bias[i % cols], lo), hi);
}

__global__ void touch_nothing_kernel(float* y) {}

static int blocks_for(int64_t n) { return (int)std::min<int64_t>((n + 255) / 256, 4096); }

static torch::Tensor launch_relu(torch::Tensor x, cudaStream_t stream) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "float32 CUDA tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    relu_kernel<<<blocks_for(x.numel()), 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

// On the current stream.
torch::Tensor relu(torch::Tensor x) {
    const c10::cuda::CUDAGuard guard(x.device());
    return launch_relu(x, at::cuda::getCurrentCUDAStream());
}

// On a side stream that first waits for the current one, which then waits for the side stream:
// correct stream semantics.
torch::Tensor relu_side_stream_wait(torch::Tensor x) {
    const c10::cuda::CUDAGuard guard(x.device());
    auto cur = at::cuda::getCurrentCUDAStream();
    auto side = at::cuda::getStreamFromPool();
    at::cuda::CUDAEvent ready, done;
    ready.record(cur);
    ready.block(side);
    auto y = launch_relu(x, side);
    done.record(side);
    done.block(cur);
    return y;
}

// On a side stream, and returns at once: nothing orders the caller's stream after the kernel.
torch::Tensor relu_side_stream_nowait(torch::Tensor x) {
    const c10::cuda::CUDAGuard guard(x.device());
    return launch_relu(x, at::cuda::getStreamFromPool());
}

// Launches a kernel that writes nothing and returns uninitialised memory from the caching allocator.
torch::Tensor relu_stale(torch::Tensor x) {
    const c10::cuda::CUDAGuard guard(x.device());
    auto y = torch::empty_like(x);
    touch_nothing_kernel<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>());
    return y;
}

// y = clamp(x * scale + bias, lo, hi) in one pass; x [B, C], bias [C].
torch::Tensor scale_add_clamp(torch::Tensor x, torch::Tensor bias, double scale, double lo, double hi) {
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    bias = bias.contiguous();
    auto y = torch::empty_like(x);
    scale_add_clamp_kernel<<<blocks_for(x.numel()), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), x.numel(), bias.numel(),
        (float)scale, (float)lo, (float)hi);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_ops = load_inline(
    name="kernel_env_test_gpu_ops",
    cpp_sources=["torch::Tensor relu(torch::Tensor x);\n"
                 "torch::Tensor relu_side_stream_wait(torch::Tensor x);\n"
                 "torch::Tensor relu_side_stream_nowait(torch::Tensor x);\n"
                 "torch::Tensor relu_stale(torch::Tensor x);\n"
                 "torch::Tensor scale_add_clamp(torch::Tensor x, torch::Tensor bias, double scale, double lo, double hi);"],
    cuda_sources=[_CUDA_SRC],
    functions=["relu", "relu_side_stream_wait", "relu_side_stream_nowait", "relu_stale", "scale_add_clamp"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu_side_stream_nowait(x)
