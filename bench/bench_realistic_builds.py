"""Builds of the CUDA kernels models actually write: which prelude of the fast load_inline each lands on,
and its cold build time against torch's own path.

bench/realistic_submissions/*.py are honest KernelBench answers in the styles models write them
(c10/cuda and ATen/cuda headers, AT_DISPATCH_*, CHECK_INPUT, packed accessors, __half, ...). Where a
file lands (kernel_env/candidate/fast_build.py):

  shim   the .cu saw no torch header (cuda_prelude_shim.h); main.cpp through the light binding
         header when its C++ sources only declare functions ("shim+light"), else torch/extension.h
  core   the shim could not build it: the .cu saw cuda_prelude_core.h
  torch  neither could: torch's own load_inline built it (the slow path)

On a GPU box (one command, side by side, cold builds in fresh processes as bench_build.py does):

    PYTHONPATH=$PWD python3 bench/bench_realistic_builds.py --device cuda --parallel 4 --json $OUT/realistic.json

builds every file the fast way and --plain N of them (default 8, spread over the list; `all` for
every one) torch's plain way, prints a row per file (fast seconds, prelude, plain seconds) and the
medians and hit rates. Without a GPU (nvcc only, e.g. NVIDIA's pip wheels; no torch CUDA build
needed), --compile-only compiles each .cu as fast_build writes it, shim first, then core, then
torch's own text, with torch's nvcc flags: the prelude each would land on (main.cpp not compiled):

    python bench/bench_realistic_builds.py --compile-only --nvcc /path/to/nvcc

and, side by side, nvcc's CPU seconds on each .cu under the shim as fast_build writes it (without the
half-precision types or the accessors when the sources name neither) and under the whole shim:

    python bench/bench_realistic_builds.py --compile-only --preludes shim-whole shim --keep-going
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SPREAD = ROOT / "bench" / "realistic_submissions"

# prints the load_inline arguments of a submission (its import stops at the call: nothing is built)
DUMP_CALL = r'''
import inspect, json, sys
import torch.utils.cpp_extension as ce
sig = inspect.signature(ce.load_inline)
def fake(*args, **kwargs):
    a = sig.bind(*args, **kwargs).arguments
    a.update(a.pop("kwargs", {}) or {})
    print("LOAD_INLINE " + json.dumps({k: v for k, v in a.items() if isinstance(v, (str, list, dict, bool, type(None)))}))
    sys.exit(0)
ce.load_inline = fake
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), {"__name__": "submission"})
'''


def spread_files() -> list[Path]:
    return sorted(SPREAD.glob("*.py"))


def task_of(path: Path) -> str:
    """The KernelBench task a spread file answers: the first word of its docstring."""
    import ast
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.split(":", 1)[0].strip()


def load_inline_args(path: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", DUMP_CALL, str(path)], capture_output=True, text=True, timeout=120)
    line = next((l for l in p.stdout.splitlines() if l.startswith("LOAD_INLINE ")), None)
    if line is None:
        raise RuntimeError(f"{path.name}: no load_inline call ({p.stderr[-500:]})")
    return json.loads(line.split(" ", 1)[1])


def _list(x) -> list[str]:
    return [] if x is None else [x] if isinstance(x, str) else list(x)


def nvcc_command(nvcc: str, cu: Path, extra_cuda_cflags: list[str], arch: str, first_include: str = "") -> list[str]:
    """The .cu's compile as torch's build.ninja writes it (defines, torch's include paths, torch's nvcc
    flags, the submission's own), with fast_build's include folder first, as its load() call adds it."""
    from torch.utils import cpp_extension as ce
    from kernel_env.candidate.fast_build import INCLUDE_DIR
    import sysconfig
    cuda_inc = Path(nvcc).resolve().parent.parent / "include"
    incs = ([first_include] if first_include else []) + [str(INCLUDE_DIR)] + ce.include_paths() + [str(cuda_inc), sysconfig.get_paths()["include"]]
    if not (Path(ce.include_paths()[0]) / "c10/cuda/impl/cuda_cmake_macros.h").exists():
        incs.append(_cpu_torch_compat())
    return [nvcc, "-DTORCH_EXTENSION_NAME=probe", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1",
            *[f"-I{i}" for i in incs], *ce.COMMON_NVCC_FLAGS, "--compiler-options", "-fPIC",
            f"-gencode=arch=compute_{arch},code=sm_{arch}", "-std=c++17", *[f for f in extra_cuda_cflags if f],
            "-c", str(cu), "-o", str(cu.with_suffix(".o"))]


def _cpu_torch_compat() -> str:
    """A CPU build of torch lacks the one header its CUDA build generates for c10/cuda (the shared-library
    define): this folder holds it, with the CUDA build's text, so that torch's CUDA headers compile."""
    d = Path(tempfile.gettempdir()) / "kernel_env_cpu_torch_compat"
    f = d / "c10/cuda/impl/cuda_cmake_macros.h"
    if not f.exists():
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    return str(d)


def compile_only(path: Path, nvcc: str, arch: str, keep_going: bool, preludes=("shim", "core", "torch"),
                 first_include: str = "") -> dict:
    """The prelude this file's .cu compiles under, tried in fast_build's order."""
    from kernel_env.candidate.fast_build import light_cuda_source, shim_leaves_out
    a = load_inline_args(path)
    cuda = _list(a.get("cuda_sources"))
    row = {"file": path.name, "task": task_of(path), "tries": {}, "shim_leaves_out": shim_leaves_out(cuda)}
    with tempfile.TemporaryDirectory(prefix="realistic-cu-") as d:
        for prelude in preludes:
            if prelude == "torch":
                body = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"] + cuda
            elif prelude == "shim-whole":  # the shim with every part kept, as before it left any out
                body = light_cuda_source(cuda, "shim", leave_out=False)
            else:
                body = light_cuda_source(cuda, prelude)
            cu = Path(d) / f"{prelude}.cu"
            cu.write_text("\n".join(body))
            t, cpu = time.time(), _children_cpu_s()
            p = subprocess.run(nvcc_command(nvcc, cu, _list(a.get("extra_cuda_cflags")), arch, first_include),
                               capture_output=True, text=True)
            errors = [l for l in p.stderr.splitlines() if "error" in l][:3]
            row["tries"][prelude] = {"ok": p.returncode == 0, "s": round(time.time() - t, 1),
                                     "cpu_s": round(_children_cpu_s() - cpu, 2), "errors": errors}
            if p.returncode == 0:
                row.setdefault("landed", prelude)
                if not keep_going:
                    break
    row.setdefault("landed", "none" if "torch" in preludes else "not " + "/".join(preludes))
    return row


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_compile_only(args) -> int:
    files = [Path(f) for f in args.files] or spread_files()
    rows = []
    for f in files:  # one at a time: nvcc of a torch header is most of a CPU
        r = compile_only(f, args.nvcc, args.arch, args.keep_going, tuple(args.preludes), args.include_dir)
        rows.append(r)
        tries = "  ".join(f"{k} {'ok' if v['ok'] else 'FAIL'} {v['s']:.1f}s {v['cpu_s']:.1f} CPU-s" for k, v in r["tries"].items())
        print(f"{r['file']:40s} -> {r['landed']:6s} [{tries}]", flush=True)
        for k, v in r["tries"].items():
            if not v["ok"]:
                for e in v["errors"][:2]:
                    print(f"      {k}: {e.strip()[:200]}")
    _hit_rate(rows)
    _cpu_side_by_side(rows, args.preludes)
    if args.json:
        Path(args.json).write_text(json.dumps({"mode": "compile-only", "rows": rows}, indent=1))
    return 0


def _cpu_side_by_side(rows: list[dict], preludes) -> None:
    """With --keep-going and several preludes: nvcc's CPU seconds per prelude, medians over the files
    that every one of them compiled, and each against the first named."""
    both = [r for r in rows if len(r["tries"]) == len(preludes) and all(v["ok"] for v in r["tries"].values())]
    if len(preludes) < 2 or not both:
        return
    med = {k: statistics.median(r["tries"][k]["cpu_s"] for r in both) for k in preludes}
    print(f"nvcc CPU-s per .cu, median over the {len(both)} files every prelude compiled: "
          + ", ".join(f"{k} {v:.2f} ({v / max(med[preludes[0]], 1e-9):.2f}x)" for k, v in med.items()))


def _hit_rate(rows: list[dict]) -> None:
    n = len(rows)
    counts = {k: sum(r["landed"].split("+")[0].removesuffix("-whole") == k for r in rows) for k in ("shim", "core", "torch", "none", "failed")}
    others = n - sum(counts.values())
    print("\nlanded on: " + ", ".join(f"{k} {v}/{n}" for k, v in counts.items() if v)
          + (f", not the shim {others}/{n}" if others else "")
          + f"  (shim hit rate {counts['shim'] / max(n, 1):.0%}, fast path {(counts['shim'] + counts['core']) / max(n, 1):.0%})")


def landed(ext: Path) -> str:
    """Which prelude the fast path built with, read from the build folder fast_build left."""
    from kernel_env.candidate import fast_build as fb
    folders = [p for p in ext.iterdir() if p.is_dir()] if ext.is_dir() else []
    if not folders:
        return "none"
    f = folders[0]
    if (f / fb.LIGHT_FAILED).exists():
        return "torch"
    cu = f / "cuda.cu"
    # the prelude's include comes first, after the shim's macros for the parts it leaves out
    head = next((line for line in (cu.read_text().split("\n", 4)[:4] if cu.exists() else [])
                 if not line.startswith("#define KSHIM_")), "")
    prelude = "shim" if "prelude_shim" in head else "core" if "prelude_core" in head else "torch"
    main = f / "main.cpp"
    if prelude == "shim" and main.exists() and main.read_text().startswith(f'#include "{fb.BINDING_HEADER}"'):
        prelude += "+light"
    return prelude


def run_device(args) -> int:
    from bench.bench_build import build_once
    from kernel_env.judge import prebuild
    files = [Path(f) for f in args.files] or spread_files()
    if args.plain == "all":
        plain = list(files)
    else:  # every k-th file: a spread of styles, within the device's time
        k = int(args.plain)
        plain = [files[round(i * len(files) / k)] for i in range(k)] if 0 < k < len(files) else list(files)[:max(k, 0)]
    t0 = time.time()
    pch = prebuild.build(Path(args.cache), True)
    pch_s = time.time() - t0
    print(f"precompiled header: {pch or 'NOT BUILT'} ({pch_s:.1f} s, once per box)", flush=True)
    jobs = [(f, "fast-shim") for f in files] + [(f, "plain") for f in plain]
    jobs.sort(key=lambda j: (j[1] != "plain", files.index(j[0])))  # the long ones first: they set the wall time
    rows: dict[tuple[str, str], dict] = {}
    t1 = time.time()
    with ThreadPoolExecutor(args.parallel) as pool:
        futs = {pool.submit(build_once, f, m, str(pch) if pch else None, f"realistic-{time.time_ns()}-{i}",
                            landed): (f, m) for i, (f, m) in enumerate(jobs)}
        for fut, (f, m) in futs.items():
            r = fut.result()
            rows[(f.name, m)] = r
            print(f"  {f.name:40s} {m:9s} {'ok' if r['ok'] else 'FAILED':6s} {r['build_s'] or float('nan'):6.1f} s"
                  f"  {r.get('landed', '')}", flush=True)
            if r["error"]:
                print("     ", r["error"].strip().splitlines()[-1][:300])
    wall = time.time() - t1
    print(f"\n{'file':40s} {'task':48s} {'fast s':>7s} {'prelude':11s} {'plain s':>7s}")
    out = []
    for f in files:
        fast, pl = rows[(f.name, "fast-shim")], rows.get((f.name, "plain"))
        row = {"file": f.name, "task": task_of(f), "fast_s": fast["build_s"] if fast["ok"] else None,
               "landed": fast.get("landed", "none") if fast["ok"] else "failed",
               "plain_s": (pl["build_s"] if pl["ok"] else None) if pl else None, "fast": fast, "plain": pl}
        out.append(row)
        fmt = lambda v: f"{v:7.1f}" if v is not None else "      -"  # noqa: E731
        print(f"{f.name:40s} {row['task']:48s} {fmt(row['fast_s'])} {row['landed']:11s} {fmt(row['plain_s'])}")
    fast_all = [r["fast_s"] for r in out if r["fast_s"] is not None]
    pairs = [(r["fast_s"], r["plain_s"]) for r in out if r["fast_s"] is not None and r["plain_s"] is not None]
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    print(f"\nmedian cold build, fast path, all {len(fast_all)} files: {med(fast_all):.1f} s")
    if pairs:
        fp, pp = med([a for a, _ in pairs]), med([b for _, b in pairs])
        print(f"median on the {len(pairs)} files built both ways: fast {fp:.1f} s, torch's own {pp:.1f} s "
              f"({pp / fp:.1f}x)")
    _hit_rate(out)
    print(f"builds' wall time {wall:.0f} s at --parallel {args.parallel}")
    ok = all(r["fast"]["ok"] for r in out) and all(r["plain"]["ok"] for r in out if r["plain"])
    if args.json:
        Path(args.json).write_text(json.dumps({"pch_s": pch_s, "pch": str(pch), "parallel": args.parallel,
                                               "median_fast_s": med(fast_all), "wall_s": wall, "rows": out}, indent=1))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="submissions (default: bench/realistic_submissions/*.py)")
    ap.add_argument("--device", default="cuda", choices=["cuda"])
    ap.add_argument("--parallel", type=int, default=4, help="builds at a time")
    ap.add_argument("--plain", default="8", help="how many files torch's own path builds too (a number or all)")
    ap.add_argument("--cache", default=os.environ.get("KERNEL_ENV_CACHE", "/tmp/kernel_env_cache"))
    ap.add_argument("--json", default="")
    ap.add_argument("--compile-only", action="store_true", help="no GPU: nvcc each .cu per prelude")
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--arch", default="90a", help="--compile-only's target (sm_90a: the H200)")
    ap.add_argument("--preludes", nargs="+", default=["shim", "core", "torch"],
                    choices=["shim", "shim-whole", "core", "torch"],
                    help="--compile-only: the preludes to try, in order (`shim` alone: the shim hit rate, quickly; "
                    "`shim-whole`: the shim with no part left out, e.g. `--preludes shim-whole shim --keep-going` "
                    "for nvcc's CPU side by side)")
    ap.add_argument("--include-dir", default="", help="--compile-only: a folder of prelude headers searched first "
                    "(e.g. another version's, to compare hit rates)")
    ap.add_argument("--keep-going", action="store_true", help="--compile-only: try every prelude, not the first that compiles")
    args = ap.parse_args()
    return run_compile_only(args) if args.compile_only else run_device(args)


if __name__ == "__main__":
    sys.exit(main())
