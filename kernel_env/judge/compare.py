"""TRUSTED: compare a candidate's outputs with the reference's. Pure functions on tensors."""
from __future__ import annotations

import math

import torch


def tolerance_for(dtype: torch.dtype, tol: dict) -> tuple[float, float]:
    if dtype in (torch.float16, torch.bfloat16):
        return tol["atol_half"], tol["rtol_half"]
    return tol["atol_fp32"], tol["rtol_fp32"]


def compare_outputs(ref: list, got: list, tol: dict, atol_scale: list | None = None) -> dict | None:
    """None when `got` matches `ref`; else a dict saying what differs (for the feedback).

    Checks, in order: output count, shape, dtype, NaN/inf pattern, then values with
    |got - ref| <= atol + rtol * |ref| on finite elements. The absolute tolerance is capped at
    `tiny_output_frac` of the reference's largest magnitude, so that on a task whose outputs are all
    tiny (softmax over 400k columns: max 4e-6) an all-zero answer cannot pass. `atol_scale` (per
    output, >= 1) widens atol for trials whose inputs were scaled up (harness.INPUT_DISTS), so that
    rounding errors that grow with the output are judged as on the task's own inputs.
    """
    if len(got) != len(ref):
        return {"what": "count", "message": f"returned {len(got)} output(s), expected {len(ref)}"}
    for k, (r, g) in enumerate(zip(ref, got)):
        name = f"output {k}" if len(ref) > 1 else "the output"
        if tuple(g.shape) != tuple(r.shape):
            return {"what": "shape", "output": k,
                    "message": f"{name} has shape {tuple(g.shape)}, expected {tuple(r.shape)}"}
        if g.dtype != r.dtype:
            return {"what": "dtype", "output": k,
                    "message": f"{name} has dtype {str(g.dtype)[6:]}, expected {str(r.dtype)[6:]}"}
        if not (r.is_floating_point() or r.is_complex()):
            bad = (g != r)
            if bool(bad.any()):
                n = int(bad.sum())
                return {"what": "values", "output": k, "mismatched": n, "numel": r.numel(),
                        "message": f"{name}: {n} of {r.numel()} elements differ (exact match required for {str(r.dtype)[6:]})"}
            continue
        bad = _compare_values(r.reshape(-1), g.reshape(-1), r.dtype, tol,
                              atol_scale[k] if atol_scale is not None and k < len(atol_scale) else 1.0)
        if bad is None:
            continue
        if bad["what"] == "nonfinite":
            label, n = bad["label"], bad["mismatched"]
            return {"what": "nonfinite", "output": k, "mismatched": n, "numel": r.numel(),
                    "message": f"{name}: {label} pattern differs from the reference at {n} of {r.numel()} elements"}
        idx = bad["flat_index"]
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx), r.shape)) if r.dim() else ()
        atol_eff, rtol, n = bad["atol"], bad["rtol"], bad["mismatched"]
        return {"what": "values", "output": k, "mismatched": n, "numel": r.numel(),
                "max_abs_err": bad["max_abs_err"], "atol": atol_eff, "rtol": rtol, "index": list(where),
                "expected": bad["expected"], "got": bad["got"],
                "message": (f"{name}: {n} of {r.numel()} elements outside tolerance (atol {atol_eff:.1e}, "
                            f"rtol {rtol:.0e}); max abs error {bad['max_abs_err']:.3e}; e.g. at index {list(where)} "
                            f"expected {bad['expected']:.6g}, got {bad['got']:.6g}")}
    return None


CHUNK = 1 << 24  # elements per pass: the temporaries of a comparison stay ~0.5 GB on 6.4 GB outputs


def _compare_values(r: torch.Tensor, g: torch.Tensor, dtype, tol: dict, atol_scale: float,
                    chunk: int = CHUNK) -> dict | None:
    """Floating outputs, flattened, compared in chunks (the same result as in one piece): the NaN/inf
    pattern, then |g - r| <= atol + rtol * |r| on the finite elements, with atol capped at
    tiny_output_frac of the reference's largest finite magnitude. None when they match.

    The common case (both all finite, within tolerance) is decided in one pass whose maxima stay on
    the device until the end: a host sync per chunk costs more than the comparison on outputs of GBs.
    Element i is within tolerance when |g - r| - rtol * |r| <= atol_eff, so the largest left side
    over all chunks decides for every element at once; a NaN or inf in either output makes it
    non-finite. Anything not clearly a match (non-finite, out of tolerance, or within rounding of the
    bound) is decided and described by _describe_mismatch, element by element."""
    n = r.numel()
    if n == 0:
        return None
    atol, rtol = tolerance_for(dtype, tol)
    atol *= atol_scale
    maxima = _fused_maxima(r, g, rtol)
    if maxima is None:
        worst_t = torch.full((), -math.inf, dtype=torch.float32, device=r.device)  # max |g - r| - rtol |r|
        scale_t = torch.zeros((), dtype=torch.float32, device=r.device)            # max |r|
        for a in range(0, n, chunk):
            rf, gf = r[a:a + chunk].float(), g[a:a + chunk].float()
            ra = rf.abs()
            worst_t = torch.maximum(worst_t, torch.sub((gf - rf).abs_(), ra, alpha=rtol).amax())
            scale_t = torch.maximum(scale_t, ra.amax())
        maxima = float(worst_t), float(scale_t)
    worst, scale = maxima
    if math.isfinite(worst) and math.isfinite(scale):
        atol_eff = min(atol, tol["tiny_output_frac"] * scale) if scale > 0 else atol
        if worst <= atol_eff * (1 - 1e-5) - 1e-5 * rtol * scale:  # clear of the bound by more than rounding
            return None
    return _describe_mismatch(r, g, dtype, tol, atol_scale, chunk)


def _describe_mismatch(r: torch.Tensor, g: torch.Tensor, dtype, tol: dict, atol_scale: float,
                       chunk: int = CHUNK) -> dict | None:
    """_compare_values' verdict with its details (count, worst element), a chunk at a time."""
    n = r.numel()
    spans = [(i, min(i + chunk, n)) for i in range(0, n, chunk)]
    scale = 0.0
    for label, fn in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
        count = sum(int((fn(r[a:b].float()) != fn(g[a:b].float())).sum()) for a, b in spans)
        if count:
            return {"what": "nonfinite", "mismatched": count, "label": label}
    for a, b in spans:
        rf = r[a:b].float()
        fin = torch.isfinite(rf)
        if bool(fin.any()):
            scale = max(scale, float(torch.where(fin, rf.abs(), torch.zeros_like(rf)).max()))
    atol, rtol = tolerance_for(dtype, tol)
    atol *= atol_scale
    atol_eff = min(atol, tol["tiny_output_frac"] * scale) if scale > 0 else atol
    mismatched, max_err, worst = 0, 0.0, None  # worst: (margin, flat index) of the worst bad element
    for a, b in spans:
        rf, gf = r[a:b].float(), g[a:b].float()
        fin = torch.isfinite(rf)
        err = torch.where(fin, (gf - rf).abs(), torch.zeros_like(rf))
        allowed = atol_eff + rtol * rf.abs()
        bad = (err > allowed) & fin
        max_err = max(max_err, float(err.max())) if err.numel() else max_err
        nb = int(bad.sum())
        if nb:
            mismatched += nb
            margin = torch.where(bad, err - allowed, torch.full_like(err, -1.0))
            i = int(torch.argmax(margin))
            if worst is None or float(margin[i]) > worst[0]:
                worst = (float(margin[i]), a + i)
    if not mismatched:
        return None
    idx = worst[1]
    return {"what": "values", "mismatched": mismatched, "max_abs_err": max_err, "atol": atol_eff, "rtol": rtol,
            "flat_index": idx, "expected": float(r[idx]), "got": float(g[idx])}


# ------------------------------------------------------------------ the same maxima in one pass (CUDA)
_FUSED = {}  # "kernel": the Triton kernel, or None where Triton cannot be used


def _fused_kernel():
    """The Triton kernel behind _fused_maxima, made at first use; None without Triton."""
    if "kernel" in _FUSED:
        return _FUSED["kernel"]
    try:
        import triton
        import triton.language as tl
    except ImportError:
        _FUSED["kernel"] = None
        return None

    @triton.jit(do_not_specialize=["n", "rtol"])
    def maxima_kernel(r_ptr, g_ptr, out_ptr, n, rtol, BLOCK: tl.constexpr):
        # each program strides over the tensors; per program: max |g - r| - rtol |r|, max |r| and
        # whether anything was not finite (NaN compares unequal to itself; |x| == inf)
        pid = tl.program_id(0).to(tl.int64)
        step = tl.num_programs(0).to(tl.int64) * BLOCK
        worst = tl.full([BLOCK], float("-inf"), tl.float32)
        scale = tl.zeros([BLOCK], tl.float32)
        bad = tl.zeros([BLOCK], tl.int32)
        lanes = tl.arange(0, BLOCK).to(tl.int64)
        for start in range(pid * BLOCK, n, step):
            offs = start + lanes
            m = offs < n
            rv = tl.load(r_ptr + offs, mask=m, other=0.0).to(tl.float32)
            gv = tl.load(g_ptr + offs, mask=m, other=0.0).to(tl.float32)
            ra = tl.abs(rv)
            w = tl.abs(gv - rv) - rtol * ra
            bad = tl.maximum(bad, ((w != w) | (tl.abs(w) == float("inf")) | (ra == float("inf"))).to(tl.int32))
            worst = tl.maximum(worst, tl.where(m & (w == w), w, float("-inf")))  # lanes past n load 0
            scale = tl.maximum(scale, tl.where(ra == ra, ra, 0.0))
        tl.store(out_ptr + pid * 3, tl.max(worst, axis=0))
        tl.store(out_ptr + pid * 3 + 1, tl.max(scale, axis=0))
        tl.store(out_ptr + pid * 3 + 2, tl.max(bad, axis=0).to(tl.float32))

    _FUSED["kernel"] = maxima_kernel
    return maxima_kernel


FUSED_MIN_NUMEL = 1 << 20  # below this the torch passes cost less than a launch with its sync


def _fused_maxima(r: torch.Tensor, g: torch.Tensor, rtol: float) -> tuple[float, float] | None:
    """(max |g - r| - rtol |r|, max |r|) in one read of both tensors, or None where the kernel does not
    apply (not CUDA, small, not contiguous, another dtype, outputs near denormals: _fused_verdict);
    (nan, nan) when an element is not finite.
    The chunked torch passes read each tensor several times and write temporaries: 22 ms per
    comparison of two 6.4 GB float32 outputs on an H200, 3.0 ms this way (experiments/bench_compare.py)."""
    if (r.device.type != "cuda" or r.numel() < FUSED_MIN_NUMEL or not (r.is_contiguous() and g.is_contiguous())
            or r.dtype not in (torch.float32, torch.float16, torch.bfloat16) or g.dtype != r.dtype):
        return None
    if _fused_kernel() is None:
        return None
    with torch.cuda.device(r.device):
        worst, scale, bad = _run_fused(r, g, rtol, 4 * torch.cuda.get_device_properties(r.device).multi_processor_count)
    return _fused_verdict(worst, scale, bad)


FUSED_MIN_SCALE = 1e-30  # outputs all smaller than this are left to the torch passes (below)


def _fused_verdict(worst: float, scale: float, bad: float) -> tuple[float, float] | None:
    """The kernel's maxima as _compare_values takes them, or None: then the torch passes decide. Where
    the reference's largest magnitude is near float32's denormals, a kernel built to flush denormals
    to zero could see 0 where torch sees a tiny scale, and so allow a plain atol where torch caps it:
    such outputs are rare, and the torch passes decide them exactly."""
    if bad:
        return math.nan, math.nan
    if not scale >= FUSED_MIN_SCALE:
        return None
    return worst, scale


def _run_fused(r: torch.Tensor, g: torch.Tensor, rtol: float, max_programs: int, block: int = 2048) -> list:
    """[max |g - r| - rtol |r| over finite, max |r| over non-NaN, 1.0 if anything not finite else 0.0]."""
    programs = max(1, min(-(-r.numel() // block), max_programs))
    out = torch.empty((programs, 3), dtype=torch.float32, device=r.device)
    _fused_kernel()[(programs,)](r, g, out, r.numel(), float(rtol), BLOCK=block, num_warps=8)
    return out.amax(dim=0).tolist()


def warm_fused(device: torch.device) -> None:
    """Compile the one-pass kernel for each floating dtype (outside any device slot)."""
    if device.type != "cuda":
        return
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.ones(FUSED_MIN_NUMEL, device=device, dtype=dtype)
        _fused_maxima(x, x, 1e-4)
