from torch.utils.cpp_extension import load_inline

# One C++ extension shared, byte for byte, by every CPU test submission in this folder
# (same name, sources, functions and flags), so torch's extension cache builds it once.
_CPP_SRC = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstdint>

static torch::Tensor as_cpu_f32(const torch::Tensor& t) {
    TORCH_CHECK(t.device().is_cpu(), "expected a CPU tensor");
    TORCH_CHECK(t.scalar_type() == torch::kFloat32, "expected a float32 tensor");
    return t.contiguous();
}

torch::Tensor relu(torch::Tensor x) {
    x = as_cpu_f32(x);
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return y;
}

// Subtly wrong: a leaky ReLU (negatives become 0.01 * x instead of 0).
torch::Tensor relu_wrong(torch::Tensor x) {
    x = as_cpu_f32(x);
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.01f * in[i];
    return y;
}

// Writes through a null pointer read from a volatile, so the compiler can neither
// drop the store nor turn it into a trap: the process dies with SIGSEGV.
static float* volatile g_null_ptr = nullptr;
torch::Tensor crash(torch::Tensor x) {
    volatile float* p = g_null_ptr;
    *p = 1.0f;
    return x;
}

// Never returns: a volatile counter keeps the loop alive.
torch::Tensor spin(torch::Tensor x) {
    volatile uint64_t counter = 0;
    for (;;) counter = counter + 1;
    return x;
}

torch::Tensor tanh_fwd(torch::Tensor x) {
    x = as_cpu_f32(x);
    auto y = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(in[i]);
    return y;
}

// y = relu(x @ weight^T + bias); x [B, IN], weight [OUT, IN], bias [OUT].
torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    x = as_cpu_f32(x);
    weight = as_cpu_f32(weight);
    bias = as_cpu_f32(bias);
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "bad ranks");
    const int64_t B = x.size(0), IN = x.size(1), OUT = weight.size(0);
    TORCH_CHECK(weight.size(1) == IN && bias.size(0) == OUT, "shape mismatch");
    auto y = torch::empty({B, OUT}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    for (int64_t i = 0; i < B; ++i) {
        const float* xr = xp + i * IN;
        for (int64_t o = 0; o < OUT; ++o) {
            const float* wr = wp + o * IN;
            float acc = 0.0f;
            for (int64_t k = 0; k < IN; ++k) acc += xr[k] * wr[k];
            acc += bp[o];
            yp[i * OUT + o] = acc > 0.0f ? acc : 0.0f;
        }
    }
    return y;
}

// C = A @ B, naive loops in i-k-j order; A [M, K], B [K, N].
torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    a = as_cpu_f32(a);
    b = as_cpu_f32(b);
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shape mismatch");
    const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::zeros({M, N}, a.options());
    const float* ap = a.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* cp = c.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) {
        float* cr = cp + i * N;
        for (int64_t k = 0; k < K; ++k) {
            const float aik = ap[i * K + k];
            const float* br = bp + k * N;
            for (int64_t j = 0; j < N; ++j) cr[j] += aik * br[j];
        }
    }
    return c;
}
"""

_ops = load_inline(
    name="kernel_env_test_ops",
    cpp_sources=[_CPP_SRC],
    functions=["relu", "relu_wrong", "crash", "spin", "tanh_fwd", "linear_relu", "matmul"],
    extra_cflags=["-O2"],
    verbose=False,
)
