"""KernelBench level2/59_Matmul_Swish_Scaling, a partial (KernelBench-policy) answer in Triton.

The GEMM x @ W^T stays in PyTorch (F.linear without its bias: cuBLAS, fp32); the epilogue
  v = acc + b[n];  out = v * sigmoid(v) * scaling_factor
is one Triton kernel: bias, Swish and scaling in a single read and write of the (128, 32768) GEMM
output (the reference: bias in cuBLAS, then sigmoid, multiply and scale as separate passes).

Each program takes a BLOCK_M x BLOCK_N tile of the row-major (M, N) output; the bias tile is loaded
once per program and broadcast over its rows. Offsets are 64-bit. sigmoid(v) = 1 / (1 + exp(-v)), as
torch computes it in fp32.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _bias_swish_scale_kernel(acc_ptr, bias_ptr, out_ptr, M, N, scale,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
    cols = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N).to(tl.int64)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    offs = rows[:, None] * N + cols[None, :]
    a = tl.load(acc_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    b = tl.load(bias_ptr + cols, mask=cmask, other=0.0)
    v = a + b[None, :]
    sig = 1.0 / (1.0 + tl.exp(-v))
    out = v * sig * scale
    tl.store(out_ptr + offs, out, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        # Constructed exactly as Model: same parameters, same values under the same seed.
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        acc = F.linear(x, self.matmul.weight).contiguous()     # cuBLAS GEMM, the bias goes to the epilogue
        assert acc.dtype == torch.float32, "fp32 only"
        bias = self.matmul.bias.contiguous()
        N = acc.shape[-1]
        M = acc.numel() // N if N > 0 else 0
        out = torch.empty_like(acc)
        if acc.numel() == 0:
            return out
        BLOCK_M, BLOCK_N = 4, 1024
        grid = (triton.cdiv(N, BLOCK_N), triton.cdiv(M, BLOCK_M))
        _bias_swish_scale_kernel[grid](acc, bias, out, M, N, float(self.scaling_factor),
                                       BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=8)
        return out
