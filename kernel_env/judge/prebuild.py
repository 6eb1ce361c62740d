"""TRUSTED: the precompiled torch/extension.h that candidate builds include (candidate/fast_build.py).

The binding file of every load_inline build (main.cpp) starts with torch/extension.h, whose parse is
most of its compile time. The judge compiles that header once per (torch, compiler, flags) into the
cache, in the background at start, with the flags torch itself writes into its build.ninja; gcc uses
a precompiled header only when the flags it was made with match the build's, else it parses the
header as usual, so a stale or missing one costs time, never correctness. Candidates only read it.

One variant per optimisation level a submission is likely to ask for (gcc refuses a PCH made at
another level): none, -O2 and -O3; a folder `<header>.gch/` holds them, gcc picks the one that fits.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..candidate.binding_objects import ninja_vars

log = logging.getLogger("kernel_env.judge")

HEADER = "kernel_env_torch_extension.h"   # the name candidate/fast_build.py includes
# and the light binding header (candidate/include/torch_binding_light.h), for a main.cpp whose sources
# only declare the kernels' functions: most of main.cpp's time with the full header is spent on
# template instantiations that a precompiled header does not save
BINDING_HEADER = "kernel_env_torch_binding.h"
INCLUDE_DIR = Path(__file__).resolve().parent.parent / "candidate" / "include"
VARIANTS = {"O0": [], "O2": ["-O2"], "O3": ["-O3"]}


def torch_cflags(with_cuda: bool) -> tuple[str, list[str]]:
    """The C++ compiler and the flags torch compiles an extension's main.cpp with (from its ninja file)."""
    from torch.utils import cpp_extension as ce
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "main.cpp")
        Path(src).write_text("")
        ce._write_ninja_file_to_build_library(
            path=os.path.join(d, "build.ninja"), name="probe", sources=[src], extra_cflags=[],
            extra_cuda_cflags=[], extra_sycl_cflags=[], extra_ldflags=[], extra_include_paths=[],
            with_cuda=with_cuda, with_sycl=False, is_standalone=False)
        text = Path(d, "build.ninja").read_text()
    vals = ninja_vars(text)
    flags = [f for f in shlex.split(vals["cflags"]) if not f.startswith("-DTORCH_EXTENSION_NAME=")]
    return vals.get("cxx", "c++"), flags


def pch_dir(cache_dir: Path, cxx: str, flags: list[str], variants=tuple(VARIANTS)) -> Path:
    """The folder of the headers made by this compiler with these flags for this torch."""
    import torch
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        version = ""
    light = [(INCLUDE_DIR / h).read_text() for h in ("torch_binding_light.h", "cuda_torch_names.h")]
    key = hashlib.sha256("\0".join([torch.__version__, cxx, version, *flags, *variants, *light]).encode()).hexdigest()[:16]
    return Path(cache_dir) / "pch" / key


def build(cache_dir: Path, with_cuda: bool, variants=tuple(VARIANTS)) -> Path | None:
    """Make the precompiled headers unless they exist (waits while another process makes them).
    Returns the folder to hand candidates (KERNEL_ENV_PCH_DIR). Never raises: without it, builds are
    slower, nothing else."""
    try:
        cxx, flags = torch_cflags(with_cuda)
        d = pch_dir(cache_dir, cxx, flags, variants)
        d.mkdir(parents=True, exist_ok=True)
        with open(_build_lock(cache_dir, with_cuda), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another judge may be building it: wait for that one
            if not (d / "READY").exists() and not _make(cxx, flags, d, variants, with_cuda):
                return None
        ptr = _pointer(cache_dir, with_cuda)  # replaced whole: a judge reading it never sees half of it
        tmp = ptr.with_name(f"{ptr.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"dir": str(d), "header": _torch_header_stat(), "variants": list(variants)}))
        os.replace(tmp, ptr)
        return d
    except Exception as e:  # e.g. torch's private ninja writer changed: no PCH, same results
        log.warning("precompiled header not built: %s", e)
        return None


def _make(cxx: str, flags: list[str], d: Path, variants, with_cuda: bool) -> bool:
    """Both headers, every variant, in parallel. The light binding header is optional: without it
    main.cpp includes the full one (fast_build.py checks for its .gch folder)."""
    (d / HEADER).write_text("#include <torch/extension.h>\n")
    (d / BINDING_HEADER).write_text(("" if with_cuda else "#define KSHIM_NO_CUDA\n")
                                    + '#include "torch_binding_light.h"\n')
    for stale in d.glob("gch-*"):  # a build killed before it finished (the judge stopped) left these
        shutil.rmtree(stale, ignore_errors=True)
    tmps = {h: Path(tempfile.mkdtemp(prefix="gch-", dir=d)) for h in (HEADER, BINDING_HEADER)}
    # the compilers' own temp files (cc*.s) go into the build's folder too, not the judge's TMPDIR: a
    # compiler killed mid-build (the judge stopped) leaves them where the next build clears them
    procs = {(h, name): subprocess.Popen([cxx, *flags, *extra, "-I", str(INCLUDE_DIR), "-x", "c++-header", str(d / h),
                                          "-o", str(tmps[h] / f"{name}.gch")],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         env={**os.environ, "TMPDIR": str(tmps[h])})
             for h in tmps for name, extra in VARIANTS.items() if name in variants}
    failed = [k for k, p in procs.items() if p.wait() != 0]
    if failed:
        log.warning("precompiled header not built (%s): %s", ", ".join("/".join(k) for k in failed),
                    procs[failed[0]].stderr.read().decode(errors="replace")[-500:])
    for h, tmp in tmps.items():
        if any(k[0] == h for k in failed):
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        gch = d / f"{h}.gch"  # a folder: gcc picks the variant whose flags match the build's
        shutil.rmtree(gch, ignore_errors=True)
        os.replace(tmp, gch)
    if any(k[0] == HEADER for k in failed):
        return False
    (d / "READY").write_text("")
    return True


def _torch_header_stat() -> list:
    """Size and mtime of the torch/extension.h candidates will include: found without importing torch."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    st = (Path(spec.origin).parent / "include" / "torch" / "extension.h").stat()
    return [st.st_size, st.st_mtime_ns]


def _pointer(cache_dir: Path, with_cuda: bool) -> Path:
    return Path(cache_dir) / "pch" / f"latest-{'cuda' if with_cuda else 'cpu'}.json"


def known(cache_dir: Path, with_cuda: bool, variants=tuple(VARIANTS)) -> Path | None:
    """The folder an earlier build() left for this torch and these variants, without importing torch
    (a judge hands it to its first candidates while Background confirms it)."""
    try:
        rec = json.loads(_pointer(cache_dir, with_cuda).read_text())
        d = Path(rec["dir"])
        if rec["header"] == _torch_header_stat() and rec["variants"] == list(variants) and (d / "READY").exists():
            return d
    except Exception:
        pass
    return None


class Background:
    """The judge's handle on the precompiled header: `.dir` is its folder once ready, else None.

    When no earlier build fits, one builder process starts (the server itself does not import torch):
    only if no other judge's builder holds this cache's build lock, so that many judges on one cache
    start one build. `.dir` looks for the result at most every few seconds; `stop()` ends the builder."""

    RECHECK_S = 5.0

    def __init__(self, cache_dir: Path, with_cuda: bool, variants=tuple(VARIANTS)):
        self._args = (Path(cache_dir), with_cuda, tuple(variants))
        self._dir = known(*self._args)
        self._next = time.monotonic() + self.RECHECK_S
        self.proc: subprocess.Popen | None = None
        if self._dir is None and not _lock_held(_build_lock(cache_dir, with_cuda)):
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kernel_env.judge.prebuild", str(cache_dir), "cuda" if with_cuda else "cpu",
                 *variants], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    @property
    def dir(self) -> Path | None:
        if self.proc is not None:
            self.proc.poll()  # reap it once done
        if self._dir is None and time.monotonic() >= self._next:
            self._next = time.monotonic() + self.RECHECK_S
            self._dir = known(*self._args)
        return self._dir

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the builder and its compilers
            except OSError:
                pass
            self.proc.wait()


def _build_lock(cache_dir: Path, with_cuda: bool) -> Path:
    return Path(cache_dir) / "pch" / f"build-{'cuda' if with_cuda else 'cpu'}.lock"


def _lock_held(path: Path) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f, fcntl.LOCK_UN)
        return False
    except OSError:
        return True


if __name__ == "__main__":  # python -m kernel_env.judge.prebuild CACHE_DIR cpu|cuda [VARIANT ...]
    logging.basicConfig(level=logging.INFO)
    d = build(Path(sys.argv[1]), sys.argv[2] == "cuda", tuple(sys.argv[3:]) or tuple(VARIANTS))
    print(d or "")
    sys.exit(0 if d else 1)
