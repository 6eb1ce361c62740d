"""TRUSTED: speed-of-light time of a task: t_min = max(FLOPs / peak rate, bytes / bandwidth).

FLOPs: torch.utils.flop_counter.FlopCounterMode over the reference forward, plus a fallback for ops it
does not count (elementwise ops, reductions, softmax, norms...): one FLOP per element of the largest
tensor the op touches. That undercounts rather than overcounts, so t_min stays a lower bound.
Bytes: inputs + outputs + parameters and buffers, each read or written once.
Peaks: measured once per device (a large copy; a large matmul per dtype, fp32 with TF32 off) and
cross-checked against a table of datasheet numbers.
"""
from __future__ import annotations

import logging
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

log = logging.getLogger("kernel_env.roofline")

# Datasheet numbers (dense, no sparsity): bytes/s and FLOP/s. Matched by substring of the device name.
KNOWN_GPUS = {
    "H200": {"bandwidth": 4.8e12, "float32": 67e12, "bfloat16": 989e12, "float16": 989e12},
    "H100": {"bandwidth": 3.35e12, "float32": 67e12, "bfloat16": 989e12, "float16": 989e12},
    "A100": {"bandwidth": 2.0e12, "float32": 19.5e12, "bfloat16": 312e12, "float16": 312e12},
    "L40S": {"bandwidth": 0.864e12, "float32": 91.6e12, "bfloat16": 362e12, "float16": 362e12},
    "A10G": {"bandwidth": 0.6e12, "float32": 31.2e12, "bfloat16": 125e12, "float16": 125e12},
}

# Ops that move or reinterpret data without arithmetic: not FLOPs.
_NO_FLOP_OPS = {
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "detach", "alias", "as_strided",
    "slice", "select", "unsqueeze", "squeeze", "clone", "copy_", "_to_copy", "contiguous", "empty", "empty_like",
    "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "fill_", "zero_", "split", "split_with_sizes",
    "cat", "stack", "unbind", "lift_fresh", "new_empty", "new_zeros", "new_ones", "full", "full_like", "arange",
    "index_select", "gather", "narrow", "flatten", "unflatten", "view_as", "repeat", "pad", "constant_pad_nd",
    "_reshape_alias", "native_dropout", "bernoulli_", "rand", "randn", "randint", "normal_", "uniform_", "scalar_tensor",
    "masked_fill", "where", "_local_scalar_dense", "item", "eq", "ne", "lt", "gt", "le", "ge", "sort", "argsort",
    "topk", "flip", "roll", "diagonal", "tril", "triu", "embedding", "max_pool2d_with_indices", "max_pool3d_with_indices",
}


class _UncountedOps(TorchDispatchMode):
    """Adds one FLOP per element for ops that FlopCounterMode has no formula for."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = func._overloadpacket
        name = packet.__name__
        if packet not in flop_registry and name.rstrip("_") not in _NO_FLOP_OPS and name not in _NO_FLOP_OPS:
            sizes = [t.numel() for t in _tensors((args, kwargs, out))]
            self.flops += max(sizes, default=0)
        return out


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


def count_flops(run) -> tuple[float, float]:
    """(FLOPs counted by FlopCounterMode, FLOPs added by the fallback) for one call of run()."""
    fc = FlopCounterMode(display=False)
    extra = _UncountedOps()
    with fc, extra:
        run()
    return float(fc.get_total_flops()), float(extra.flops)


def tensor_bytes(objs) -> int:
    seen, total = set(), 0
    for t in _tensors(objs):
        key = (t.untyped_storage().data_ptr(), t.dtype, tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def model_state_bytes(model) -> int:
    if not isinstance(model, torch.nn.Module):
        return 0
    return tensor_bytes(list(model.parameters()) + list(model.buffers()))


def compute_dtype(inputs, model) -> str:
    """The dtype whose peak applies: the widest floating dtype among inputs and parameters."""
    dts = {t.dtype for t in _tensors(inputs) if t.is_floating_point()}
    if isinstance(model, torch.nn.Module):
        dts |= {p.dtype for p in model.parameters() if p.is_floating_point()}
    for name, dt in (("float64", torch.float64), ("float32", torch.float32), ("bfloat16", torch.bfloat16),
                     ("float16", torch.float16)):
        if dt in dts:
            return name
    return "float32"


def _time(fn, device, reps):
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / reps


def known_peaks(device_name: str) -> dict | None:
    for key, peaks in KNOWN_GPUS.items():
        if key in device_name:
            return peaks
    return None


def measure_peaks(device: torch.device, device_name: str) -> dict:
    """Copy bandwidth and matmul rates, measured; a datasheet entry, if known, is kept beside them."""
    cuda = device.type == "cuda"
    n_copy = (1 << 30) if cuda else (64 << 20)  # bytes per buffer
    a = torch.empty(n_copy // 4, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    dt = _time(lambda: b.copy_(a), device, 20 if cuda else 5)
    peaks = {"bandwidth": 2 * n_copy / dt}
    del a, b
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 problems are held to the plain fp32 rate
    try:
        dtypes = ("float32", "bfloat16", "float16") if cuda else ("float32",)
        for name in dtypes:
            n = 8192 if cuda else 512
            x = torch.randn(n, n, device=device, dtype=getattr(torch, name))
            y = torch.randn(n, n, device=device, dtype=getattr(torch, name))
            dt = _time(lambda: x @ y, device, 10 if cuda else 5)
            peaks[name] = 2 * n**3 / dt
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    if not cuda:
        peaks["bfloat16"] = peaks["float16"] = peaks["float32"]
    table = known_peaks(device_name)
    if table:
        for k, v in table.items():
            if not (0.3 * v <= peaks[k] <= 1.2 * v):
                log.warning("measured %s %.3g on %s is far from the datasheet %.3g", k, peaks[k], device_name, v)
        peaks["datasheet"] = table
    peaks["float64"] = peaks["float32"]
    return peaks


def speed_of_light(flops: float, nbytes: float, peaks: dict, dtype_name: str) -> dict:
    t_compute = flops / peaks.get(dtype_name, peaks["float32"])
    t_memory = nbytes / peaks["bandwidth"]
    return {"t_min_ms": max(t_compute, t_memory) * 1e3, "bound": "compute" if t_compute > t_memory else "memory",
            "t_compute_ms": t_compute * 1e3, "t_memory_ms": t_memory * 1e3}
