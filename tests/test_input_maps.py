"""The one-pass input maps (kernel_env/fused_maps.py) against harness.transform_input's torch passes:
the same bits, for every dtype and kind of value. A process that cannot use the kernel makes its
inputs with the torch passes, so a difference would fail honest kernels. Here the kernel runs in
Triton's interpreter (CPU, a process of its own); scripts/input_maps_check.py runs it compiled on a GPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

CHECK = r"""
import json, sys, torch
from kernel_env import fused_maps, harness

g = torch.Generator().manual_seed(7)
special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-30, -1e-30, 3.4e38, -3.4e38,
                        1.0, -1.0, 65504.0, 70000.0, 1e-8])
x32 = torch.cat([torch.randn(5000, generator=g) * 10.0 ** torch.randint(-20, 20, (5000,), generator=g),
                 torch.rand(3000, generator=g), special])
int_of = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
report = {}
for dtype in fused_maps.DTYPES:
    x = x32.to(dtype)
    for dist in fused_maps.CODES:
        want = harness.transform_input(x, dist)  # CPU tensors: the torch passes
        got = fused_maps.map_values(x, dist)
        nan = torch.isnan(want)
        same = bool(torch.equal(nan, torch.isnan(got))) and bool(torch.equal(
            want[~nan].view(int_of[dtype]), got[~nan].view(int_of[dtype])))
        report[f"{dist}/{str(dtype)[6:]}"] = [same, int((want != got).sum() - nan.sum())]
print(json.dumps(report))
"""


def test_the_one_pass_maps_give_the_torch_passes_bits(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path), "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=600, env=env,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(report) == 9
    assert all(same for same, _ in report.values()), json.dumps(report)


def test_the_one_pass_maps_are_used_only_where_they_apply():
    import torch
    from kernel_env import fused_maps
    big = torch.zeros(fused_maps.MIN_NUMEL)
    assert not fused_maps.applies(big, "signed")          # a CPU tensor: the torch passes
    assert not fused_maps.applies(big, "large")           # not a hashing map
    assert not fused_maps.warm(torch.device("cpu"))


def test_run_processes_take_tritons_install_hash_from_the_judge():
    """Triton hashes its whole install (libtriton included) once per process for its cache keys; the
    judge computes it once (environ.triton_key) and each run process takes it (triton_warm.use_key).
    It must be what the process would have computed itself, or every compiled kernel would miss."""
    from kernel_env.judge.environ import triton_key
    key = triton_key()
    assert key and len(key) > 64
    code = ("import triton.runtime.cache as c\nfrom kernel_env.candidate import triton_warm\n"
            "own = c.triton_key()\ntriton_warm.use_key('given')\nprint(own)\nprint(c.triton_key())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [key, "given"]
