"""Measurement helpers used on BOTH sides of the trust line: by the candidate process
(kernel_env/candidate/runner.py) and by the trusted reference worker (kernel_env/judge/reference_worker.py).

Keeping one copy means the reference and the candidate are seeded, fed and timed by the same code, so
their numbers compare. Nothing here decides a verdict: the judge never trusts a value produced by
this code inside the candidate process without checking it (see judge/service.py).
"""
from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from kernel_env import fused_maps

# Output exchange: the judge allocates output slots, the candidate copies its outputs into them
# (make_slots / open_slots / fill_slots). Only JSON travels from the candidate, so the trusted side
# never unpickles anything a candidate wrote.
DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


# fp32 problems are computed in fp32: cuDNN would otherwise run fp32 convolutions in TF32 (its
# default), making the reference less precise than the 1e-4 tolerance and faster than the fp32 roofline.
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False


def load_module(path: str | Path, name: str):
    """Import a Python file as a fresh module (the problem file or the submission)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def device_of(kind: str) -> torch.device:
    return torch.device("cuda:0" if kind == "cuda" else "cpu")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _cuda_sync(device)  # device-wide: waits for work on every stream


def free_cached(device: torch.device) -> None:
    """Give this process's cached, unused device memory back to the device (for another process)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def peak_memory(device: torch.device) -> int | None:
    """The most device memory torch has allocated in this process so far, MiB (None on the CPU)."""
    return torch.cuda.max_memory_allocated(device) >> 20 if device.type == "cuda" else None


# Input distributions for correctness trials: a kernel that is right only for the task's
# own inputs (standard normal, or uniform in [0, 1) for most KernelBench problems) must fail. Each is
# a deterministic elementwise map of the task's own draw, applied to its floating-point tensors only:
# both processes get identical inputs from (seed, name), and structure built into the inputs survives
# because equal values map to equal values and zeros stay zero (triangular, masked and symmetric
# inputs). Where a map needs randomness it hashes the value itself. Whether a distribution suits a
# task is decided by the trusted reference worker (the reference output must stay finite).
INPUT_DISTS = {
    "normal": "the task's own get_inputs()",
    "uniform": "uniform in (-1, 1), zeros and equal values kept",
    "heavy": "heavy-tailed (values scaled by a Pareto factor: a few up to ~1000x larger)",
    "signed": "random signs (about half the values negated)",
    "positive": "all non-negative (|x| of the task's draw)",
    "large": "large magnitudes (1024x the task's draw)",
    "small": "small magnitudes (the task's draw / 1024)",
    "edges": "zeros and ties (the task's draw rounded to a coarse grid)",
}
ALT_DISTS = tuple(d for d in INPUT_DISTS if d != "normal")
# What each distribution tests. An evaluation's first alternative trials take one of each family, so a
# kernel right only for one sign, one magnitude or inputs without ties fails every evaluation, not the
# share of them whose random draw happened to miss its blind spot (19_ReLU's own inputs are all
# non-negative: a kernel wrong on negatives passed when neither sign-changing map was drawn).
DIST_FAMILIES = (("uniform", "signed"), ("large", "small", "heavy"), ("edges", "positive"))


def _value_hash32(t: torch.Tensor) -> torch.Tensor:
    """One xorshift-multiply round on each element's float32 bits, as int32 (the uint32 result's bits).

    In int32, half the memory traffic of int64 (inputs of GBs, in the device slot): `>>` sign-extends,
    so the shifted bits are masked to make it the logical shift; the product wraps modulo 2**32 like
    the uint32 one (tests/test_hacks.py checks it against the uint32 arithmetic done in int64)."""
    h = t.float().view(torch.int32)
    h = h ^ ((h >> 16) & 0xFFFF)
    h = h * 0x45D9F3B
    return h ^ ((h >> 16) & 0xFFFF)


def _value_hash01(t: torch.Tensor) -> torch.Tensor:
    """A pseudo-random number in [0, 1) per element that depends only on the element's value."""
    return ((_value_hash32(t) >> 8) & 0xFFFFFF).float() / 2.0**24  # 24 bits: exact in float32


_CHUNK = 1 << 24  # elements per step: the temporaries stay small next to inputs of several GB


def rms_finite(t: torch.Tensor, chunk: int = _CHUNK) -> float:
    """Root mean square of the finite elements (0.0 when none). On CUDA, float32 and float64 tensors
    whose elements are all finite take one pass (the norm); else a chunk at a time (no full-size copy).
    The chunks' sums of squares are float32 dot products (a quarter of the memory traffic of float64 passes:
    tensors of GBs, in the device slot), added up in float64; float64 when a float32 sum overflows."""
    if not t.is_floating_point():
        return 0.0
    if t.device.type == "cuda" and t.dtype in (torch.float32, torch.float64) and t.numel():
        # one pass: a finite norm means every element is finite and no square overflowed
        norm = float(torch.linalg.vector_norm(t))
        if math.isfinite(norm):
            return norm / math.sqrt(t.numel())
    if t.dtype != torch.float64:
        r = _rms_in(t, chunk, torch.float32)
        if math.isfinite(r):
            return r
    return _rms_in(t, chunk, torch.float64)


def _rms_in(t: torch.Tensor, chunk: int, dtype: torch.dtype) -> float:
    flat = t.reshape(-1)
    sq = torch.zeros((), dtype=torch.float64, device=t.device)
    n = torch.zeros((), dtype=torch.int64, device=t.device)
    for i in range(0, flat.numel(), chunk):
        c = flat[i:i + chunk].to(dtype)
        fin = torch.isfinite(c)
        z = torch.where(fin, c, torch.zeros((), dtype=dtype, device=c.device))
        sq += torch.dot(z, z)
        n += fin.sum()
    n = int(n)
    return math.sqrt(float(sq) / n) if n else 0.0


def _map_chunks(x: torch.Tensor, f) -> torch.Tensor:
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    for i in range(0, flat.numel(), _CHUNK):
        out[i:i + _CHUNK] = f(flat[i:i + _CHUNK])
    return out.view(x.shape)


def transform_input(x: torch.Tensor, dist: str) -> torch.Tensor:
    if dist == "normal" or not x.is_floating_point() or x.numel() == 0:
        return x
    if fused_maps.applies(x, dist):  # the same values in one pass (inputs of GBs, in the device slot)
        return fused_maps.map_values(x, dist).requires_grad_(x.requires_grad)
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    if dist == "uniform":
        f = lambda c: torch.where(c == 0, c.to(wide), (2.0 * _value_hash01(c) - 1.0).to(wide))
    elif dist == "heavy":  # P(factor > k) = 1/k^2, up to 1000
        # sqrt and division correctly rounded, as fused_maps' kernel has them: torch's float32 sqrt is
        # not on the CPU, its float64 one rounded to float32 is
        f = lambda c: c.to(wide) * (1.0 / torch.sqrt((1.0 - _value_hash01(c)).clamp_min(1e-6).double()).to(wide))
    elif dist == "signed":  # _value_hash01 < 0.5 is the hash's top bit clear: int32 >= 0
        f = lambda c: torch.where(_value_hash32(c) >= 0, -c.to(wide), c.to(wide))
    elif dist == "positive":
        f = lambda c: c.to(wide).abs()
    elif dist == "large":
        f = lambda c: c.to(wide) * 1024.0  # a power of two: exact, so zeros and ties are kept
    elif dist == "small":
        f = lambda c: c.to(wide) / 1024.0
    elif dist == "edges":
        rms = rms_finite(x) or 1.0
        step = 2.0 ** round(math.log2(rms)) / 2 if rms > 0 else 0.5  # a power of two: exact multiples
        f = lambda c: torch.round(c.to(wide) / step) * step
    else:
        raise ValueError(f"unknown input distribution {dist!r}")
    return _map_chunks(x, lambda c: f(c).to(x.dtype)).requires_grad_(x.requires_grad)


def warm_kernels(device: torch.device) -> None:
    """Run the input maps and the slot and copy kernels once on tiny tensors, so that loading their
    device code (CUDA loads each kernel at its first use) happens before the device slot."""
    for step in warm_steps(device):
        step()


def warm_steps(device: torch.device) -> list:
    """warm_kernels in steps: a run process warms up beside other candidates' runs and waits for the
    judge's word before each step, so that no step's GPU work falls into another candidate's run."""
    def maps(dtype):
        def step():
            x = torch.randn(64, device=device).to(dtype)
            for d in ALT_DISTS:
                transform_input(x, d)
            perturb_inputs([x], 1)
            poison_(x.clone())
            torch.empty_like(x).copy_(x)
            synchronize(device)
        return step
    steps = [maps(dtype) for dtype in (torch.float32, torch.float16, torch.bfloat16)]
    if device.type == "cuda":
        steps.append(lambda: fused_maps.warm(device))
        steps.append(lambda: _order_for(device))  # made and checked before a submission is imported
    return steps


def perturb_inputs(args: list, salt: int) -> list:
    """Fresh inputs for one timed call: float tensors scaled by (1 + salt/4096), a new tensor each call.

    Every timed call then sees content it has never seen (a cache keyed on data_ptr, id, shape or
    values cannot answer it), the distribution and structure (zeros, ties, symmetry) stay those of
    the task, and the reference worker rebuilds the exact inputs of any call from (seed, salt).
    """
    m = 1.0 + salt / 4096.0
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.dtype in (torch.float32, torch.float64):
                a = a * m  # exact enough and deterministic: the same op on the same device on both sides
            elif a.is_floating_point():
                a = (a.float() * m).to(a.dtype)
            else:
                a = a.clone()
        out.append(a)
    return out


def make_inputs(task_mod, seed: int, device: torch.device, dist: str = "normal") -> list:
    """The problem's inputs for one seed, created directly on the device (no host round trip), then
    mapped to the input distribution `dist` (INPUT_DISTS)."""
    torch.manual_seed(seed)
    with torch.device(device):
        inputs = task_mod.get_inputs()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    if dist != "normal":
        with torch.no_grad():
            inputs = [transform_input(x, dist) if isinstance(x, torch.Tensor) else x for x in inputs]
    return inputs


def make_model(cls, task_mod, seed: int, device: torch.device):
    """Construct Model or ModelNew the same way, so layers made in the same order get the same weights."""
    torch.manual_seed(seed)
    init_inputs = task_mod.get_init_inputs()
    torch.manual_seed(seed)
    with torch.device(device):
        model = cls(*init_inputs)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
    return model


def clone_args(args: list) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def call(model, args: list, seed: int):
    torch.manual_seed(seed)  # models with dropout or random ops draw the same numbers on both sides
    with torch.no_grad():
        return model(*args)


def flatten_outputs(out) -> list:
    if isinstance(out, (list, tuple)):
        items = list(out)
    else:
        items = [out]
    return [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in items]


# Timer primitives are bound when this module is imported, which the candidate runner does before it
# imports the submission: a submission that later patches torch.cuda.Event, synchronize or
# time.perf_counter does not reach these references.
_perf_counter = time.perf_counter
_median = statistics.median
_cuda_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_event_sync = torch.cuda.Event.synchronize
_event_query = torch.cuda.Event.query


_current_stream = torch.cuda.current_stream


def _order_for(device: torch.device):
    from kernel_env import ordered_timing  # ctypes and the CUDA driver, only where CUDA is timed
    return ordered_timing.timing_order(device)


def timing_method(device: torch.device) -> str:
    """How time_calls times on `device` in this process: in the cached reference profile's key."""
    if device.type != "cuda":
        return "cpu"
    return ORDERED_TIMING if not isinstance(_order_for(device), str) else HOST_TIMING


# the hold before a timed call (ordered timing): at least this long, and never longer than the cap (a
# call that synchronizes inside itself outlasts any hold; it is then timed with its launch, as before)
HOLD_MIN_US = 30.0
HOLD_MAX_US = 2000.0
CALIBRATION_CALLS = 10
STEADY_CALLS = 4  # a warm-up with warmup_steady_rel ends once this many calls in a row agree
FIRST_CALLS = 2   # the warm-up's first calls allocate and load what later calls reuse: their launches are no measure
JOIN_SLACK_MS = 0.0005
ORDERED_TIMING = "ordered-2"  # the methods' names, in the cached reference profile's key
HOST_TIMING = "host-1"


def spec_nbytes(dtype: torch.dtype, shape) -> int:
    """The bytes of a tensor of `dtype` and `shape` (an output slot's, before it exists)."""
    return math.prod(shape) * torch.empty(0, dtype=dtype).element_size()


def poison_(t: torch.Tensor) -> None:
    """Fill an output slot so that an element the candidate never wrote cannot match."""
    if t.is_floating_point():
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).min + 7)


# What the candidate gets in place of the name of torch's reference-count file for a CUDA slot: a name
# it cannot open (its /dev/shm is its own), so its copy of torch never touches the worker's counts.
NO_COUNTER = b"/kernel_env_no_counter"


def slot_pool(device: torch.device):
    """A memory pool of the caching allocator for one evaluation's CUDA slots (make_slots); None on the CPU."""
    return torch.cuda.MemPool() if device.type == "cuda" else None


def make_slots(specs: list, n: int, device: torch.device, folder: Path, pool=None) -> tuple[list, list, list]:
    """TRUSTED side: n sets of output slots shaped like the reference outputs, poisoned; (tensors,
    wire: what the candidate gets, counters: see below).

    The candidate copies its outputs into these; the judge reads them back from its own memory after
    the candidate has exited. On CUDA a slot is shared through a CUDA IPC handle (the outputs never
    leave the GPU); on the CPU it is a file mapped by both processes.

    torch counts a shared CUDA block's users in a file of /dev/shm that the consumer opens by name
    when it lets go of the block; the owner frees the block once the count is back at zero. The
    candidate gets NO_COUNTER instead of that name (so it needs no view of the host's /dev/shm, and
    cannot lower the count of a block it still maps), nothing to wait for (the slots are made
    before the wire is sent), and `counters` holds what the owner releases itself once the candidate
    has exited: release_slot_users.

    A CUDA IPC handle maps the whole segment its block was cut from, not the block alone: a candidate
    can reach every byte of it. So the slots come from `pool` (slot_pool: one per evaluation), whose
    segments hold nothing else: not the owner's other tensors (the reference's outputs it compares
    with, its model), not another evaluation's slots.
    """
    import base64
    import pickle
    from torch.multiprocessing.reductions import reduce_tensor
    if device.type == "cuda" and pool is None:
        raise ValueError("CUDA slots need a memory pool of their own (slot_pool)")
    tensors, wire, counters = [], [], []
    for i in range(n):
        row_t, row_w = [], []
        for k, sp in enumerate(specs):
            dtype, shape = DTYPES[sp["dtype"]], sp["shape"]
            if device.type == "cuda":
                with torch.cuda.use_mem_pool(pool, device):
                    t = torch.empty(shape, dtype=dtype, device=device)
                fn, args = reduce_tensor(t)
                args = list(args)
                if args[11] is not None:  # rebuild_cuda_tensor's ref_counter_handle, ref_counter_offset
                    counters.append((args[11], args[12]))
                    args[11] = NO_COUNTER
                    args[14] = False  # event_sync_required: the slots are synchronised below
                w = {"cuda_ipc": base64.b64encode(pickle.dumps((fn, tuple(args)))).decode()}
            else:
                path = folder / f"slot{i}_{k}.bin"
                nbytes = spec_nbytes(dtype, shape)
                t = torch.from_file(str(path), shared=True, size=max(nbytes, 1), dtype=torch.uint8)
                t = t[:nbytes].view(dtype).reshape(shape)
                st = path.stat()  # the file the judge reads back is this one, not what sits at the path later
                w = {"file": str(path), "nbytes": max(nbytes, 1), "inode": [st.st_dev, st.st_ino]}
            poison_(t)
            row_t.append(t)
            row_w.append({**w, "dtype": sp["dtype"], "shape": list(shape)})
        tensors.append(row_t)
        wire.append(row_w)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return tensors, wire, counters


def release_slot_users(counters: list) -> None:
    """TRUSTED side, once the candidate that mapped the slots has exited: the users it would have
    released (make_slots), released, so the slots' memory is freed when the owner drops them."""
    for handle, offset in counters:
        torch.UntypedStorage._release_ipc_counter_cuda(handle, offset)
    counters.clear()


def open_slots(wire: list, device: torch.device) -> list:
    """CANDIDATE side: map the slots the judge made (the judge's data, so unpickling it is safe here)."""
    import base64
    import pickle
    rows = []
    for row in wire:
        out = []
        for w in row:
            dtype, shape = DTYPES[w["dtype"]], w["shape"]
            if "cuda_ipc" in w:
                fn, args = pickle.loads(base64.b64decode(w["cuda_ipc"]))
                out.append(fn(*args))
            else:
                nbytes = spec_nbytes(dtype, shape)
                t = torch.from_file(w["file"], shared=True, size=w["nbytes"], dtype=torch.uint8)
                out.append(t[:nbytes].view(dtype).reshape(shape))
        rows.append(out)
    return rows


def fill_slots(slots: list, outputs: list) -> list:
    """CANDIDATE side: copy outputs into slots; the header says what was produced (shape, dtype)."""
    headers = []
    for k, t in enumerate(outputs):
        h = {"dtype": DTYPE_NAMES.get(t.dtype, str(t.dtype)), "shape": list(t.shape), "copied": False}
        if k < len(slots) and tuple(slots[k].shape) == tuple(t.shape) and slots[k].dtype == t.dtype:
            slots[k].copy_(t.detach())
            h["copied"] = True
        headers.append(h)
    return headers


class L2Flusher:
    """Overwrite a buffer larger than the last-level cache before each timed call."""

    def __init__(self, device: torch.device, nbytes: int):
        if device.type == "cpu":
            nbytes = min(nbytes, 64 * 1024 * 1024)
        self.buf = torch.empty(max(nbytes // 4, 1), dtype=torch.int32, device=device)

    def __call__(self):
        self.buf.fill_(1)


def hold_after_warmup(host_s: list, us: float) -> float:
    """The hold (us) before each timed call: 2 x the p90 of the warm-up calls' launch times (s) +
    HOLD_MIN_US, at least `us` (what late calls in the warm-up doubled it to), at most HOLD_MAX_US. The
    first FIRST_CALLS launches are left out while 3 or more remain: a call's first launches allocate
    its outputs and load its code (ms), and a warm-up that ends on steady calls after 6 calls would
    otherwise set the hold from them: 2 ms before every timed call of a 6.4 GB ReLU on an H100, ~0.05
    s of its slot. A hold that turns out short doubles after the call it was late for."""
    q = sorted(host_s[FIRST_CALLS:] if len(host_s) >= FIRST_CALLS + 3 else host_s)
    if not q:
        return us
    return max(us, min(HOLD_MAX_US, 2e6 * q[(9 * len(q)) // 10] + HOLD_MIN_US))


def median_band(times: list) -> float:
    """The width of a distribution-free confidence interval (at least 95 %) of the calls' true median,
    over their median: the k-th smallest and k-th largest time, k the largest rank with
    P(Binomial(n, 1/2) < k) <= 2.5 % (k = 2 of 10: 97.9 %). inf when there are too few calls for one."""
    n = len(times)
    k, below = 0, 0.0
    while k < n // 2:
        below += math.comb(n, k) / 2 ** n  # P(X <= k) after adding P(X = k)
        if below > 0.025:
            break
        k += 1
    if k == 0:
        return math.inf
    q = sorted(times)
    med = _median(q)
    return (q[n - k] - q[k - 1]) / med if med > 0 else math.inf


def time_calls(fn, device: torch.device, *, warmup: int, min_calls: int, max_calls: int, budget_s: float,
               stable_rel: float, flusher: L2Flusher, before=None, after=None, warmup_s: float = 0.2,
               retime_spread: float = 0.0, attempts: int = 1, min_wall_s: float = 0.0, ordered: bool = True,
               warmup_steady_rel: float = 0.0, early_calls: int = 0, early_rel: float = 0.0) -> dict:
    """Time fn() per call: L2 flushed before each call, median reported.

    On CUDA each call is bracketed by events on the stream current when it starts. Ordered timing
    (ordered_timing.py; unless `ordered` is False or the process cannot have it): a hold queued before
    the start event keeps the GPU's one work queue while the host queues the call, so the time is the
    GPU's and not the host's launch work, and nothing of the call on any stream runs before the start;
    the end event waits for all streams' work (a GPU-side time). The hold starts at 2 x the host's p90
    launch time + HOLD_MIN_US (from the warm-up calls) and doubles, up to HOLD_MAX_US, after any call
    whose launch outlasted it. Otherwise (the old way) the start event is recorded on an idle GPU and
    the end after a device-wide synchronize. settle() makes a call's time of its stream time and its
    end time, against the end bracket's cost around empty calls. On CPU a monotonic clock.
    before() and after() run around each call, outside the timed region (fresh inputs; keeping outputs).
    Warm-up: at least `warmup` calls and `warmup_s` seconds; with `warmup_steady_rel` > 0 it ends
    sooner, once the last STEADY_CALLS calls' times agree within that share (max / min - 1): on a GPU
    that was busy until now the clocks are already up, and what is left to warm (allocator, caches) is
    warm after a few calls. Stops when the median is stable (moves less than stable_rel between the first half and all
    calls) after min_calls and min_wall_s of wall time, when budget_s of measured time is spent, or at
    max_calls (a longer window averages more of the GPU's drift). Sooner, at `early_calls` (> 0) and
    after min_wall_s, when those calls already pin their median down: its confidence interval
    (median_band) is at most `early_rel` of it. Calls that agree that closely (a memory-bound kernel of
    milliseconds) gain nothing from ten more; calls that scatter (a kernel of microseconds) go on.
    A measurement whose calls spread more than `retime_spread` ((p90 - p10) / median) was disturbed
    (another process's work on the device time-slices with it: calls twice as slow): it is measured
    again, up to `attempts` times in all, and the least spread measurement is the result.
    """
    cuda = device.type == "cuda"
    order = _order_for(device) if cuda and ordered else None
    unavailable = order if isinstance(order, str) else None
    order = None if unavailable else order
    h = {"us": HOLD_MIN_US, "late": 0, "host": [], "held": 0.0}

    def one(f, hooks=True):
        if hooks and before is not None:
            before()
        flusher()
        synchronize(device)
        if cuda:
            s, e_stream, e_end = (_Event(enable_timing=True) for _ in range(3))
            if order is None:
                _event_record(s)
                f()
                _event_record(e_stream)
                _cuda_sync(device)
                _event_record(e_end)
            else:
                stream = _current_stream(device)
                order.hold(h["us"])
                h["held"] += h["us"]
                _event_record(s, stream)
                h0 = _perf_counter()
                f()
                h["host"].append(_perf_counter() - h0)
                _event_record(e_stream, stream)
                order.join(stream)  # the end waits for the call's work on every stream
                _event_record(e_end, stream)
                if _event_query(s):  # the hold ended before the host had queued the call
                    h["late"] += 1
                    h["us"] = min(HOLD_MAX_US, 2 * h["us"])
                _cuda_sync(device)
            _event_sync(e_end)
            if hooks and after is not None:
                after()
            return _event_elapsed(s, e_stream), _event_elapsed(s, e_end)
        t0 = _perf_counter()
        f()
        dt = (_perf_counter() - t0) * 1e3
        if hooks and after is not None:
            after()
        return dt, dt

    t_warm, n_warm, recent = _perf_counter(), 0, []
    while n_warm < max(warmup, 1) or (_perf_counter() - t_warm < warmup_s and n_warm < max_calls):
        recent = (recent + [one(fn)[0]])[-STEADY_CALLS:]  # until the clocks have ramped and caches, allocator and JIT are warm
        n_warm += 1
        if (warmup_steady_rel > 0 and n_warm >= max(warmup, STEADY_CALLS) and min(recent) > 0
                and max(recent) / min(recent) - 1 <= warmup_steady_rel):
            break
    warm_s = _perf_counter() - t_warm
    if order is not None:  # from here on, long enough for this call's launch (and what it cost in the warm-up)
        h["us"] = hold_after_warmup(h["host"], h["us"])
    late_warm = h["late"]
    overhead, join, join_jitter = 0.0, 0.0, 0.0
    if cuda:  # what the end bracket costs around nothing (no inputs, no outputs)
        empty = [one(lambda: None, hooks=False) for _ in range(CALIBRATION_CALLS)]
        overhead = _median(t_e for _, t_e in empty)
        gaps = sorted(t_e - t_s for t_s, t_e in empty)
        join, join_jitter = _median(gaps), gaps[(9 * len(gaps)) // 10] - _median(gaps)

    def settle(t_s: float, t_e: float) -> float:
        """A call's time from its stream time and its end time (which also sees other streams' work).
        The old way: the larger of the two, less the bracket's cost. Ordered: the stream time, unless
        the end came later after it than the join's own cost (with its scatter, at least JOIN_SLACK_MS)
        allows, that is work left running on another stream: then the end, whole. Taking the join's
        cost off that end would time a kernel hidden on a side stream ~1-2 us faster than the same
        kernel on the timed stream (measured on an H200: docs/log/performance.md, ordered timing)."""
        if not cuda:
            return t_s
        if order is None:
            return max(t_s, t_e - overhead)
        return t_s if t_e - t_s <= join + max(join_jitter, JOIN_SLACK_MS) else t_e

    def measure() -> list:
        times = []
        spent, t_start = 0.0, _perf_counter()
        while len(times) < max_calls:
            t_s, t_e = one(fn)
            times.append(settle(t_s, t_e))
            spent += times[-1] / 1e3
            n = len(times)
            if (0 < early_calls == n < min_calls and early_rel > 0 and _perf_counter() - t_start >= min_wall_s
                    and median_band(times) <= early_rel):
                break
            if n >= min_calls and n % 5 == 0 and _perf_counter() - t_start >= min_wall_s:
                med, med_half = _median(times), _median(times[: n // 2])
                if abs(med - med_half) <= stable_rel * med or spent >= budget_s:
                    break
            if spent >= budget_s and n >= 3:
                break
        return times

    measured, spreads = [], []
    for _ in range(max(1, attempts)):
        measured.append(measure())
        spreads.append(spread_of(measured[-1]))
        if spreads[-1] <= retime_spread:
            break
    k = spreads.index(min(spreads))
    method = "cpu" if not cuda else ORDERED_TIMING if order is not None else HOST_TIMING
    held = ({"hold_us": round(h["us"], 1), "late": h["late"] - late_warm, "held_s": h["held"] / 1e6}
            if order is not None else {"hold_us": None, "held_s": 0.0})
    return {"median_ms": _median(measured[k]), "times_ms": measured[k], "overhead_ms": overhead, "spreads": spreads,
            "timing": method, "unordered_why": unavailable, "warmup_calls": n_warm, "warmup_s": warm_s, **held}


def spread_of(times: list) -> float:
    """(p90 - p10) / median of a measurement's calls."""
    q = sorted(times)
    med = _median(q)
    return (q[(9 * len(q)) // 10] - q[len(q) // 10]) / med if q and med > 0 else 0.0


_os_write = os.write  # bound before the submission is imported, like the timers
_json_dumps = json.dumps


def emit(fd: int, msg: dict) -> None:
    """One JSON line on a protocol pipe."""
    _os_write(fd, (_json_dumps(msg) + "\n").encode())
