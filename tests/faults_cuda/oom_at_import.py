"""Fault (GPU-only): at import the module takes all free GPU memory but 256 MiB and keeps it; the kernel
itself is honest. The build process has no GPU (the import fails there and is tried again in the run
process, inside the submission's own device slot), so others' measurements never lose that memory.
Task: level1/19_ReLU on the cuda device. Expected: stage run, runtime_error, "out of memory": the
failure must be the submission's own, never an internal error of the evaluator (the trainer retries
those and then stops) nor a failure of another session that holds the device meanwhile.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# GPU-only. One CUDA extension shared, byte for byte, by every file in tests/faults_cuda (same name,
# sources, functions and flags): built once per judge cache. Each file calls one of its functions.
_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <algorithm>
#include <cstdint>
#undef NDEBUG
#include <assert.h>

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    GRID_STRIDE(i, n) y[i] = fmaxf(x[i], 0.0f);
}

// Fault: every thread also writes 2^40 floats (4 TiB) past the end of y: an illegal address.
__global__ void relu_out_of_bounds_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    GRID_STRIDE(i, n) {
        y[i] = fmaxf(x[i], 0.0f);
        y[i + ((int64_t)1 << 40)] = 0.0f;
    }
}

// Fault: waits for the cycle counter to go negative, which never happens: the kernel never ends.
__global__ void relu_spin_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    GRID_STRIDE(i, n) {
        while (clock64() >= 0) {}
        y[i] = fmaxf(x[i], 0.0f);
    }
}

// Fault: asserts that the input is non-negative; the task's inputs are not: a device-side assert.
__global__ void relu_assert_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    GRID_STRIDE(i, n) {
        assert(x[i] >= 0.0f);
        y[i] = fmaxf(x[i], 0.0f);
    }
}

static torch::Tensor launch(int which, torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return y;
    const int threads = 256;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const unsigned blocks = (unsigned)std::min<int64_t>((n + threads - 1) / threads, (int64_t)sms * 16);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    switch (which) {
        case 0: relu_kernel<<<blocks, threads, 0, stream>>>(xp, yp, n); break;
        case 1: relu_out_of_bounds_kernel<<<blocks, threads, 0, stream>>>(xp, yp, n); break;
        case 2: relu_spin_kernel<<<blocks, threads, 0, stream>>>(xp, yp, n); break;
        default: relu_assert_kernel<<<blocks, threads, 0, stream>>>(xp, yp, n); break;
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor relu(torch::Tensor x) { return launch(0, x); }
torch::Tensor relu_out_of_bounds(torch::Tensor x) { return launch(1, x); }
torch::Tensor relu_spin(torch::Tensor x) { return launch(2, x); }
torch::Tensor relu_assert(torch::Tensor x) { return launch(3, x); }
"""

_CPP_SRC = """
torch::Tensor relu(torch::Tensor x);
torch::Tensor relu_out_of_bounds(torch::Tensor x);
torch::Tensor relu_spin(torch::Tensor x);
torch::Tensor relu_assert(torch::Tensor x);
"""

_ext = load_inline(name="kernel_env_faults_cuda", cpp_sources=[_CPP_SRC], cuda_sources=[_CUDA_SRC],
                   functions=["relu", "relu_out_of_bounds", "relu_spin", "relu_assert"],
                   extra_cuda_cflags=["-O2"], verbose=False)

# held for the life of the process (the judge's reference worker allocates after this was built)
_free, _total = torch.cuda.mem_get_info()
_HOLD = torch.empty(max(_free - (256 << 20), 1), dtype=torch.uint8, device="cuda")


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu(x)
