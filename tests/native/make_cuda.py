"""Writes the CUDA battery (tests/native/*_cuda.py) from native_host.py's host code: python make_cuda.py.

Each file is a submission for level1/19_ReLU. Its `# NATIVE:` lines hold placeholders that the device
check fills in before submitting: @CACHE@ (the judge's cache folder), @PORT@ (a loopback listener it
started), @JUDGE_PID@, @SECRET@ (a value it put in the judge's environment), @TOKEN@ (a fresh name part).
"""
from pathlib import Path

from native_host import NATIVE_CPP

HOST = NATIVE_CPP.replace("#include <torch/extension.h>", "#include <torch/extension.h>\n"
                          "torch::Tensor relu_cuda(torch::Tensor x);\ntorch::Tensor spin_kernel(torch::Tensor x);\n"
                          "torch::Tensor illegal_kernel(torch::Tensor x);")
HOST = HOST[:HOST.index("torch::Tensor relu(torch::Tensor x)")]
CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_k(const float* in, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}
torch::Tensor relu_cuda(torch::Tensor x) {
    x = x.contiguous();
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
__global__ void spin_k(volatile int* flag) { while (*flag == 0) {} }
torch::Tensor spin_kernel(torch::Tensor x) {
    auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
    spin_k<<<1, 1>>>(flag.data_ptr<int>());
    return x;
}
__global__ void illegal_k(float* p) { p[threadIdx.x] = 1.0f; }
torch::Tensor illegal_kernel(torch::Tensor x) {
    illegal_k<<<1, 32>>>((float*)0x10);
    cudaDeviceSynchronize();
    return x;
}
"""
TEMPLATE = '''"""Native fault battery on CUDA (tests/native/make_cuda.py): {doc}
task: level1/19_ReLU; expected: {expected}"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

{marker}
_native = load_inline(name="kernel_env_native_faults_cuda", cpp_sources=[{cpp!r}], cuda_sources=[{cu!r}],
                      functions=["act", "relu_cuda", "spin_kernel", "illegal_kernel"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {forward}
'''
EVERYTHING = ("orphan kenv_orphan@TOKEN@; bomb 20; sysv 4b45c0de; connect @PORT@; secret @SECRET@; signal @JUDGE_PID@; "
              "write @CACHE@/triton/planted_@TOKEN@; write @CACHE@/triton-judge/planted_@TOKEN@; "
              "write @CACHE@/triton-warm/planted_@TOKEN@; write @CACHE@/pycache/planted_@TOKEN@; "
              "write @CACHE@/pch/planted_@TOKEN@; write @CACHE@/torch_extensions/planted_@TOKEN@; "
              "write /dev/shm/kenv_native_@TOKEN@; write /dev/kenv_native_@TOKEN@")
FILES = {
    "everything_at_load_cuda.py": ("every host-side fault at load, contained (open: a CUDA run process keeps the host's /dev/shm and "
                                   "IPC namespace, so /dev/shm/kenv_native_* and System V key 0x4b45c0de may outlive it)",
                                   "timed, correct",
                                   f"# NATIVE: {EVERYTHING}", "_native.relu_cuda(_native.act(x))"),
    "host_segfault_cuda.py": ("host code segfaults in forward", "run crash",
                              "# NATIVE_FORWARD: orphan kenv_seg@TOKEN@; segv -", "_native.relu_cuda(_native.act(x))"),
    "host_spin_cuda.py": ("host code spins in forward", "run run_timeout",
                          "# NATIVE_FORWARD: bomb 10; spin -", "_native.relu_cuda(_native.act(x))"),
    "spinning_kernel_cuda.py": ("a kernel that never ends", "run run_timeout", "",
                                "_native.relu_cuda(_native.spin_kernel(x))"),
    "illegal_address_cuda.py": ("a kernel writes an illegal address", "run crash or runtime_error", "",
                                "_native.relu_cuda(_native.illegal_kernel(x))"),
}

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    for name, (doc, expected, marker, forward) in FILES.items():
        (here / name).write_text(TEMPLATE.format(doc=doc, expected=expected, marker=marker, cpp=HOST, cu=CUDA,
                                                 forward=forward))
