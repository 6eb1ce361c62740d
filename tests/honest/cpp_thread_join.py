"""Honest: a C++ kernel that splits the work with a second thread (std::thread) and joins it before
returning: the threaded counterpart of a CUDA kernel that uses a side stream and waits on it.

Task: level1/1_Small_ReLU. Expected: timed, correct. It has an extension of its own (one extra build
per test session): the shared test extension has no threaded function.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
#include <thread>

static void relu_range(const float* in, float* out, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

torch::Tensor relu_two_threads(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "float32 CPU tensor expected");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel(), half = n / 2;
    std::thread helper(relu_range, in, out, half, n);   // second half on another thread
    relu_range(in, out, 0, half);
    helper.join();                                      // waits: the output is complete on return
    return y;
}
"""

_ops = load_inline(name="kernel_env_test_threads", cpp_sources=[_CPP_SRC], functions=["relu_two_threads"],
                   extra_cflags=["-O2"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ops.relu_two_threads(x)
