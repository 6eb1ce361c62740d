"""The value-hashing input maps of harness.transform_input ("uniform", "signed", "heavy") in one pass
over a CUDA tensor: one Triton kernel, bit for bit the torch passes' result.

Used on both sides of the trust line, like harness.py. The torch passes hash a chunk with ~10
elementwise kernels, each reading and writing it: on a 6.4 GB input that is ~50-90 ms of device slot
per trial on an H100, this kernel one read and one write. Both the candidate's process and the
reference worker make a trial's inputs from (seed, distribution); a process where this kernel cannot be
used makes them with the torch passes, so the two must agree bit for bit: integer hashing, exact float
steps (2u - 1, 1 - u) and correctly rounded sqrt and division (the torch passes use the same), and the
same rounding to the tensor's dtype. tests/test_input_maps.py checks it (Triton's interpreter on the
CPU); experiments/bench_input_maps.py on a GPU.

A run process compiles the float32 variants when it warms up, before any candidate code is in it;
the judge publishes that first Triton cache for the run processes after it (pools.triton_warm_dir),
so they load them instead.
"""
from __future__ import annotations

import torch

MIN_NUMEL = 1 << 20  # below this the torch passes cost less than a kernel launch
CODES = {"uniform": 0, "signed": 1, "heavy": 2}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_STATE: dict = {}  # "kernel": the Triton kernel, or None where Triton cannot be used


def _kernel():
    if "kernel" in _STATE:
        return _STATE["kernel"]
    try:
        import triton
        import triton.language as tl
    except ImportError:
        _STATE["kernel"] = None
        return None

    @triton.jit(do_not_specialize=["n"])
    def value_map(x_ptr, out_ptr, n, DIST: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
        # harness._value_hash32: one xorshift-multiply round on the float32 bits, int32 arithmetic
        h = x.to(tl.int32, bitcast=True)
        h = h ^ ((h >> 16) & 0xFFFF)
        h = h * 0x45D9F3B
        h = h ^ ((h >> 16) & 0xFFFF)
        if DIST == 1:  # signed: negated where the hash's top bit is clear, by flipping the sign bit
            # (as torch's negation: a compiled `-x` may be 0 - x, which makes -0.0 of +0.0 no more)
            y = (x.to(tl.int32, bitcast=True) ^ tl.where(h >= 0, -2147483648, 0)).to(tl.float32, bitcast=True)
        else:
            u = ((h >> 8) & 0xFFFFFF).to(tl.float32) * (1.0 / 16777216.0)  # harness._value_hash01
            if DIST == 0:  # uniform in (-1, 1), zeros kept
                y = tl.where(x == 0.0, x, 2.0 * u - 1.0)
            else:  # heavy: x / sqrt(max(1 - u, 1e-6)), correctly rounded
                d = tl.sqrt_rn(tl.maximum(1.0 - u, 1e-6))
                y = x * tl.math.div_rn(tl.full(d.shape, 1.0, tl.float32), d)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)

    _STATE["kernel"] = value_map
    return value_map


def applies(x: torch.Tensor, dist: str) -> bool:
    """Whether map_values(x, dist) is used for x: a large contiguous CUDA tensor of a dtype this process
    warmed the kernel for, aligned as the warm-up's were (no compile in the device slot), one of the
    hashing maps. A decision both sides make alike; and where one
    cannot use the kernel, its torch passes give the same values."""
    return (dist in CODES and x.device.type == "cuda" and x.dtype in _STATE.get("warm", ()) and x.numel() >= MIN_NUMEL
            and x.is_contiguous() and x.data_ptr() % 16 == 0 and _kernel() is not None)


def map_values(x: torch.Tensor, dist: str, block: int = 1024) -> torch.Tensor:
    """A new tensor: x mapped by `dist` elementwise, in one pass (x is left alone). bfloat16 inputs map
    into float32, rounded by torch's own conversion after (Triton's interpreter truncates to bfloat16)."""
    out = torch.empty_like(x, dtype=torch.float32 if x.dtype == torch.bfloat16 else x.dtype)
    n = x.numel()

    def launch():
        _kernel()[(-(-n // block),)](x, out, n, DIST=CODES[dist], BLOCK=block, num_warps=4)
    if x.device.type == "cuda":
        with torch.cuda.device(x.device):
            launch()
    else:  # CPU tensors: Triton's interpreter (the tests)
        launch()
    return out.to(x.dtype)


def warm(device: torch.device, dtypes=(torch.float32,)) -> bool:
    """Compile (or load from the process's Triton cache) the variants of every map for `dtypes` now,
    outside any device slot; tensors of other dtypes take the torch passes (the same values). float32
    alone by default: KernelBench's inputs are float32, and each variant costs a run process ~0.1 s of
    CPU at its start. Returns whether the kernel can be used."""
    if device.type != "cuda" or _kernel() is None:
        return False
    try:
        for dtype in dtypes:
            x = torch.ones(MIN_NUMEL, dtype=dtype, device=device)
            for dist in CODES:
                map_values(x, dist)
        torch.cuda.synchronize(device)
    except Exception:  # a Triton that cannot compile here: the torch passes make the same inputs
        _STATE["kernel"] = None
        return False
    _STATE["warm"] = tuple(_STATE.get("warm", ())) + tuple(dtypes)
    return True
