"""TRUSTED: the environment variables of the judge's processes: candidates' and its own trusted ones."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..protocol import TRITON_KEY_MODULES
from .config import JudgeConfig
from .sandbox import PYTHON, child_env


class ProcessEnv:
    """Makes each process's environment from the judge's config: where builds and Triton's cache are,
    CPU threads, which GPU it sees (none for a build process), and, for candidates, the build settings
    the runner reads."""

    def __init__(self, cfg: JudgeConfig):
        self.cfg = cfg
        # the GPU arch torch would pick itself: the build process has no GPU to ask
        self.arch_list = cuda_arch_list(cfg.gpus[0]) if cfg.device == "cuda" else None
        # Triton's hash of its own install, which each run process would compute again at its first
        # launch (~0.35 CPU-s: it reads libtriton whole); under the interpreter nothing is compiled
        self.triton_key = triton_key() if cfg.device == "cuda" else None

    def __call__(self, workdir: Path, gpu: int, trusted: bool, ext_dir: Path | None = None,
                 pch_dir: str | None = None, triton_dir: Path | None = None) -> dict:
        c = self.cfg
        extra = {"TORCH_EXTENSIONS_DIR": ext_dir or c.cache_dir / "torch_extensions",
                 # a candidate's Triton cache is a folder of its own, gone with it: nothing it writes
                 # there is loaded by another process; the judge's own kernels have one no candidate sees
                 "TRITON_CACHE_DIR": (c.cache_dir / "triton-judge") if trusted else (triton_dir or workdir / "triton"),
                 "OMP_NUM_THREADS": c.cpu_threads, "MKL_NUM_THREADS": c.cpu_threads}
        if self.arch_list:
            extra["TORCH_CUDA_ARCH_LIST"] = self.arch_list
        if not trusted:
            extra["KERNEL_ENV_DEVICE"] = c.device
            extra["KERNEL_ENV_FAST_BUILD"] = "0" if c.fast_build == "off" else "1"
            extra["KERNEL_ENV_CUDA_PRELUDE"] = c.fast_build
            if pch_dir:
                extra["KERNEL_ENV_PCH_DIR"] = pch_dir
            if self.triton_key:
                extra["KERNEL_ENV_TRITON_KEY"] = self.triton_key
        if c.device == "cuda":
            extra["CUDA_VISIBLE_DEVICES"] = gpu
            extra["CUDA_DEVICE_MAX_CONNECTIONS"] = 1  # one work queue, which ordered timing needs (ordered_timing.py)
        else:
            extra["CUDA_VISIBLE_DEVICES"] = ""
            extra["TRITON_INTERPRET"] = 1
        return child_env(workdir, extra)


def cuda_arch_list(gpu: int) -> str | None:
    """TORCH_CUDA_ARCH_LIST as torch's load_inline would choose it on this GPU (its capability, capped at
    what this torch supports, +PTX), asked by a trusted process; None when the environment sets it."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return None
    code = ("import re, torch\ncap = torch.cuda.get_device_capability(0)\n"
            "sms = [int(re.findall(r'\\d+', a)[0]) for a in torch.cuda.get_arch_list() if a.startswith('sm_')]\n"
            "cap = min(cap, max((sm // 10, sm % 10) for sm in sms))\nprint(f'{cap[0]}.{cap[1]}+PTX')")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    try:
        r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = r.stdout.strip().splitlines()
    return out[-1] if r.returncode == 0 and out else None


def triton_key() -> str | None:
    """triton.runtime.cache.triton_key() of the Triton that candidate processes import, asked once by a
    trusted process; None without Triton."""
    code = (f"import importlib\nfor name in {TRITON_KEY_MODULES!r}:\n"
            "    f = getattr(importlib.import_module(name), 'triton_key', None)\n"
            "    if f:\n        print(f())\n        break\n")
    try:
        r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = r.stdout.strip().splitlines()
    return out[-1] if r.returncode == 0 and out else None
