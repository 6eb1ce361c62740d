"""Cold load_inline builds: torch's plain path against kernel_env's fast path, side by side in one run.

Each build is a fresh process importing a submission (its load_inline compiles at import) with an
empty TORCH_EXTENSIONS_DIR and a unique comment in its kernel source, so nothing is cached but the
precompiled header the judge makes once at start (timed separately). Modes:

  plain        torch.utils.cpp_extension.load_inline as torch ships it
  fast-aten    candidate/fast_build.py: the .cu sees ATen only, main.cpp uses the precompiled header
  fast-core    the same with the lightest prelude (Tensor class + factory functions)
  fast-shim    the .cu sees no torch header (cuda_prelude_shim.h), falling back to fast-core
  fast-shim-shared  the same, built as the judge's compile processes build (fast_build.compile_only):
               a binding file built before links the object published then (binding_objects.py);
               with --repeat, each file's later builds share its binding file

    python bench/bench_build.py --device cuda [--modes plain fast-aten fast-core] [--parallel 4] FILES...
    python bench/bench_build.py --device cpu      # C++ submissions of the test suite (no .cu: PCH only)

Prints one row per (file, mode) and the median per mode; --json writes everything.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.workload import submission, unique  # noqa: E402  (tests/cases.py; unique: a build of its own)

CHILD = r"""
import importlib.util, os, resource, sys, time
from pathlib import Path
if os.environ.get("BENCH_MODE") != "plain":
    from kernel_env.candidate import fast_build
    fast_build.install()
if os.environ.get("BENCH_MODE", "").endswith("-shared"):
    # as the judge does it: each call built by compile_only, its new binding object published
    from kernel_env.published_builds import publish_binding_object

    def compile_by(a, key):
        entry = fast_build.compile_only(a)
        folder = Path(os.environ["TORCH_EXTENSIONS_DIR"]) / a["name"]
        said = entry.get("binding_object") or {}
        if said and not said["reused"]:
            publish_binding_object(Path(os.environ["KERNEL_ENV_BINDING_OBJECTS"]), said["key"], folder / "main.o")
        print("BINDING", "reused" if said.get("reused") else "compiled" if said else "not shared")
        spec = importlib.util.spec_from_file_location(entry["module"], folder / entry["file"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    fast_build.COMPILE_BY = compile_by
t = time.time()
spec = importlib.util.spec_from_file_location("submission", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
print("BUILD_S", time.time() - t)
ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
print("CPU_S", sum(r.ru_utime + r.ru_stime for r in ru))
"""


def build_env(mode: str, ext_dir: Path, pch: str | None, objects: Path | None = None) -> dict:
    """A build process's environment in `mode`: every fast mode gets the precompiled headers (as the
    judge's processes do); `-shared` also the binding objects' folder."""
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(ext_dir), BENCH_MODE=mode,
               PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if mode != "plain":
        env["KERNEL_ENV_CUDA_PRELUDE"] = mode.split("-")[1]
        if pch:
            env["KERNEL_ENV_PCH_DIR"] = pch
    if mode.endswith("-shared"):
        env["KERNEL_ENV_BINDING_OBJECTS"] = str(objects)
    return env


def build_once(path: Path, mode: str, pch: str | None, tag: str, inspect_ext=None, objects: Path | None = None) -> dict:
    """One cold build of `path` in a fresh process; `inspect_ext(ext_dir)`, when given, reads the build
    folder before it is removed (its answer is the row's "landed")."""
    with tempfile.TemporaryDirectory(prefix="bench-build-") as d:
        src = Path(d) / path.name
        src.write_text(unique(submission(path), tag))
        env = build_env(mode, Path(d) / "ext", pch, objects)
        t = time.time()
        p = subprocess.run([sys.executable, "-c", CHILD, str(src)], env=env, capture_output=True, text=True)
        wall = time.time() - t
        said = {l.split()[0]: l.split(None, 1)[1] for l in p.stdout.splitlines() if l.split(None, 1)[0:1] in (["BUILD_S"], ["CPU_S"], ["BINDING"])}
        build_s = float(said["BUILD_S"]) if "BUILD_S" in said else None
        fell_back = any(Path(d, "ext").glob("*/kernel_env_light_failed")) or any(
            Path(d, "ext").glob("*/kernel_env_shim_failed"))
        steps = {}  # ninja's own log: seconds per compile/link step
        for log in Path(d, "ext").glob("*/.ninja_log"):
            for line in log.read_text().splitlines()[1:]:
                f = line.split("\t")
                if len(f) >= 4:
                    steps[f[3]] = (int(f[1]) - int(f[0])) / 1e3
        row = {"file": path.name, "mode": mode, "ok": p.returncode == 0, "build_s": build_s, "wall_s": wall,
               "cpu_s": float(said["CPU_S"]) if "CPU_S" in said else None, "binding": said.get("BINDING"),
               "light_fallback": fell_back, "steps": steps, "error": None if p.returncode == 0 else p.stderr[-800:]}
        if inspect_ext is not None and mode != "plain":
            row["landed"] = inspect_ext(Path(d) / "ext")
        return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--modes", nargs="+", default=["plain", "fast-aten", "fast-core"])
    ap.add_argument("--parallel", type=int, default=4, help="builds at a time (each mode's share)")
    ap.add_argument("--cache", default=os.environ.get("KERNEL_ENV_CACHE", "/tmp/kernel_env_cache"))
    ap.add_argument("--repeat", type=int, default=1, help="builds of each (file, mode), each a kernel of its own")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    files = [Path(f) for f in args.files] or (
        sorted((ROOT / "examples" / "submissions").glob("*_cuda.py")) if args.device == "cuda"
        else [ROOT / "tests" / "submissions" / f for f in ("relu_ok.py", "matmul_ok.py", "linear_relu_ok.py")])

    from kernel_env.judge import prebuild
    t0 = time.time()
    pch = prebuild.build(Path(args.cache), args.device == "cuda")
    pch_s = time.time() - t0
    print(f"precompiled header: {pch or 'NOT BUILT'} ({pch_s:.1f} s, once per box)", flush=True)

    jobs = [(f, m) for _ in range(args.repeat) for f in files for m in args.modes]  # modes interleaved: same load on each
    rows = []
    objects = Path(tempfile.mkdtemp(prefix="bench-binding-objects-"))
    with ThreadPoolExecutor(args.parallel) as pool:
        futs = [pool.submit(build_once, f, m, str(pch) if pch else None, f"bench-{time.time_ns()}-{i}", objects=objects)
                for i, (f, m) in enumerate(jobs)]
        for fut in futs:
            r = fut.result()
            rows.append(r)
            print(f"{r['file']:44s} {r['mode']:10s} {'ok' if r['ok'] else 'FAILED':6s} "
                  f"build {r['build_s'] or float('nan'):6.1f} s  wall {r['wall_s']:6.1f} s  CPU {r['cpu_s'] or float('nan'):6.1f} s"
                  f"{'  binding ' + r['binding'] if r['binding'] else ''}"
                  f"  [{' '.join(f'{k} {v:.1f}s' for k, v in r['steps'].items())}]"
                  f"{'  (light prelude failed: full headers)' if r['light_fallback'] else ''}", flush=True)
            if r["error"]:
                print("   ", r["error"].strip().splitlines()[-1][:300])
    med, cpu = {}, {}
    for m in args.modes:
        xs = [r["build_s"] for r in rows if r["mode"] == m and r["ok"] and r["build_s"]]
        med[m] = statistics.median(xs) if xs else None
        cs = [r["cpu_s"] for r in rows if r["mode"] == m and r["ok"] and r["cpu_s"]]
        cpu[m] = statistics.median(cs) if cs else None
    base = med.get("plain")
    print("\nmode              median cold build   median CPU s   vs plain")
    for m, v in med.items():
        ratio = f"{base / v:5.1f}x faster" if base and v else ""
        print(f"{m:16s}  {v if v is not None else float('nan'):8.1f} s         {cpu[m] or float('nan'):6.1f}         {ratio}")
    if args.json:
        Path(args.json).write_text(json.dumps({"pch_s": pch_s, "pch": str(pch), "medians": med, "cpu_medians": cpu, "rows": rows},
                                              indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
