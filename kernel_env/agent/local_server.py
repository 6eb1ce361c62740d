"""An embedded kernel_env server for one run: a subprocess on a free loopback port with a random token."""
from __future__ import annotations

import atexit
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Optional, Sequence

from .session import EnvFailure

log = logging.getLogger("kernel_env.agent")
TOKEN_ENV = "KERNEL_ENV_TOKEN"
# the folder holding the kernel_env package: the server process imports it from there
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():  # runs in the child before exec: SIGTERM when the parent dies
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class LocalEnvServer:
    """An embedded kernel_env server: `python -m kernel_env.server.app` on a free loopback port.

    A random token guards it; its log goes to `log_path`. `start()` waits for /health; `stop()`
    (also at interpreter exit, and when this process dies) sends SIGTERM, then SIGKILL.
    """

    def __init__(self, device: str = "cpu", extra_args: Sequence[str] = (), log_path: str | Path | None = None,
                 kernelbench_dir: str = "", ready_timeout_s: float = 600.0):
        self.device, self.extra_args, self.kernelbench_dir = device, list(extra_args), kernelbench_dir
        self.log_path = Path(log_path) if log_path else None
        self.ready_timeout_s = ready_timeout_s
        self.token = "local-" + secrets.token_hex(16)
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LocalEnvServer":
        self.port = _free_port()
        argv = [sys.executable, "-m", "kernel_env.server.app", "--host", "127.0.0.1", "--port", str(self.port),
                "--device", self.device, *self.extra_args]
        if self.kernelbench_dir:
            argv += ["--kernelbench-dir", self.kernelbench_dir]
        env = dict(os.environ, **{TOKEN_ENV: self.token})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        log.info("starting a local env server: %s", " ".join(argv))
        self.proc = subprocess.Popen(argv, cwd=PACKAGE_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        if out is not subprocess.DEVNULL:
            out.close()
        atexit.register(self.stop)
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EnvFailure(f"local env server exited with code {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        log.info("local env server ready at %s (log %s)", self.url, self.log_path)
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise EnvFailure(f"local env server did not come up in {self.ready_timeout_s:.0f}s; see {self.log_path}")

    def stop(self, timeout_s: float = 40.0) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
        except ProcessLookupError:
            pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so `finally` blocks and atexit (which stop a local server) run."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

