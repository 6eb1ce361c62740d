"""The native fault battery on the CPU device, under each sandbox: C++ host code (a static initializer
and a function forward calls) forks orphans and a bounded fork bomb, writes into every cache the judge
keeps, into its own module file, /dev and /dev/shm, leaves a System V segment, connects to a loopback
listener of this test, looks for the judge's secrets in every /proc/*/environ, signals its parent and
the judge, spins, segfaults and swaps an output slot for a named pipe or a link. Each evaluation ends
in a verdict, nothing is left behind (no process, no file outside its folder, no shared memory), and
after the faults the judge still judges a submission correctly.

The C++ is tests/native/native_host.py's (one build for the whole battery). Where torch sees a GPU
the battery runs on cuda too: the same host code beside CUDA kernels, with a kernel that never ends
and one that writes an illegal address in place of the output slot swaps (a CUDA slot is no file).
"""
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import torch

import kernel_env
from kernel_env.judge import Judge, JudgeConfig
from kernel_env.judge.builds import build_key, intact
from kernel_env.judge.sandbox import isolation

sys.path.insert(0, str(Path(__file__).resolve().parent / "native"))
from native_host import submission  # noqa: E402

slow = pytest.mark.slow  # builds the battery's extension (~25 s, once), runs a judge per sandbox
TASK = "level1/1_Small_ReLU"


def _processes_named(prefix: str) -> list:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and Path(f"/proc/{pid}/comm").read_text().startswith(prefix):
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] not in ("Z", "X"):
                    out.append(int(pid))
        except OSError:
            pass
    return out


def _sysv_keys() -> set:
    try:
        lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(line.split()[0]) for line in lines if line.split()}


@slow
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_native_host_code_leaves_nothing_behind(mode, device, cache_dir, monkeypatch):
    try:
        isolation(mode)
    except RuntimeError:
        pytest.skip(f"{mode} does not work on this machine (bwrap: not installed; unshare: needs root)")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no GPU here: the CPU device runs the same host code")
    tok = secrets.token_hex(4)
    work = Path(tempfile.mkdtemp(prefix="kernel_env_test_native_"))
    judge = Judge(JudgeConfig(device=device, cache_dir=cache_dir, sandbox=mode, build_slots=1, timing_budget_s=0.2,
                              build_timeout_s=300, run_timeout_s=8, work_dir=work,
                              **({"idle_runners": 2} if device == "cuda" else {})))
    assert judge.isolation == mode
    secret = f"kenv-secret-{tok}"
    monkeypatch.setenv("KERNEL_ENV_TOKEN", secret)  # the judge's environment: no candidate may read it

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    hits, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                srv.accept()[0].close()
                hits.append(1)
            except OSError:
                pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    signalled = []
    old_handler = signal.signal(signal.SIGUSR2, lambda *_: signalled.append(1))

    def native(doc, **kw):
        return submission(doc, device=device, **kw)

    ext_dir = cache_dir / "torch_extensions" / build_key(native("any"))
    name = "kernel_env_native_faults" + ("_cuda" if device == "cuda" else "")
    module = ext_dir / name / f"{name}.so"  # the published build
    caches = [cache_dir / d for d in ("triton", "triton-judge", "triton-warm", "pycache", "pch", "torch_extensions",
                                      "build-staging")]
    for d in caches:
        d.mkdir(parents=True, exist_ok=True)
    shm, dev, tmp = Path(f"/dev/shm/kenv_native_{tok}"), Path(f"/dev/kenv_native_{tok}"), Path(f"/tmp/kenv_native_{tok}")
    targets = [d / f"planted_{tok}" for d in caches] + [
        shm, dev, tmp, Path(kernel_env.__file__).parent / f"planted_{tok}", work / f"planted_{tok}",
        ext_dir / f"planted_{tok}"]
    key = 0x4B450000 + secrets.randbelow(0xFFFF)
    everything = "; ".join([f"orphan kenv_orphan{tok[:4]}", "bomb 20", f"sysv {key:x}", f"connect {srv.getsockname()[1]}",
                            f"secret {secret}", f"signal {os.getpid()}", f"write {module}", "rewrite-self -",
                            *(f"write {t}" for t in targets)])
    try:
        # faults in forward, in the run process: each a clear verdict, nothing left. At load each tries
        # to rewrite its own module: the first one builds it (the first build of this kernel here)
        # an output slot (a file in its folder on the CPU) that the judge reads back, swapped for a named
        # pipe (opening it would wait for a writer) or a link to a file of the judge's: a wrong output
        faults = [("segfault", "orphan kenv_seg; bomb 10; segv -", "relu", {("run", "crash")}),
                  ("spinning host code", "orphan kenv_spin; spin -", "relu", {("run", "run_timeout")})]
        if device == "cpu":
            faults += [("slot made a pipe", "fifo slots/slot0_0.bin", "relu", {("correctness", "output_mismatch")}),
                       ("slot made a link", f"link slots/slot0_0.bin>{module}", "relu",
                        {("correctness", "output_mismatch")})]
        else:
            faults += [("spinning kernel", "orphan kenv_gpu", "spin", {("run", "run_timeout")}),
                       ("illegal address", "orphan kenv_ill", "illegal", {("run", "crash"), ("run", "runtime_error")})]
        for fault, plan, kernel, want in faults:
            t0 = time.monotonic()
            v = judge.evaluate_sync(TASK, native(fault, at_load="rewrite-self -", in_forward=plan, kernel=kernel))
            assert (v.stage, v.error_kind) in want, (fault, v.feedback)
            if fault.startswith("slot"):  # built by now: nothing waits for the reference worker's timeout
                assert time.monotonic() - t0 < 60, fault
            time.sleep(0.5)
            assert not _processes_named("kenv_"), fault
            assert not list(work.iterdir()), fault

        # everything at load, in the build process and again in the run process: contained, and the
        # judge (after the faults above) still judges it correctly
        v = judge.evaluate_sync(TASK, native("everything at load", at_load=everything))
        assert (v.stage, v.correct) == ("timed", True), v.feedback  # not exit 42: no secret seen
        time.sleep(0.5)
        assert not [t for t in targets if t.exists()], "a write outside its folder landed"
        assert not list(Path("/dev/shm").glob("kenv_native_*")), "a file in the host's /dev/shm outlived it"
        assert key not in _sysv_keys(), "its System V segment outlived it"
        assert not _processes_named("kenv_"), "a process it forked outlived it"
        assert not hits, "it reached a socket outside its sandbox"
        assert not signalled, "it signalled the judge"
        assert module.stat().st_size > 0 and intact(ext_dir), "the published build changed"
        # what it loaded is what the compilers made: neither its build process (before the judge
        # published the module) nor its run process could rewrite it
        assert not module.read_bytes().endswith(b"planted"), "its own code rewrote its published module"
        assert not list(work.iterdir()), "evaluation folders left behind"
    finally:
        stop.set()
        listener.join(5)
        srv.close()
        signal.signal(signal.SIGUSR2, old_handler)
        for pid in _processes_named("kenv_"):  # what a failed run left: not for the next test
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for t in targets:
            if t.exists() and t.is_file():
                t.unlink()
        if key in _sysv_keys():
            subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)
