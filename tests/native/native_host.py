"""Hostile C++ host code for the native fault battery (tests/test_native_faults.py, on the CPU device
and, where there is a GPU, on cuda: the same host code beside CUDA kernels). Native code is what the static checks on a submission's Python
cannot see: here it forks orphans, writes into every cache the judge keeps and into /dev/shm, leaves a
System V segment, connects to a socket, reads other processes' environment, fork-bombs, signals the
judge, swaps files of its folder the judge reads (an output slot on the CPU) for named pipes or links,
spins and segfaults.

What it does is chosen by a line of the submission, `# NATIVE: action arg; action arg; ...`, read at
load (a static initializer, in every process that loads the module: the build process and the run
process) and by `act()` (called from forward). The C++ never changes, so every submission of the
battery shares one build (judge/builds.py build_key: the long string constants).

Actions:
  orphan NAME        fork; the child starts a session of its own, names itself NAME and sleeps
  bomb N             fork N children that sleep (bounded: the test must stay alive)
  write PATH         create PATH (and truncate it if it exists): refused or landed
  rewrite-self -     append to the module file it was loaded from (refused: only compilers make it)
  sysv KEY           create a System V shared memory segment under KEY (hex) and leave it
  connect PORT       connect to 127.0.0.1:PORT
  secret TEXT        read every /proc/*/environ and /proc/*/cmdline it can; exit(42) if TEXT is there
  signal PID         kill(getppid(), SIGUSR2) unless it is 0, and kill(PID, SIGUSR2) (the judge's pid)
  fifo PATH          replace PATH with a named pipe (a reader that opens it waits for a writer)
  link PATH>TARGET   replace PATH with a symbolic link to TARGET
  segv -             write through a null pointer
  spin -             never return
"""
NATIVE_CPP = r"""
#include <torch/extension.h>
#include <arpa/inet.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/ipc.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void native_one(const std::string& what, const std::string& arg) {
    if (what == "orphan") {
        pid_t p = fork();
        if (p == 0) {
            setsid();
            if (fork() != 0) _exit(0);  // the grandchild: nobody's child but init's
            prctl(PR_SET_NAME, arg.c_str(), 0, 0, 0);
            for (;;) sleep(1000);
        }
    } else if (what == "bomb") {
        int n = std::atoi(arg.c_str());
        for (int i = 0; i < n; ++i) {
            pid_t p = fork();
            if (p == 0) { prctl(PR_SET_NAME, "kenv_bomb", 0, 0, 0); for (;;) sleep(1000); }
            if (p < 0) break;
        }
    } else if (what == "write") {
        int fd = open(arg.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) { (void)!write(fd, "planted", 7); close(fd); }
    } else if (what == "rewrite-self") {
        Dl_info info;
        if (dladdr((void*)&native_one, &info) && info.dli_fname) {
            int fd = open(info.dli_fname, O_WRONLY | O_APPEND);
            if (fd >= 0) { (void)!write(fd, "planted", 7); close(fd); }
        }
    } else if (what == "sysv") {
        key_t key = (key_t)std::strtol(arg.c_str(), nullptr, 16);
        int id = shmget(key, 4096, IPC_CREAT | 0666);
        if (id >= 0) {
            void* mem = shmat(id, nullptr, 0);
            if (mem != (void*)-1) { std::memcpy(mem, "planted", 7); shmdt(mem); }
        }
    } else if (what == "connect") {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)std::atoi(arg.c_str()));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (s >= 0) { connect(s, (sockaddr*)&a, sizeof a); close(s); }
    } else if (what == "secret") {
        DIR* d = opendir("/proc");
        if (!d) return;
        while (dirent* e = readdir(d)) {
            for (const char* f : {"environ", "cmdline"}) {
                std::ifstream in(std::string("/proc/") + e->d_name + "/" + f, std::ios::binary);
                std::stringstream ss;
                ss << in.rdbuf();
                if (ss.str().find(arg) != std::string::npos) _exit(42);
            }
        }
        closedir(d);
    } else if (what == "signal") {
        if (getppid() != 0) kill(getppid(), SIGUSR2);
        kill((pid_t)std::atoi(arg.c_str()), SIGUSR2);
    } else if (what == "fifo") {
        unlink(arg.c_str());
        mkfifo(arg.c_str(), 0644);
    } else if (what == "link") {
        std::size_t cut = arg.find('>');
        if (cut == std::string::npos) return;
        std::string path = arg.substr(0, cut);
        unlink(path.c_str());
        (void)!symlink(arg.substr(cut + 1).c_str(), path.c_str());
    } else if (what == "segv") {
        static float* volatile null_ptr = nullptr;
        volatile float* p = null_ptr;
        *p = 1.0f;
    } else if (what == "spin") {
        volatile uint64_t counter = 0;
        for (;;) counter = counter + 1;
    }
}

// `# NATIVE: action arg; action arg` in the submission (the process's folder holds it)
static std::string native_plan(const char* tag) {
    std::ifstream in("submission.py");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(tag, 0) == 0) return line.substr(std::strlen(tag));
    return "";
}

static void native_run(const std::string& plan) {
    std::stringstream all(plan);
    std::string step;
    while (std::getline(all, step, ';')) {
        std::stringstream one(step);
        std::string what, arg;
        one >> what >> arg;
        if (!what.empty()) native_one(what, arg);
    }
}

// at load, before any Python of the submission calls it: a static initializer
static int native_at_load = (native_run(native_plan("# NATIVE: ")), 0);

torch::Tensor act(torch::Tensor x) {
    native_run(native_plan("# NATIVE_FORWARD: "));
    return x;
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat32, "expected a CPU float32 tensor");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return y;
}
"""

TEMPLATE = '''"""Native fault battery (tests/native/native_host.py): {doc}"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

{marker}
_native = load_inline(name="kernel_env_native_faults", cpp_sources=[{cpp!r}], functions=["act", "relu"],
                      extra_cflags=["-O1"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _native.relu(_native.act(x))
'''


# The same host code with CUDA kernels beside it: a ReLU, one that never ends, one that writes an
# illegal address (forward picks one). One build for every CUDA submission of the battery.
CUDA_HOST = NATIVE_CPP.replace("#include <torch/extension.h>", "#include <torch/extension.h>\n"
                               "torch::Tensor relu_cuda(torch::Tensor x);\ntorch::Tensor spin_kernel(torch::Tensor x);\n"
                               "torch::Tensor illegal_kernel(torch::Tensor x);")
CUDA_HOST = CUDA_HOST[:CUDA_HOST.index("torch::Tensor relu(torch::Tensor x)")]
CUDA_SRC = r"""
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
CUDA_TEMPLATE = '''"""Native fault battery on CUDA (tests/native/native_host.py): {doc}
expected: {expected}"""
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
CUDA_FORWARD = {"relu": "_native.relu_cuda(_native.act(x))", "spin": "_native.relu_cuda(_native.spin_kernel(x))",
                "illegal": "_native.relu_cuda(_native.illegal_kernel(x))"}


def submission(doc: str, at_load: str = "", in_forward: str = "", device: str = "cpu", kernel: str = "relu",
               expected: str = "") -> str:
    """A submission for a ReLU task (level1/1_Small_ReLU; on cuda any float32 ReLU task) whose C++ does
    `at_load` when loaded and `in_forward` in every forward call (the action lists of the module
    docstring); on cuda `kernel` is the CUDA kernel forward launches (CUDA_FORWARD)."""
    marker = "\n".join(line for line in (f"# NATIVE: {at_load}" if at_load else "",
                                         f"# NATIVE_FORWARD: {in_forward}" if in_forward else "") if line)
    if device == "cuda":
        return CUDA_TEMPLATE.format(doc=doc, expected=expected or "see the test", marker=marker, cpp=CUDA_HOST,
                                    cu=CUDA_SRC, forward=CUDA_FORWARD[kernel])
    return TEMPLATE.format(doc=doc, marker=marker, cpp=NATIVE_CPP)
