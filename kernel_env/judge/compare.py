"""TRUSTED: compare a candidate's outputs with the reference's. Pure functions on tensors."""
from __future__ import annotations

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
        rf, gf = r.float(), g.float()
        for label, fn in (("NaN", torch.isnan), ("+inf", torch.isposinf), ("-inf", torch.isneginf)):
            diff = fn(rf) != fn(gf)
            if bool(diff.any()):
                n = int(diff.sum())
                return {"what": "nonfinite", "output": k, "mismatched": n, "numel": r.numel(),
                        "message": f"{name}: {label} pattern differs from the reference at {n} of {r.numel()} elements"}
        fin = torch.isfinite(rf)
        atol, rtol = tolerance_for(r.dtype, tol)
        if atol_scale is not None and k < len(atol_scale):
            atol *= atol_scale[k]
        scale = float(rf[fin].abs().max()) if bool(fin.any()) else 0.0
        atol_eff = min(atol, tol["tiny_output_frac"] * scale) if scale > 0 else atol
        err = torch.where(fin, (gf - rf).abs(), torch.zeros_like(rf))
        allowed = atol_eff + rtol * rf.abs()
        bad = (err > allowed) & fin
        if bool(bad.any()):
            n = int(bad.sum())
            idx = int(torch.argmax(torch.where(bad, err - allowed, torch.full_like(err, -1.0))))
            where = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx), r.shape)) if r.dim() else ()
            flat_r, flat_g = rf.reshape(-1), gf.reshape(-1)
            return {"what": "values", "output": k, "mismatched": n, "numel": r.numel(),
                    "max_abs_err": float(err.max()), "atol": atol_eff, "rtol": rtol, "index": list(where),
                    "expected": float(flat_r[idx]), "got": float(flat_g[idx]),
                    "message": (f"{name}: {n} of {r.numel()} elements outside tolerance (atol {atol_eff:.1e}, "
                                f"rtol {rtol:.0e}); max abs error {float(err.max()):.3e}; e.g. at index {list(where)} "
                                f"expected {float(flat_r[idx]):.6g}, got {float(flat_g[idx]):.6g}")}
    return None
