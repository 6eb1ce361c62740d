"""TRUSTED: the compiled bytecode of what every candidate process imports (torch, torch._dynamo, triton...).

Candidate processes run with PYTHONDONTWRITEBYTECODE: one must never leave bytecode that the next
one (or the judge) would load. Where the Python install has no bytecode of its own (the H200 box's
torch ships none), every run and build process compiled torch's sources again: 7.8 CPU-s p50 of a
run process's start there, most of the CPU the load used (docs/log/performance.md). So a trusted process,
started once per judge (before its first candidate process), imports what a candidate process imports with bytecode written to a folder of
the cache (PYTHONPYCACHEPREFIX), and candidate processes read it from there. They cannot write it:
under bwrap the cache is read-only to them, under unshare the folder is bound read-only in their
mount namespace (sandbox.wrap), under none nothing stands in the way (no isolation at all there).
A stale or missing file costs time, never correctness: Python checks each file against its source's
mtime and size and compiles the source when they differ.
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .sandbox import PYTHON, child_env

log = logging.getLogger("kernel_env.judge")

ENV = "PYTHONPYCACHEPREFIX"


def cache_folder(cache_dir: Path) -> Path:
    return Path(cache_dir) / "pycache"


def _stamp(folder: Path) -> Path:
    """The file that says the folder is filled for this Python and these installs (their sources'
    times): a judge started again finds it and starts no process."""
    parts = [sys.executable, sys.version]
    for name in ("torch", "triton", "sympy", "kernel_env.candidate.runner", "kernel_env.candidate.watch",
                 "kernel_env.harness", "kernel_env.protocol"):
        try:
            origin = importlib.util.find_spec(name).origin
            parts += [origin, str(os.stat(origin).st_mtime_ns)]
        except (ImportError, AttributeError, ValueError, TypeError, OSError):
            parts.append(name)
    return folder / f"ready-{hashlib.sha256(repr(parts).encode()).hexdigest()[:16]}"


class Warm:
    """The trusted process that fills the folder, started when the first candidate process is about to
    start (`ready`: a judge that starts none, a one-shot evaluation refused at its format checks, starts
    no such process either); candidate processes start once it is done, so that even the first ones
    import compiled code."""

    def __init__(self, cache_dir: Path, timeout_s: float = 300.0):
        self.dir = cache_folder(cache_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._timeout_s = timeout_s
        self._started = False
        self._done = False
        self._proc: subprocess.Popen | None = None
        self._stamp = _stamp(self.dir)
        if self._stamp.exists():
            self._done = True

    def _start(self) -> None:
        self._started = True
        self._t0 = time.monotonic()
        self._deadline = self._t0 + self._timeout_s
        self._home = tempfile.mkdtemp(prefix="kernel_env_bytecode_")  # what torch writes at import goes with it
        # a candidate process's environment, but writing bytecode, to the folder
        env = child_env(Path(self._home), {"CUDA_VISIBLE_DEVICES": "", ENV: self.dir})
        del env["PYTHONDONTWRITEBYTECODE"]
        self._err = tempfile.TemporaryFile()  # a file, not a pipe: a chatty import never blocks on it
        try:
            self._proc = subprocess.Popen(
                [PYTHON, "-m", "kernel_env.judge.bytecode_cache"], env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self._err, start_new_session=True)
        except OSError as e:
            log.warning("bytecode cache: could not start its process (%s); candidates compile from source", e)
            self._proc = None
            shutil.rmtree(self._home, ignore_errors=True)

    async def ready(self) -> None:
        """Start the process if it is not running yet, then wait (without blocking the event loop) until
        it has ended, at most until its deadline."""
        if not self._done and not self._started:
            self._start()
        while not self._done:
            if self._proc is None or self._proc.poll() is not None:
                self._finish()
            elif time.monotonic() > self._deadline:
                self._proc.kill()
                self._finish()
            else:
                await asyncio.sleep(0.05)

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        if self._proc is None:
            return
        rc = self._proc.wait()
        shutil.rmtree(self._home, ignore_errors=True)
        self._err.seek(0)
        err = self._err.read().decode("utf-8", "replace")[-2000:]
        self._err.close()
        if rc == 0:
            self._stamp.touch()
            log.info("bytecode cache ready in %.1f s: %s", time.monotonic() - self._t0, self.dir)
        else:
            log.warning("bytecode cache: its process exited with %s; candidates compile what it lacks from "
                        "source\n%s", rc, err)

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
        if self._started:
            self._finish()


def _import_what_candidates_import() -> None:
    """The run process's start (candidate/runner.py main, up to "imported") and a Triton launch's
    compiler modules, on the CPU: no GPU work, no candidate code."""
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import torch
    import torch.utils.cpp_extension  # noqa: F401
    from kernel_env.candidate import fast_build, runner, watch  # noqa: F401
    with watch.Watch():  # its first use imports torch._dynamo
        torch.zeros(4).fill_(1)
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
        from triton import compiler  # noqa: F401
        from triton.backends.nvidia import compiler as _nv, driver  # noqa: F401
    except ImportError:
        pass


if __name__ == "__main__":
    _import_what_candidates_import()
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown (torch's can take seconds)
