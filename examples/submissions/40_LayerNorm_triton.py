"""KernelBench level1/40_LayerNorm in Triton: nn.LayerNorm((64, 256, 256)) on a (16, 64, 256, 256) input.

Each normalisation group has 4,194,304 elements, so the statistics are split over many programs:
  1. each program takes a CHUNK of one group and stores the chunk's mean and its sum of squared
     deviations from that mean (fp32, no E[x^2] - E[x]^2 cancellation);
  2. one program per group merges the chunk statistics exactly (Chan's parallel formula) into the
     group's mean and 1/sqrt(var + eps) (biased variance, as nn.LayerNorm);
  3. an elementwise pass y = (x - mean) * rstd * weight + bias.
Offsets are 64-bit.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ln_partial_stats(x_ptr, pmean_ptr, pm2_ptr, group, nchunks, CHUNK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // nchunks
    c = pid % nchunks
    start = c * CHUNK
    offs = start + tl.arange(0, CHUNK)
    mask = offs < group
    x = tl.load(x_ptr + row * group + offs, mask=mask, other=0.0)
    n_c = tl.minimum(group - start, CHUNK).to(tl.float32)
    mean_c = tl.sum(x, axis=0) / n_c
    d = tl.where(mask, x - mean_c, 0.0)
    m2_c = tl.sum(d * d, axis=0)
    tl.store(pmean_ptr + pid, mean_c)
    tl.store(pm2_ptr + pid, m2_c)


@triton.jit
def _ln_merge(pmean_ptr, pm2_ptr, mean_ptr, rstd_ptr, group, nchunks, eps,
              CHUNK: tl.constexpr, BLOCK_P: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * nchunks
    idx = tl.arange(0, BLOCK_P)
    acc = tl.zeros((BLOCK_P,), dtype=tl.float32)
    for p0 in range(0, nchunks, BLOCK_P):
        c = p0 + idx
        m = c < nchunks
        n_c = tl.minimum(group - c.to(tl.int64) * CHUNK, CHUNK).to(tl.float32)
        mu = tl.load(pmean_ptr + base + c, mask=m, other=0.0)
        acc += tl.where(m, n_c * mu, 0.0)
    mean = tl.sum(acc, axis=0) / group
    acc2 = tl.zeros((BLOCK_P,), dtype=tl.float32)
    for p0 in range(0, nchunks, BLOCK_P):
        c = p0 + idx
        m = c < nchunks
        n_c = tl.minimum(group - c.to(tl.int64) * CHUNK, CHUNK).to(tl.float32)
        mu = tl.load(pmean_ptr + base + c, mask=m, other=0.0)
        q = tl.load(pm2_ptr + base + c, mask=m, other=0.0)
        dm = mu - mean
        acc2 += tl.where(m, q + n_c * dm * dm, 0.0)
    var = tl.sum(acc2, axis=0) / group
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, 1.0 / tl.sqrt(var + eps))


@triton.jit
def _ln_normalize(x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, y_ptr, group, nblocks,
                  BLOCK: tl.constexpr, AFFINE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // nblocks
    cb = pid % nblocks
    offs = cb * BLOCK + tl.arange(0, BLOCK)
    mask = offs < group
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    x = tl.load(x_ptr + row * group + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    y = (x - mean) * rstd
    if AFFINE:
        w = tl.load(w_ptr + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0)
        y = y * w + b
    tl.store(y_ptr + row * group + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        # Same construction as Model, so the same seed gives the same weight and bias.
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = tuple(self.ln.normalized_shape)
        assert tuple(x.shape[x.dim() - len(shape):]) == shape, "input does not end with normalized_shape"
        group = 1
        for s in shape:
            group *= s
        x = x.contiguous()
        y = torch.empty_like(x)
        rows = x.numel() // group
        if rows == 0:
            return y
        CHUNK = min(4096, triton.next_power_of_2(group))
        nchunks = triton.cdiv(group, CHUNK)
        pmean = torch.empty((rows, nchunks), device=x.device, dtype=torch.float32)
        pm2 = torch.empty((rows, nchunks), device=x.device, dtype=torch.float32)
        mean = torch.empty((rows,), device=x.device, dtype=torch.float32)
        rstd = torch.empty((rows,), device=x.device, dtype=torch.float32)
        _ln_partial_stats[(rows * nchunks,)](x, pmean, pm2, group, nchunks, CHUNK=CHUNK, num_warps=8)
        BLOCK_P = min(1024, triton.next_power_of_2(nchunks))
        _ln_merge[(rows,)](pmean, pm2, mean, rstd, group, nchunks, float(self.ln.eps),
                           CHUNK=CHUNK, BLOCK_P=BLOCK_P, num_warps=4)
        affine = self.ln.weight is not None
        w = self.ln.weight.contiguous() if affine else x
        if affine and self.ln.bias is not None:
            b = self.ln.bias.contiguous()
        elif affine:
            b = torch.zeros_like(w)
        else:
            b = x
        BLOCK = min(4096, triton.next_power_of_2(group))
        nblocks = triton.cdiv(group, BLOCK)
        _ln_normalize[(rows * nblocks,)](x, w, b, mean, rstd, y, group, nblocks,
                                         BLOCK=BLOCK, AFFINE=affine, num_warps=8)
        return y
