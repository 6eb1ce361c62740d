"""A Triton submission's kernels compiled for the GPU by a process without one: does its first launch
on the GPU then skip Triton's JIT compile?

Inside the device slot, a Triton submission's first launch compiles its kernels (0.1-1.3 s of each
Triton evaluation; 37 % of the device's time under the benchmark's default pool on an H100,
docs/log/pool-h100-2026-12-08.md): the build process that imports the submission has no GPU, and
Triton compiles a kernel for the arguments of its first launch. Triton needs no GPU to compile for
one. Here a process without a GPU runs the submission's forward on CPU tensors of the task's shapes
and dtypes whose memory is never written (torch.empty: the OS backs a page only once it is
touched), with every Triton launch turned into a compile for a named target (a driver that names the
target and launches nothing), into a Triton cache folder. The task's inputs are made on the meta
device, so a multi-GB task costs no memory.

With --gpu, fresh processes on the GPU then run the same forward on the task's inputs, each after
the run process's own Triton warm-up (candidate/triton_warm.py), once with a copy of that cache and
once with an empty one, interleaved: the first forward's time, and how many kernels the launch still
compiled (entries it added to the cache).

    python experiments/triton_precompile.py --sub examples/submissions/19_ReLU_triton.py \\
        --task kernel_env/data/small_tasks/level1/1_Small_ReLU.py --target cuda:90:32
    python experiments/triton_precompile.py --sub ... --task .kb/level1/19_ReLU.py --gpu --repeats 3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_LOAD = r'''
import json, os, sys, time, torch, triton
from kernel_env import harness
task, sub = harness.load_module(sys.argv[2], "task"), harness.load_module(sys.argv[1], "submission")
'''

# no GPU in this process (CUDA_VISIBLE_DEVICES is empty): compile only, for the target in argv[3]
PRECOMPILE = _LOAD + r'''
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.runtime import driver
from triton.runtime.jit import JITFunction

class CompileOnly(DriverBase):
    """Names the target; device 0, stream 0; nothing can be launched or benchmarked."""
    def __init__(self, target):
        self.target = target
    @classmethod
    def is_active(cls):
        return False
    def get_current_target(self):
        return self.target
    def get_current_device(self):
        return 0
    def get_current_stream(self, device=None):
        return 0
    def get_active_torch_device(self):
        return torch.device("cpu")
    def get_benchmarker(self):
        raise RuntimeError("compile only: nothing is benchmarked")
    def map_python_to_cpp_type(self, ty):
        return ty

backend, arch, warp = sys.argv[3].split(":")
driver.set_active(CompileOnly(GPUTarget(backend, int(arch), int(warp))))
compiled, launch = [], JITFunction.run
def compile_only(self, *args, grid, warmup, **kw):
    kernel = launch(self, *args, grid=grid, warmup=True, **kw)
    compiled.append(self.__name__)
    return kernel
JITFunction.run = compile_only

with torch.device("meta"):
    inputs, init = task.get_inputs(), task.get_init_inputs()
lazy = lambda xs: [torch.empty(x.shape, dtype=x.dtype) if isinstance(x, torch.Tensor) else x for x in xs]
t = time.perf_counter()
with torch.no_grad():
    sub.ModelNew(*lazy(init))(*lazy(inputs))
took, cache = time.perf_counter() - t, os.environ["TRITON_CACHE_DIR"]
cubins = sorted(f for _, _, fs in os.walk(cache) for f in fs if f.endswith(".cubin"))
metas = [json.load(open(os.path.join(d, f))) for d, _, fs in os.walk(cache) for f in fs
         if f.endswith(".json") and not f.startswith("__grp__")]
archs = sorted({m["target"]["arch"] for m in metas if isinstance(m.get("target"), dict)})
print(json.dumps({"compiled": compiled, "seconds": took, "cache_entries": len(os.listdir(cache)),
                  "cubins": cubins, "archs": archs}))
'''

# on the GPU, as a run process: its Triton warm-up, then the submission's first and second forward
ON_GPU = _LOAD + r'''
dev = torch.device("cuda")
torch.zeros(1, device=dev)
from kernel_env.candidate import triton_warm
triton_warm.warm(dev)
torch.cuda.synchronize(dev)
cache = os.environ["TRITON_CACHE_DIR"]
before = set(os.listdir(cache))
inputs, model = harness.make_inputs(task, 0, dev), harness.make_model(sub.ModelNew, task, 0, dev)
torch.cuda.synchronize(dev)
out = {"target": str(triton.runtime.driver.active.get_current_target())}
for name in ("first", "second"):
    t = time.perf_counter()
    with torch.no_grad():
        model(*inputs)
    torch.cuda.synchronize(dev)
    out[name + "_forward_s"] = time.perf_counter() - t
out["compiled_at_launch"] = len(set(os.listdir(cache)) - before)
print(json.dumps(out))
'''


def _child(code: str, sub: str, task: str, extra: list, env: dict) -> dict:
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code, sub, task, *extra], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"child process failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def precompile(sub: str, task: str, target: str, cache: str) -> dict:
    """The submission's kernels compiled for `target` (backend:arch:warp_size) into `cache`, by a process
    that sees no GPU."""
    return _child(PRECOMPILE, sub, task, [target], {"TRITON_CACHE_DIR": cache, "CUDA_VISIBLE_DEVICES": ""})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sub", required=True, help="a Triton submission (ModelNew)")
    ap.add_argument("--task", required=True, help="its task's file (Model, get_inputs, get_init_inputs)")
    ap.add_argument("--target", default="", help="backend:arch:warp_size to compile for, e.g. cuda:90:32 "
                    "(default with --gpu: this machine's GPU)")
    ap.add_argument("--gpu", action="store_true", help="then time the first forward on the GPU, precompiled and cold")
    ap.add_argument("--repeats", type=int, default=3, help="GPU processes per mode")
    args = ap.parse_args()
    target = args.target
    if not target:
        if not args.gpu:
            ap.error("--target is needed without --gpu")
        import torch
        major, minor = torch.cuda.get_device_capability()
        target = f"cuda:{major * 10 + minor}:32"
    work = Path(tempfile.mkdtemp(prefix="triton-precompile-"))
    try:
        pre = precompile(args.sub, args.task, target, str(work / "precompiled"))
        print(f"compiled without a GPU for {target}: {', '.join(pre['compiled']) or 'nothing'} "
              f"in {pre['seconds']:.2f} s ({pre['cache_entries']} cache entries; cubins {', '.join(pre['cubins'])} "
              f"for arch {', '.join(map(str, pre['archs']))})", flush=True)
        if not args.gpu:
            return
        rows = {"precompiled": [], "cold": []}
        for i in range(args.repeats):
            for mode in rows:  # interleaved: both modes see the same box
                cache = work / f"{mode}-{i}"
                if mode == "precompiled":
                    shutil.copytree(work / "precompiled", cache)
                else:
                    cache.mkdir()
                rows[mode].append(_child(ON_GPU, args.sub, args.task, [], {"TRITON_CACHE_DIR": str(cache)}))
                r = rows[mode][-1]
                print(f"[{i + 1}/{args.repeats}] {mode:<11} first forward {r['first_forward_s']:.3f} s, second "
                      f"{r['second_forward_s']:.3f} s, compiled at launch {r['compiled_at_launch']} ({r['target']})",
                      flush=True)
        print(f"\n{'median over ' + str(args.repeats) + ' processes':<28} {'precompiled':>12} {'cold':>8}")
        for k in ("first_forward_s", "second_forward_s", "compiled_at_launch"):
            p, c = (statistics.median(r[k] for r in rows[m]) for m in ("precompiled", "cold"))
            print(f"{k:<28} {p:>12.3f} {c:>8.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
