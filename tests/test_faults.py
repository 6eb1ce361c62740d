"""The fault battery on the CPU device: hostile or broken submissions end as a clear verdict, the
judge keeps judging correctly afterwards, and nothing is left behind (processes, folders, files).

Each case is the shared test kernel (tests/submissions/relu_ok.py: cached build) with a fault put
into ModelNew.forward or into the module body.
"""
import os
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

import kernel_env
from kernel_env.judge import Judge, JudgeConfig

from conftest import submission

BASE = submission("relu_ok.py")
FORWARD = "        return _ops.relu(x)"
assert FORWARD in BASE


def with_forward(prefix: str) -> str:
    body = "\n".join("        " + line for line in prefix.strip("\n").splitlines())
    return BASE.replace(FORWARD, body + "\n" + FORWARD)


def with_module(code: str) -> str:
    return BASE.replace("\nclass ModelNew(", "\n" + code.strip("\n") + "\n\n\nclass ModelNew(", 1)


@pytest.fixture(scope="module")
def judge(cache_dir):
    return Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=1, timing_budget_s=0.2,
                             build_timeout_s=300, run_timeout_s=8,
                             work_dir=tempfile.mkdtemp(prefix="kernel_env_test_faults_")))


def _leftover_processes(*markers: str) -> list:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(m in cmd for m in markers):
            out.append((pid, cmd[:120]))
    return out


def _clean(judge):
    assert not [p for p in judge.work_root.iterdir()], "evaluation folders left behind"
    assert not _leftover_processes("kernel_env_fault_marker", str(judge.work_root))


def _still_judges_correctly(judge):
    v = judge.evaluate_sync("level1/1_Small_ReLU", BASE)
    assert v.stage == "timed" and v.correct, v.feedback


def test_isolation_is_in_force_here(judge):
    # CI and dev machines have bubblewrap (installed by .ci/run); the checks below rely on it
    assert judge.isolation == "bwrap"


@pytest.mark.parametrize("name,code,stage,kind,text", [
    ("exit", with_forward("import os\nos._exit(0)"), "run", "crash", "exited with status 0"),
    ("kill_parent", with_forward("import os\ngetattr(os, \"ki\" + \"ll\")(os.getppid(), 9)"), "timed", "none", "correct"),  # its parent is the sandbox init: the signal is ignored
    ("sleep_forever", with_forward("import time\ntime.sleep(10**6)"), "run", "run_timeout", "Timed out"),
    ("print_gigabytes", with_forward("while True:\n    print('x' * (1 << 20), flush=True)"), "run", "run_timeout", "Timed out"),
    ("host_memory", with_forward("hog = bytearray(1 << 40)"), "run", "runtime_error", "MemoryError"),
    ("import_loop", with_module("while True:\n    pass"), "build", "build_timeout", "timed out"),
    ("import_exit", with_module("import os\nos._exit(5)"), "build", "crash", "exited with status 5"),
])
def test_fault_ends_as_a_clear_verdict(judge, name, code, stage, kind, text):
    if name == "import_loop":
        judge.cfg.build_timeout_s = 10
    try:
        v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    finally:
        judge.cfg.build_timeout_s = 60
    assert (v.stage, v.error_kind) == (stage, kind), (name, v.feedback)
    assert text.lower() in v.feedback.lower(), v.feedback
    assert len(v.feedback) <= judge.cfg.feedback_max_chars
    assert v.timings.get("run_s", 0) <= judge.cfg.run_timeout_s + 5  # ended by the judge, not left running
    _clean(judge)


def test_fork_bomb_leaves_no_process_behind(judge):
    code = with_forward("""
import os, time
fork, setsid, execvp = (getattr(os, n) for n in ("fo" + "rk", "set" + "sid", "exec" + "vp"))
for _ in range(100):
    if fork() == 0:
        setsid()
        if fork() == 0:
            execvp("sleep", ["sleep", "1000", "kernel_env_fault_marker"])
        os._exit(0)
time.sleep(10**6)
""")
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    assert v.stage == "run" and v.error_kind in ("run_timeout", "crash"), v.feedback
    time.sleep(1)
    _clean(judge)
    _still_judges_correctly(judge)


def test_writes_outside_its_folder_do_not_land(judge, cache_dir, tmp_path):
    targets = [Path(kernel_env.__file__).parent / "kernel_env_fault_marker", cache_dir / "profiles" / "planted.json",
               tmp_path / "outside.txt"]
    for t in targets:  # one evaluation per target: the first refused write ends the import
        code = with_module(f"import pathlib\npathlib.Path({str(t)!r}).parent.mkdir(parents=True, exist_ok=True)\n"
                           f"pathlib.Path({str(t)!r}).write_text('x')")
        v = judge.evaluate_sync("level1/1_Small_ReLU", code)
        assert not t.exists(), t
        # refused (read-only file system: a build error) or written into the sandbox's private /tmp
        assert v.stage in ("timed", "build"), v.feedback
    _clean(judge)


def test_no_network_and_no_secrets(judge, monkeypatch):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    hits = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                srv.accept()[0].close()
                hits.append(1)
            except OSError:
                pass

    th = threading.Thread(target=accept, daemon=True)
    th.start()
    monkeypatch.setenv("KERNEL_ENV_TOKEN", "very-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "also-secret")
    # exits with 42 if it can see a secret; then tries to reach the test's socket
    code = with_forward(f"""
import os, urllib.request
if any("secret" in v for v in os.environ.values()):
    os._exit(42)
urllib.request.urlopen("http://127.0.0.1:{port}/", timeout=2)
""")
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    stop.set()
    th.join(5)
    srv.close()
    assert not hits, "the candidate reached a socket outside its sandbox"
    assert (v.stage, v.error_kind) == ("run", "runtime_error"), v.feedback  # not exit 42: no secrets seen
    assert "unreachable" in v.feedback.lower() or "urlopen error" in v.feedback.lower(), v.feedback
    _clean(judge)
