"""Deadlines from what the task needs (judge/deadlines.py): each step of a candidate process on the
judge's own clock, the import's time outside compilers, and a clean device slot after a kill.

Two kinds of test: scripted candidate processes (a few lines of Python standing in for a hostile
runner, started in the judge's real sandbox) against the judge's clock, fast; and the judge's
real path on the CPU device (slow: it builds C++)."""
import asyncio
import json
import os
import secrets
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from kernel_env import protocol as P
from kernel_env.judge import Judge, JudgeConfig, deadlines
from kernel_env.judge.run_stage import drive
from kernel_env.judge.sandbox import PYTHON, Proc, child_env, isolation, wrap

from conftest import sharing_the_precompiled_header, submission

slow = pytest.mark.slow  # builds C++ (one build of a source of its own), runs a judge

TASK = "level1/1_Small_ReLU"
# A judge whose steps are short: the deadlines below are what ends a hang, not run_timeout_s
FAST = dict(run_step_floor_s=1.0, run_first_call_s=1.0, run_ref_factor=16.0, run_construct_s=5.0,
            import_timeout_s=3.0, run_timeout_s=120.0, build_timeout_s=300.0)
KILL_SLACK_S = 3.0  # the kill, the process tree's exit and the event loop's turn, on a loaded 2-core box


def _cfg(tmp_path, **kw) -> JudgeConfig:
    return JudgeConfig(device="cpu", cache_dir=sharing_the_precompiled_header(tmp_path / "cache"), **{**FAST, **kw})


async def _start(tmp_path, script: str) -> Proc:
    """A scripted candidate process in the judge's sandbox: its protocol fd is argv[1]."""
    work = tmp_path / "evals" / secrets.token_hex(4)
    work.mkdir(parents=True)
    (work / "cand.py").write_text(textwrap.dedent(script))
    argv = wrap(isolation("auto"), [PYTHON, str(work / "cand.py")], work, [])
    return await Proc.start(argv, work, child_env(work, {}), 64 * 1024)


# The runner's side of the protocol, as far as a script needs it
_PRELUDE = """
import json, os, subprocess, sys, time
fd = int(sys.argv[1])
def say(msg):
    os.write(fd, (json.dumps(msg) + "\\n").encode())
go = json.loads(sys.stdin.readline())
tok = go["token"]
"""


def _roots(tmp_path):
    return deadlines.untrusted_roots(JudgeConfig(cache_dir=tmp_path / "cache"), tmp_path / "evals")


def _run(coro):
    return asyncio.run(coro)


def test_a_spinning_trial_ends_at_its_deadline_from_the_reference_time(tmp_path):
    cfg = _cfg(tmp_path)
    t_ref_ms = 50.0
    script = _PRELUDE + """
say({"event": "step", "step": "construct", "token": tok})
say({"event": "step", "step": "trial", "i": 0, "token": tok})
while True:
    pass
"""

    async def go():
        cand = await _start(tmp_path, script)
        t0 = time.monotonic()
        run = await drive(cand, [], cfg, t_ref_ms=t_ref_ms, untrusted_roots=_roots(tmp_path))
        took = time.monotonic() - t0
        assert await deadlines.end_process(cand, cfg.kill_wait_s)
        return run, took

    run, took = _run(go())
    bound = deadlines.trial_s(cfg, t_ref_ms, 0)  # floor + first call + 16 x 50 ms
    assert run.failure.kind == "run_timeout", run.failure
    assert "trial 1 of 5 ran past its" in run.failure.feedback and "reference 50 ms" in run.failure.feedback
    assert run.failure.details["deadline"]["step"] == "trial 1 of 5"
    assert run.failure.details["deadline"]["deadline_s"] == pytest.approx(bound)
    assert bound - 0.1 <= took <= bound + deadlines.POLL_S + KILL_SLACK_S


def test_later_trials_get_no_first_call_allowance_and_a_slow_reference_gets_more(tmp_path):
    cfg = _cfg(tmp_path)
    assert deadlines.trial_s(cfg, 1.0, 0) - deadlines.trial_s(cfg, 1.0, 1) == pytest.approx(cfg.run_first_call_s)
    assert deadlines.trial_s(cfg, 100.0, 1) - deadlines.trial_s(cfg, 1.0, 1) == pytest.approx(cfg.run_ref_factor * 0.099)
    # with the defaults a kernel that never returns holds the slot <= 10 s on every level-1 task of the
    # H200 (t_ref up to 185 ms: docs/log/roofline-h200.json)
    assert deadlines.spin_bound_s(JudgeConfig(), 185.5) <= 10.0
    # the timing's deadline covers its rule's own bound: attempts x the budget, the warm-up
    assert deadlines.timing_s(cfg, 1.0) > cfg.timing_attempts * cfg.timing_budget_s + cfg.warmup_s


def test_steps_out_of_order_discard_the_run(tmp_path):
    """A forged or repeated step message cannot buy a second budget: the order is fixed."""
    cfg = _cfg(tmp_path)
    script = _PRELUDE + """
say({"event": "step", "step": "construct", "token": tok})
say({"event": "step", "step": "trial", "i": 0, "token": tok})
say({"event": "step", "step": "trial", "i": 0, "token": tok})
time.sleep(60)
"""

    async def go():
        cand = await _start(tmp_path, script)
        run = await drive(cand, [], cfg, t_ref_ms=1.0, untrusted_roots=_roots(tmp_path))
        await deadlines.end_process(cand, cfg.kill_wait_s)
        return run

    run = _run(go())
    assert run.failure.kind == "timing_invalid" and "out of order" in run.failure.feedback


@pytest.mark.parametrize("rows,batches,checked,kind", [
    # two slots for five trials: two full batches, then the last trial, "next" in between
    (2, [(2, True), (2, True), (1, False)], [(2, 0), (2, 2), (1, 4)], "crash"),
    (None, [(2, True)], [], "timing_invalid"),            # "more" with room left in the slots
    (2, [(2, True), (1, True)], [(2, 0)], "timing_invalid"),  # a batch that does not fill the slots
    (2, [(2, False)], [], "timing_invalid"),              # "the last batch" with trials to come
    (None, [(5, False), (1, False)], [(5, 0)], "timing_invalid"),  # outputs once more after the last
    (None, [(0, False)], [], "timing_invalid"),           # outputs before any trial
])
def test_trial_outputs_come_in_whole_batches_or_the_run_is_discarded(tmp_path, rows, batches, checked, kind):
    """The runner reports each batch of trials that fills the trial slots, waiting for "next" after
    it, then the last batch: any other batch is a forgery. (A run that got through its batches ends
    here when the script exits: a crash, after every batch was checked.)"""
    cfg = _cfg(tmp_path)
    script = _PRELUDE + f"""
say({{"event": "step", "step": "construct", "token": tok}})
i = 0
for n, more in {batches!r}:
    for _ in range(n):
        if i < 5:
            say({{"event": "step", "step": "trial", "i": i, "token": tok}})
        i += 1
    say({{"event": "outputs", "trials": [[]] * n, "more": more, "token": tok}})
    sys.stdin.readline()
"""
    seen = []

    async def check(trials, first):
        seen.append((len(trials), first))
        return {"rows": first + len(trials), "passed": len(trials), "mismatch": None}

    async def go():
        cand = await _start(tmp_path, script)
        run = await drive(cand, [], cfg, check=check, t_ref_ms=1.0, untrusted_roots=_roots(tmp_path),
                          trial_rows=rows)
        await deadlines.end_process(cand, cfg.kill_wait_s)
        return run

    run = _run(go())
    assert run.failure.kind == kind, run.failure
    assert kind != "timing_invalid" or "out of order" in run.failure.feedback
    assert seen == checked


def test_a_runner_waiting_for_a_slow_check_is_not_timed_out(tmp_path):
    """One slot for five trials: the runner waits for each trial's check, which outlasts a later
    trial's whole deadline (1 s floor + 16 x 1 ms here; the worker retries out of memory for up to
    ~10 s). The judge's work is not the candidate's time: the run goes on to its timing."""
    cfg = _cfg(tmp_path)
    assert deadlines.trial_s(cfg, 1.0, 1) < 1.5
    script = _PRELUDE + """
say({"event": "step", "step": "construct", "token": tok})
for i in range(5):
    say({"event": "step", "step": "trial", "i": i, "token": tok})
    say({"event": "outputs", "trials": [[]], "more": i < 4, "token": tok})
    sys.stdin.readline()
say({"event": "timed", "times_ms": [1.0], "calls": 1, "token": tok})
say({"event": "done", "rechecks": [], "token": tok})
"""
    seen = []

    async def check(trials, first):
        await asyncio.sleep(1.5)
        seen.append(first)
        return {"rows": first + 1, "passed": 1, "mismatch": None}

    async def go():
        cand = await _start(tmp_path, script)
        try:
            return await drive(cand, [], cfg, check=check, t_ref_ms=1.0, untrusted_roots=_roots(tmp_path),
                               trial_rows=1)
        finally:
            await deadlines.end_process(cand, cfg.kill_wait_s)

    run = _run(go())
    assert run.failure is None, run.failure
    assert seen == [0, 1, 2, 3, 4] and run.times_ms == [1.0]


def test_a_loop_at_import_ends_at_the_import_deadline(tmp_path):
    cfg = _cfg(tmp_path)
    script = _PRELUDE + "while True:\n    pass\n"

    async def go():
        cand = await _start(tmp_path, script)
        t0 = time.monotonic()
        run = await drive(cand, [], cfg, t_ref_ms=1.0, untrusted_roots=_roots(tmp_path))
        took = time.monotonic() - t0
        await deadlines.end_process(cand, cfg.kill_wait_s)
        return run, took

    run, took = _run(go())
    assert (run.failure.stage, run.failure.kind) == ("build", "build_timeout"), run.failure
    assert "import of the submission ran past its 3 s deadline" in run.failure.feedback
    assert cfg.import_timeout_s - 0.1 <= took <= cfg.import_timeout_s + deadlines.POLL_S + KILL_SLACK_S


def test_claiming_to_compile_buys_no_time(tmp_path):
    """Processes that look like compilers but are not: one named cc1plus that runs `sleep` (its
    executable says what it is), and a copy of Python called nvcc in the candidate's own folder,
    spinning (an executable the candidate wrote). The import deadline passes as if they were not there."""
    cfg = _cfg(tmp_path)
    script = _PRELUDE + """
say({"event": "step", "step": "compiling", "token": tok})   # a claim: not a step at all
import shutil
shutil.copy(sys.executable, "nvcc")
os.chmod("nvcc", 0o755)
subprocess.Popen(["bash", "-c", "exec -a cc1plus sleep 1000"])
subprocess.Popen(["./nvcc", "-c", "while True: pass"])
time.sleep(1000)
"""

    async def go():
        cand = await _start(tmp_path, script)
        t0 = time.monotonic()
        run = await drive(cand, [], cfg, t_ref_ms=1.0, untrusted_roots=_roots(tmp_path))
        took = time.monotonic() - t0
        assert await deadlines.end_process(cand, cfg.kill_wait_s)
        return run, took

    run, took = _run(go())
    # the claim is a step out of order: discarded at once
    assert run.failure.kind == "timing_invalid", run.failure
    script2 = script.replace('say({"event": "step", "step": "compiling", "token": tok})', "")

    async def go2():
        cand = await _start(tmp_path, script2)
        t0 = time.monotonic()
        run = await drive(cand, [], cfg, t_ref_ms=1.0, untrusted_roots=_roots(tmp_path))
        took = time.monotonic() - t0
        await asyncio.sleep(0.5)
        tree = deadlines.descendants(cand.proc.pid)
        assert await deadlines.end_process(cand, cfg.kill_wait_s)
        return run, took, tree

    run, took, tree = _run(go2())
    assert run.failure.kind == "build_timeout", run.failure
    assert run.failure.details["deadline"]["compile_s"] == 0
    assert took <= cfg.import_timeout_s + deadlines.POLL_S + KILL_SLACK_S


def test_a_real_compiler_stops_the_import_clock(tmp_path):
    """The same clock, with a real compiler at work below the process (c++ on a file that takes a while
    to compile): its time is not counted against the import deadline, which passes only after it."""
    cfg = _cfg(tmp_path, import_timeout_s=2.0)
    # templates instantiated to a depth that keeps cc1plus busy for several seconds
    src = ("template<int N> struct F { static constexpr long v = F<N-1>::v + F<N-2>::v % 7 + N; };\n"
           "template<> struct F<0> { static constexpr long v = 0; };\n"
           "template<> struct F<1> { static constexpr long v = 1; };\n"
           + "".join(f"template<int N> struct G{k} {{ static constexpr long v = G{k}<N-1>::v + F<N % 400>::v; }};\n"
                     f"template<> struct G{k}<0> {{ static constexpr long v = {k}; }};\n"
                     f"long x{k} = G{k}<900>::v;\n" for k in range(300)))
    script = _PRELUDE + f"""
open("slow.cpp", "w").write({src!r})
t0 = time.monotonic()
r = subprocess.run(["c++", "-ftemplate-depth=5000", "-O1", "-c", "slow.cpp", "-o", "slow.o"])
say({{"event": "step", "step": "construct", "token": tok, "compile_s": time.monotonic() - t0, "rc": r.returncode}})
time.sleep(1000)
"""

    async def go():
        cand = await _start(tmp_path, script)
        t0 = time.monotonic()
        dl = deadlines.Deadline(cand, cfg, untrusted_roots=_roots(tmp_path))
        deadlines.import_step(dl, cfg)
        await cand.send(json.dumps({"cmd": P.GO, "token": "t"}))
        msg = await dl.next_message()
        took = time.monotonic() - t0
        compile_s = dl.clock.compile_s
        await deadlines.end_process(cand, cfg.kill_wait_s)
        return msg, took, compile_s

    msg, took, compile_s = _run(go())
    assert msg.get("event") == "step" and msg.get("rc") == 0, msg
    assert msg["compile_s"] > cfg.import_timeout_s + deadlines.POLL_S, msg  # long enough to matter
    assert took > cfg.import_timeout_s and compile_s >= msg["compile_s"] - 2 * deadlines.POLL_S


def test_a_killed_process_tree_is_gone_before_end_process_returns(tmp_path):
    """bwrap puts the candidate in a session of its own: the wrapper's exit says nothing of it. The
    judge waits for every process below it."""
    script = _PRELUDE + """
import signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen(["sleep", "1000"])
say({"event": "step", "step": "construct", "token": tok})
time.sleep(1000)
"""

    async def go():
        cand = await _start(tmp_path, script)
        await cand.send(json.dumps({"cmd": P.GO, "token": "t"}))
        await cand.next_message(30)
        tree = deadlines.descendants(cand.proc.pid)
        ok = await deadlines.end_process(cand, 30)
        left = {p for p, st in tree.items() if (now := deadlines._stat(str(p))) and now.start == st.start
                and now.state not in ("Z", "X")}
        return tree, ok, left

    tree, ok, left = _run(go())
    assert len(tree) >= 2 and ok and not left, (tree, left)


def test_a_process_whose_main_thread_exited_is_not_gone_while_another_thread_runs():
    """A killed process's main thread is a zombie at once, while its other threads (the CUDA driver's
    among them) are still exiting, holding its memory and its GPU context. Here the main thread ends
    itself (pthread_exit) and another one goes on for a second: the process is gone only after it."""
    import subprocess
    import sys
    code = ("import ctypes, threading, time\n"
            "threading.Thread(target=time.sleep, args=(1.5,)).start()\n"
            "ctypes.CDLL(None).pthread_exit(None)\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        t0 = time.monotonic()
        while (st := deadlines._stat(str(proc.pid))) is not None and st.state != "Z" and time.monotonic() - t0 < 10:
            time.sleep(0.01)
        assert st is not None and st.state == "Z"  # the main thread has exited, the process has not
        t = time.monotonic()
        ok = asyncio.run(deadlines.gone({proc.pid: st}, 30))
        waited = time.monotonic() - t
        assert deadlines.start_time(proc.pid) is None
    finally:
        proc.wait()
    assert ok and waited >= 1.5 - (t - t0) - 0.1, waited


# ---------------------------------------------------------------- the judge's real path (CPU, C++)
@pytest.fixture(scope="module")
def judge(cache_dir):
    return Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=1, timing_budget_s=0.3,
                             work_dir=tempfile.mkdtemp(prefix="kernel_env_test_deadlines_"),
                             # a build process runs under SCHED_IDLE: on a loaded 2-core box loading even a
                             # cached build took > 3 s outside compilers
                             **{**FAST, "import_timeout_s": 10.0}))


def _candidates_left(judge) -> list:
    out = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(judge.work_root) in cmd and "kernel_env.candidate.runner" in cmd:
            out.append(cmd[:120])
    return out


@slow
def test_a_spinning_kernel_is_killed_in_its_trial_and_the_next_evaluation_is_normal(judge):
    ok = judge.evaluate_sync(TASK, submission("relu_ok.py"))  # builds the shared extension (cached)
    assert ok.stage == "timed" and ok.correct, ok.feedback
    t0 = time.monotonic()
    v = judge.evaluate_sync(TASK, submission("relu_hang.py"))
    took = time.monotonic() - t0
    bound = deadlines.trial_s(judge.cfg, v.t_ref_ms or judge._profiles[TASK]["t_ref_ms"], 0)
    assert (v.stage, v.error_kind) == ("run", "run_timeout"), v.feedback
    assert "trial 1 of 5 ran past its" in v.feedback, v.feedback
    assert v.details["deadline"]["deadline_s"] == pytest.approx(bound, abs=1e-3)
    assert v.timings["run_s"] <= bound + deadlines.POLL_S + KILL_SLACK_S, v.timings
    assert took < 60
    assert not _candidates_left(judge)
    after = judge.evaluate_sync(TASK, submission("relu_ok.py"))
    assert after.stage == "timed" and after.correct and after.trials_passed == 5, after.feedback


@slow
def test_a_python_loop_at_import_ends_in_the_import_deadline(judge):
    # the extension and the precompiled header in the cache first (a second of work after the test
    # above), so that the build stage's time below is the import's
    assert judge.evaluate_sync(TASK, submission("relu_ok.py")).correct
    code = submission("relu_ok.py").replace("\nclass ModelNew(", "\nwhile True:\n    pass\n\n\nclass ModelNew(", 1)
    t0 = time.monotonic()
    v = judge.evaluate_sync(TASK, code)
    took = time.monotonic() - t0
    assert (v.stage, v.error_kind) == ("build", "build_timeout"), v.feedback
    assert "deadline for time outside compilers" in v.feedback, v.feedback
    # a build process runs under SCHED_IDLE: time it waited for a CPU on a loaded box is not its own
    starved = v.details["deadline"]["starved_s"]
    assert v.timings["build_s"] <= judge.cfg.import_timeout_s + starved + deadlines.POLL_S + KILL_SLACK_S, v.details
    assert took < 60 and not _candidates_left(judge)


@slow
def test_a_slow_compile_is_not_killed_by_the_import_deadline(judge):
    # a kernel source of its own: built now, in the build process, for longer than import_timeout_s
    code = submission("relu_ok.py").replace('name="kernel_env_test_ops"', 'name="kernel_env_deadline_build"').replace(
        "// Never returns", f"// built for this test alone ({secrets.token_hex(4)})\\n// Never returns")
    assert code != submission("relu_ok.py")
    v = judge.evaluate_sync(TASK, code)
    assert v.stage == "timed" and v.correct, v.feedback
    assert v.timings["build_s"] > judge.cfg.import_timeout_s + deadlines.POLL_S, v.timings
