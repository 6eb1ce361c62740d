"""The judge through its real subprocess path, on the CPU device (C++ load_inline kernels)."""
import asyncio
import json
import math
import re
import os
from pathlib import Path
import subprocess
import tempfile
import sys
import time
import traceback

import pytest
import torch

from kernel_env.judge import Judge, JudgeConfig
from kernel_env.judge.compare import compare_outputs
from kernel_env.judge.roofline import count_flops, speed_of_light

from conftest import ROOT, sharing_the_precompiled_header, submission, waits_for_the_loop

slow = pytest.mark.slow  # runs a judge's processes: builds, candidates, reference workers

TOL = {"atol_fp32": 1e-4, "rtol_fp32": 1e-4, "atol_half": 1e-2, "rtol_half": 1e-2, "tiny_output_frac": 0.01}


def make_judge(cache_dir, **kw):
    kw.setdefault("timing_budget_s", 0.3)
    kw.setdefault("work_dir", tempfile.mkdtemp(prefix="kernel_env_test_work_"))  # this judge's alone
    return Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=1, **kw))


def _children_of_us():
    out = subprocess.run(["ps", "-o", "pid=,args=", "--ppid", str(os.getpid())], capture_output=True, text=True).stdout
    # the precompiled-header builder (judge/prebuild.py) is the cache's, not an evaluation's: it may
    # outlive one; it ends by itself
    return [l for l in out.splitlines() if "kernel_env" in l and "kernel_env.judge.prebuild" not in l
            and "kernel_env.judge.bytecode_cache" not in l]


def _candidates_gone(keep=("reference_worker",), judge=None, within_s: float = 10.0) -> list:
    """The candidate processes still children of this one, after waiting up to `within_s` for a killed
    sandbox (bwrap tearing down its namespaces) to exit: [] when all are gone. `judge`: its idle
    processes (started for the next evaluation, no candidate's code in them) are not leftovers."""
    deadline = time.monotonic() + within_s
    while True:
        idle = {str(p.proc.pid) for ps in judge.pools.idle.values() for p in ps} if judge is not None else set()
        left = [p for p in _children_of_us() if not any(k in p for k in keep) and p.split()[0] not in idle]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _leftovers(judge):
    staged = sorted(judge.build_staging.iterdir()) if judge.build_staging.exists() else []
    return sorted(p.name for p in judge.work_root.iterdir() if p.name.startswith(("eval-", "ref-", "profile-"))) + staged


@slow
def test_correct_cpp_kernel_is_timed_with_speedup_and_roofline(cache_dir):
    judge = make_judge(cache_dir)
    before = _leftovers(judge)
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_ok.py"))
    assert v.stage == "timed" and v.correct and v.error_kind == "none", v.feedback
    assert v.trials_passed == 5
    assert v.t_new_ms > 0 and v.t_ref_ms > 0 and v.speedup == pytest.approx(v.t_ref_ms / v.t_new_ms)
    assert v.t_min_ms > 0 and v.bound == "memory"
    assert v.roofline_frac == pytest.approx(v.t_min_ms / v.t_new_ms)
    assert v.ref_roofline_frac == pytest.approx(v.t_min_ms / v.t_ref_ms)
    assert v.flops == 256 * 4096 and v.bytes_moved == 2 * 256 * 4096 * 4
    assert not v.suspicious and not v.roofline_violation
    assert "faster than" in v.feedback or "slower than" in v.feedback
    assert "% of roofline, memory-bound" in v.feedback
    # where the device slot went, per phase of the run process; per trial: inputs, forward, copy
    ph = v.details["run_phases"]
    assert {"import_s", "construct_s", "trials_s", "timing_s"} <= set(ph)
    assert len(ph["trial_steps_s"]) == 5 and all(len(t) == 3 for t in ph["trial_steps_s"])
    assert ph["trials_s"] + ph["timing_s"] <= v.timings["run_s"]
    # one spread per measurement: a second only when the first was disturbed (harness.time_calls)
    assert 1 <= len(ph["timing_spreads"]) <= 3 and (len(ph["timing_spreads"]) == 1 or ph["timing_spreads"][0] > 0.25)
    # the run process imported the module the build process made (fast_build's manifest): no build step
    # of its own (a C++ build here takes tens of seconds)
    from kernel_env.judge.builds import build_key
    assert list((cache_dir / "torch_extensions" / build_key(submission("relu_ok.py"))).glob("*/kernel_env_built.json"))
    assert ph["import_s"] < 1.0 and len(ph["module_sha"]) == 16  # which build ran
    # the reference worker checked the five trials before the candidate was timed, and its timing
    # started only after that check had answered
    check = v.details["ref_phases"]["check"]
    assert check["rows"] == 5 and not check["deferred"] and check["forward_s"] > 0
    # (gate_s is rounded to 1 ms by the runner, the check's s to 0.1 ms: compare within that rounding)
    assert ph["timing_t0_us"] >= check["done_t"] * 1e6 and ph["gate_s"] + 0.0006 >= check["s"]
    assert v.details["ref_phases"]["compare"]["forward_s"] > 0  # the two rechecks of timed calls, after it
    assert _leftovers(judge) == before and not _children_of_us()


@slow
def test_fused_linear_relu_with_parameters_is_correct(cache_dir):
    v = make_judge(cache_dir).evaluate_sync("level2/1_Small_Linear_ReLU", submission("linear_relu_ok.py"))
    assert v.correct, v.feedback
    assert v.flops >= 2 * 64 * 512 * 512  # the addmm, counted by FlopCounterMode


@slow
def test_wrong_kernel_fails_correctness_with_numbers(cache_dir):
    v = make_judge(cache_dir).evaluate_sync("level1/1_Small_ReLU", submission("relu_wrong.py"))
    assert v.stage == "correctness" and not v.correct and v.error_kind == "output_mismatch"
    assert v.speedup is None and v.trials_passed == 0
    assert "outside tolerance" in v.feedback and "expected" in v.feedback
    assert v.details["mismatch"]["max_abs_err"] > 1e-4
    # found by the check of the trials before the timing: it was never timed
    assert v.details["ref_phases"]["check"]["rows"] == 0 and "run_phases" not in v.details
    assert "compare" not in v.details["ref_phases"]
    assert "trial 1 of 5" in v.feedback


@slow
def test_trials_that_share_slots_are_checked_batch_by_batch(cache_dir):
    """Two output slots for five trials (what a multi-GB task gets on a card without room for five):
    the runner waits for each batch's check before it uses the slots again. An honest kernel is correct
    and timed; one that goes wrong from its third call on fails at a trial of a later batch, which ran
    in a slot an earlier trial had used, and is never timed."""
    judge = make_judge(cache_dir, trial_rows=2)
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_ok.py"))
    assert v.correct and v.trials_passed == 5, v.feedback
    check = v.details["ref_phases"]["check"]
    assert check["batches"] == 3 and check["rows"] == 5 and check["passed"] == 5 and not check["deferred"]
    assert len(v.details["run_phases"]["trial_steps_s"]) == 5
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_wrong_after_two_calls.py"))
    assert (v.stage, v.error_kind) == ("correctness", "output_mismatch"), v.feedback
    check = v.details["ref_phases"]["check"]
    assert v.details["mismatch"]["trial"] >= 2 and check["batches"] >= 2 and check["passed"] >= 2
    assert v.trials_passed == check["passed"] and "run_phases" not in v.details  # never timed


@slow
def test_segfault_is_a_run_failure_not_an_exception(cache_dir):
    judge = make_judge(cache_dir)
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_segfault.py"))
    assert v.stage == "run" and v.error_kind == "crash" and not v.correct
    assert "SIGSEGV" in v.feedback
    assert not _children_of_us()


@slow
def test_infinite_loop_times_out_and_the_process_group_is_killed(cache_dir):
    judge = make_judge(cache_dir, run_timeout_s=4)
    t0 = time.monotonic()
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_hang.py"))
    assert v.stage == "run" and v.error_kind == "run_timeout"
    assert "Timed out" in v.feedback
    assert time.monotonic() - t0 < 60
    assert not _children_of_us() and not _leftovers(judge)


@slow
def test_no_model_new_is_a_format_failure(cache_dir):
    judge = make_judge(cache_dir)
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("no_model_new.py"))
    assert v.stage == "format" and v.error_kind == "no_model_new"
    # a name that is bound but is not a class is found when the module is imported
    code = submission("relu_ok.py").replace("class ModelNew(", "class _Impl(") + "\nModelNew = None\n"
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    assert v.stage == "format" and v.error_kind == "no_model_new", v.feedback


@slow
def test_an_import_error_that_is_not_a_compile_error_is_reported_by_the_run_process(cache_dir):
    # the build process defers it (a submission may look for the GPU it does not have there); the run
    # process imports again in the device slot and reports it as the build stage's error
    code = submission("relu_ok.py").replace("\nclass ModelNew(", "\nNOT_DEFINED_AT_IMPORT + 1\n\n\nclass ModelNew(", 1)
    judge = make_judge(cache_dir)
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    assert (v.stage, v.error_kind) == ("build", "build_error"), v.feedback
    assert "NOT_DEFINED_AT_IMPORT" in v.feedback and "NameError" in v.feedback, v.feedback
    assert "queue_s" in v.timings and v.timings["build_s"] > 0  # it did get to the run process
    assert not _children_of_us() and not _leftovers(judge)


@slow
def test_a_source_that_includes_an_endless_file_ends_as_a_build_error(cache_dir):
    """`#include "/dev/zero"`: g++ reads it, doubling its buffer, until an allocation fails. The
    compile process caps the compilers' address space at its own plus compile_memory_bytes on every
    device, so that allocation fails at once (here 256 MiB: g++ asks for 2 GiB first), not after the
    machine's memory is gone (on a GPU box nothing else limits it; here the CPU device's 16 GiB would
    have let it read 8 GiB)."""
    code = submission("relu_ok.py").replace('name="kernel_env_test_ops"', 'name="kernel_env_test_endless"').replace(
        "#include <torch/extension.h>", '#include "/dev/zero"\n#include <torch/extension.h>', 1)
    assert '"/dev/zero"' in code
    v = make_judge(cache_dir, compile_memory_bytes=256 << 20).evaluate_sync("level1/1_Small_ReLU", code)
    assert (v.stage, v.error_kind) == ("build", "build_error"), v.feedback
    sizes = [int(n) for n in re.findall(r"out of memory allocating (\d+) bytes", v.feedback)]
    assert sizes and max(sizes) <= (2 << 30) + 4096, v.feedback


@slow
def test_build_error_reports_the_compiler_error_line(cache_dir):
    code = submission("relu_ok.py").replace('name="kernel_env_test_ops"', 'name="kernel_env_test_broken"').replace(
        "return y;\n}", "return y  // missing semicolon\n}", 1)
    judge = make_judge(cache_dir)
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    assert v.stage == "build" and v.error_kind == "build_error"
    assert "error" in v.feedback and "main.cpp" in v.feedback or "expected" in v.feedback, v.feedback
    assert "/tmp/" not in v.feedback and sys.prefix not in v.feedback and "-isystem" not in v.feedback  # no server paths
    # the same broken kernel again (a policy's samples repeat one word for word): the compilers' answer
    # without compiling it again
    assert judge.stats()["compiles_rejected_again"] == 0
    again = judge.evaluate_sync("level1/1_Small_ReLU", code.replace("class ModelNew(", "# another sample\nclass ModelNew(", 1))
    assert (again.stage, again.error_kind, again.feedback) == (v.stage, v.error_kind, v.feedback)
    assert judge.stats()["compiles_rejected_again"] == 1
    # a kernel the compilers accept is not answered from there
    ok = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_ok.py"))
    assert ok.correct, ok.feedback
    assert judge.stats()["compiles_rejected_again"] == 1


@pytest.mark.parametrize("flags", [["--run", "--run-args", ";touch /tmp/kernel_env_ran"], ["-run"],
                                   ["--run-args=;id"], ["-Xcompiler", "-wrapper,/bin/sh"], ["-ccbin=/tmp/x"],
                                   ["-O2\nrule pwn\n  command = touch pwned\nbuild pwned: pwn\ndefault pwned"],
                                   ["-DX=$out"], ["-O2\r"]])
def test_flags_that_run_programs_are_refused(flags):
    """nvcc --run executes its output through a shell with --run-args appended (checked with nvcc 13.0:
    `nvcc -c x.cu -o x.o --run --run-args ";echo PWNED"` prints PWNED); torch writes flags into
    build.ninja unescaped, so a newline in one adds a rule whose command ninja runs (checked with torch
    2.13's _write_ninja_file and ninja: the injected command ran)."""
    from kernel_env.judge.builds import _unsafe_call
    why = _unsafe_call({"name": "ext", "cpp_sources": "", "cuda_sources": "", "extra_cuda_cflags": ["-O3", *flags]})
    assert why and "not allowed" in why, flags
    assert _unsafe_call({"name": "ext", "extra_cuda_cflags": ["-O3", "--use_fast_math", "-lineinfo",
                                                               "--resource-usage", "-Xptxas=-v"]}) is None
    # torch's other flag lists reach build.ninja the same way
    assert "not allowed" in _unsafe_call({"name": "ext", "extra_sycl_cflags": flags})


@slow
@pytest.mark.parametrize("flag", ["-B/tmp/kernel_env_tools/", "-Wl,-plugin,/tmp/p.so", "@/tmp/kernel_env_flags",
                                  "--run-args=;touch /tmp/kernel_env_ran"])
def test_flags_that_change_the_toolchain_are_refused_before_any_compile(tmp_path, flag):
    """A compiler told to run another assembler, load a plugin or read flags from a file could run a
    program of the candidate's choosing where the module is made: the judge refuses the call."""
    code = submission("relu_ok.py").replace('extra_cflags=["-O2"]', f'extra_cflags=["-O2", {flag!r}]', 1)
    assert flag in code
    judge = make_judge(sharing_the_precompiled_header(tmp_path / "cache"))
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    assert (v.stage, v.error_kind) == ("build", "build_error"), v.feedback
    assert "not allowed" in v.feedback and flag.split("/")[0] in v.feedback, v.feedback
    built = tmp_path / "cache" / "torch_extensions"
    assert not list(built.rglob("*.so")) and not list(built.rglob("*.o")), "something was compiled"


@pytest.mark.parametrize("code,kind", [
    ("", "empty_code"),
    ("   \n", "empty_code"),
    ("x" * (256 * 1024 + 1), "code_too_large"),
    (b"\xff\xfe class ModelNew: pass", "not_utf8"),
    ("class ModelNew(:\n", "syntax_error"),
    ("import torch\nclass Other: pass\n", "no_model_new"),
    # CPython's parser gives up on these with MemoryError and RecursionError, not SyntaxError
    ("x = " + "-" * 30000 + "1\nclass ModelNew: pass\n", "syntax_error"),
    ("x = 1" + "+1" * 60000 + "\nclass ModelNew: pass\n", "syntax_error"),
])
def test_format_failures_never_start_a_process(cache_dir, code, kind):
    v = make_judge(cache_dir).evaluate_sync("level1/1_Small_ReLU", code)
    assert v.stage == "format" and v.error_kind == kind and v.feedback
    assert "timings" in v.to_dict() and "build_s" not in v.timings


def test_the_screen_leaves_the_event_loop_free(cache_dir, monkeypatch):
    """The screen parses and checks text the submission controls (most of a second, built to be slow):
    the server's other sessions must not wait on it. Here a screen that finishes only once the event
    loop has run something else."""
    from kernel_env.judge import service

    stand_in, screening, loop_ran = waits_for_the_loop(service.screen_parsed)
    monkeypatch.setattr(service, "screen_parsed", stand_in)
    judge = make_judge(cache_dir)

    async def go():
        evaluation = asyncio.create_task(judge.evaluate("level1/1_Small_ReLU", "class ModelNew(:\n"))
        while not screening.is_set():
            await asyncio.sleep(0.01)
        loop_ran.set()  # this coroutine ran while the screen was under way
        return await evaluation

    v = asyncio.run(go())
    assert (v.stage, v.error_kind) == ("format", "syntax_error")


def test_the_screen_survives_finalizers_that_format_tracebacks(cache_dir):
    """A collection in the middle of a parse runs finalizers; one that formats a traceback parses
    source itself (traceback.py, for its ^^^ marks), which on CPython 3.11 turned the outer parse
    into a SystemError. Asyncio's "exception was never retrieved" is such a finalizer."""
    from kernel_env.judge.intake import screen

    class Garbage:
        def __init__(self):
            self.me = self  # a cycle: only the collector frees it

        def __del__(self):
            try:
                {"a": [1]}["a"][5] + (1 * 2)
            except IndexError:
                traceback.format_exc()

    cfg = JudgeConfig(device="cpu", cache_dir=cache_dir)
    code = submission("relu_ok.py")
    for _ in range(400):
        for _ in range(50):
            Garbage()
        assert screen("level1/1_Small_ReLU", code, cfg) is None


@slow
def test_triton_kernel_under_the_interpreter(cache_dir):
    pytest.importorskip("triton")
    v = make_judge(cache_dir).evaluate_sync("level1/1_Small_ReLU", submission("triton_relu.py"))
    assert v.stage == "timed" and v.correct, v.feedback


@slow
def test_the_same_source_again_skips_its_build_process(cache_dir):
    judge = make_judge(cache_dir)
    code = submission("relu_ok.py")  # load_inline at import: a build stage (a Triton one has none)
    first = judge.evaluate_sync("level1/1_Small_ReLU", code)
    again = judge.evaluate_sync("level1/1_Small_ReLU", code)
    other = judge.evaluate_sync("level1/1_Small_ReLU", code + "\n# another submission\n")
    assert first.correct and again.correct and other.correct, (first.feedback, again.feedback, other.feedback)
    assert first.timings["build_s"] > 0 and "build_cached" not in first.details
    assert again.timings["build_s"] == 0 and again.details["build_cached"]
    assert other.timings["build_s"] > 0 and "build_cached" not in other.details
    # where the reference worker's part of the device slot went
    ref = again.details["ref_phases"]
    assert {"profile_s", "slots_s"} <= set(ref["prepare"]) and {"inputs_s", "forward_s", "compare_s"} <= set(ref["compare"])


@slow
def test_build_processes_run_at_a_lower_priority(tmp_path):
    from kernel_env.judge.sandbox import PYTHON, Proc, child_env

    code = ("import json, os, sys\n"
            "got = {'nice': os.nice(0), 'idle': os.sched_getscheduler(0) == os.SCHED_IDLE}\n"
            "try:\n    os.nice(-1); got['back'] = True\nexcept OSError:\n    got['back'] = False\n"
            "try:\n    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)); got['back'] = True\nexcept OSError:\n    pass\n"
            "os.write(int(sys.argv[1]), (json.dumps(got) + '\\n').encode())")

    async def priority(n, idle):
        p = await Proc.start([PYTHON, "-c", code], tmp_path, child_env(tmp_path, {}), 4096, nice=n, idle_sched=idle,
                             untrusted=True)
        msg = await p.next_message(30)
        await p.close()
        return msg

    low, normal = asyncio.run(priority(10, True)), asyncio.run(priority(0, False))
    # a build process: nice 10 and SCHED_IDLE, and no way back (RLIMIT_NICE 0; root's CAP_SYS_NICE aside)
    assert low["nice"] - os.nice(0) == 10 and low["idle"] and not normal["idle"] and normal["nice"] == os.nice(0)
    if os.geteuid() != 0:
        assert not low["back"]
    assert JudgeConfig().build_nice > 0 and JudgeConfig().build_sched_idle


def test_the_protocol_reader_takes_any_line_for_what_it_is(tmp_path):
    """A candidate can write anything to its protocol pipe: a line that is not a JSON object is one
    "garbage" event, JSON nested too deeply for the parser included, and the lines after it still come."""
    from kernel_env.judge.sandbox import PYTHON, Proc, child_env

    lines = ["[" * 100_000, "not json", "[1, 2]", '{"event": "hello"}']
    code = f"import os, sys\nos.write(int(sys.argv[1]), {chr(10).join(lines + [''])!r}.encode())"

    async def read():
        p = await Proc.start([PYTHON, "-c", code], tmp_path, child_env(tmp_path, {}), 4096, untrusted=True)
        got = [await p.next_message(30) for _ in range(len(lines) + 1)]
        await p.close()
        return got

    assert asyncio.run(read()) == [{"event": "garbage"}] * 3 + [{"event": "hello"}, {"event": "eof"}]


def test_a_wait_for_a_message_cancelled_as_one_arrives_ends_cancelled(tmp_path):
    """A session whose client left is cancelled while the judge waits for its candidate's next message.
    A message that arrives in the same turn of the event loop does not undo the cancel (Python 3.11's
    asyncio.wait_for returns the message and drops it: the judge went on driving a spinning candidate
    until its deadline, and the server's shutdown waited for it)."""
    from kernel_env.judge.sandbox import PYTHON, Proc, child_env

    async def main():
        p = await Proc.start([PYTHON, "-c", "import time; time.sleep(60)"], tmp_path, child_env(tmp_path, {}), 4096,
                             untrusted=True)
        got = []

        async def drive():  # the run stage's loop: the candidate's messages, one poll at a time
            while True:
                got.append(await p.next_message(1.0))

        task = asyncio.create_task(drive())
        await asyncio.sleep(0.05)
        p.messages.put_nowait({"event": "step"})  # what the protocol reader does with a line
        task.cancel()
        await asyncio.sleep(0.1)
        ended = task.cancelled()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await p.close()
        return ended

    assert asyncio.run(main())


def test_a_candidates_folder_goes_whatever_it_did_to_the_permissions_in_it(tmp_path):
    """A candidate of an unprivileged server runs as the server's user: it can chmod 000 the folders it
    made, which the judge's own user then can neither list nor empty. Here as that user: root without
    capabilities (setpriv), or the user running the tests."""
    import shutil
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("as root, only setpriv can drop the capabilities that ignore permissions")
    script = (
        "import os, sys\nfrom pathlib import Path\nfrom kernel_env.judge.sandbox import remove_folder\n"
        "top, outside = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "(top / 'a' / 'b').mkdir(parents=True); (top / 'a' / 'b' / 'f').write_text('x')\n"
        "(top / 'c').mkdir(); (top / 'c' / 'g').write_text('y'); os.symlink(outside, top / 'c' / 'out')\n"
        "for d, mode in (('a/b', 0), ('a', 0), ('c', 0o500), ('', 0)):\n    os.chmod(top / d, mode)\n"
        "remove_folder(top)\nprint('left' if os.path.lexists(top) else 'gone', oct(outside.stat().st_mode & 0o777))\n")
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o750)
    outside.chmod(0o750)
    prefix = ["setpriv", "--bounding-set=-all", "--"] if os.geteuid() == 0 else []
    out = subprocess.run(prefix + [sys.executable, "-c", script, str(tmp_path / "work"), str(outside)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["gone", "0o750"]  # all of it gone; nothing changed through the link


def test_removing_a_folder_raises_nothing_into_its_caller(tmp_path, monkeypatch, caplog):
    """rmtree's close of its folder's own descriptor raises EBADF when that descriptor was closed under
    it (ignore_errors does not cover it): the removal is tried again and logged, never raised into a
    shutdown or an evaluation's cleanup."""
    import errno
    import shutil
    from kernel_env.judge import sandbox
    work = tmp_path / "w"
    (work / "a").mkdir(parents=True)
    real, calls = shutil.rmtree, []

    def rmtree(path, *a, **kw):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.EBADF, "Bad file descriptor")
        return real(path, *a, **kw)
    monkeypatch.setattr(sandbox.shutil, "rmtree", rmtree)
    sandbox.remove_folder(work)
    assert len(calls) == 2 and not work.exists()
    assert "Bad file descriptor" in caplog.text


@slow
def test_cancelled_evaluation_leaves_nothing_behind(cache_dir):
    judge = make_judge(cache_dir, run_timeout_s=600, run_step_floor_s=600, run_first_call_s=600)

    async def go():
        try:
            t = asyncio.ensure_future(judge.evaluate("level1/1_Small_ReLU", submission("relu_hang.py")))
            await asyncio.sleep(8)  # building or spinning by now; its deadlines are minutes away
            assert not t.done()
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            # the candidate's processes are gone; the judge's reference worker and idle processes stay
            assert await asyncio.to_thread(_candidates_gone, judge=judge) == []
        finally:
            await judge.aclose()

    asyncio.run(go())
    assert _candidates_gone(keep=()) == [] and not _leftovers(judge)


def test_matmul_roofline_numbers_are_exact():
    n = 64
    a, b = torch.randn(n, n), torch.randn(n, n)
    counted, fallback = count_flops(lambda: a @ b)
    assert counted == 2 * n**3 and fallback == 0
    _, fb = count_flops(lambda: torch.relu(a))  # not in FlopCounterMode's table: one per element
    assert fb == n * n
    sol = speed_of_light(2e12, 1e9, {"float32": 1e12, "bandwidth": 1e12}, "float32")
    assert sol["t_min_ms"] == pytest.approx(2000) and sol["bound"] == "compute"
    sol = speed_of_light(1e9, 4e12, {"float32": 1e12, "bandwidth": 1e12}, "float32")
    assert sol["t_min_ms"] == pytest.approx(4000) and sol["bound"] == "memory"


@slow
def test_matmul_task_profile(cache_dir):
    prof = asyncio.run(make_judge(cache_dir).task_profile("level1/2_Small_Matmul"))
    n = 256
    assert prof["flops"] == 2 * n**3 and prof["flops_fallback"] == 0
    assert prof["bytes"] == 3 * n * n * 4
    assert prof["t_ref_ms"] > 0 and prof["t_min_ms"] > 0
    assert prof["ref_roofline_frac"] == pytest.approx(prof["t_min_ms"] / prof["t_ref_ms"])


def test_timed_processes_get_one_work_queue_and_references_are_cached_by_timing_method(tmp_path, monkeypatch):
    """Ordered timing (ordered_timing.py) needs CUDA_DEVICE_MAX_CONNECTIONS=1 in every process that
    times on a GPU, candidate and reference alike; a reference timed by another method is not reused."""
    import dataclasses
    from kernel_env import harness
    from kernel_env.judge import reference_worker
    from kernel_env.judge.reference import timing_rule

    j = make_judge(tmp_path)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in j.env(tmp_path, 0, trusted=True)  # the CPU: no queues
    j.env.cfg = dataclasses.replace(j.cfg, device="cuda")
    for trusted in (True, False):
        env = j.env(tmp_path, 0, trusted=trusted)
        assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "0"
    req = {"task_id": "level1/1_Small_ReLU", "source_sha": "0" * 16, "cache_dir": str(tmp_path), "cpu_threads": 1,
           "timing": timing_rule(j.cfg)}
    paths = {}
    for method in (harness.ORDERED_TIMING, harness.HOST_TIMING):
        monkeypatch.setattr(harness, "timing_method", lambda device, m=method: m)
        paths[method] = reference_worker._profile_path(req, "NVIDIA H200", torch.device("cuda", 0))
    assert paths[harness.ORDERED_TIMING] != paths[harness.HOST_TIMING] and harness.HOST_TIMING == "host-1"


def test_ordered_timing_says_why_it_cannot_be_had_and_the_cpu_times_with_its_clock(monkeypatch):
    import ctypes.util
    from kernel_env import harness, ordered_timing

    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS", raising=False)
    with pytest.raises(ordered_timing.Unavailable, match="CUDA_DEVICE_MAX_CONNECTIONS is not 1"):
        ordered_timing.OrderedTiming(torch.device("cuda", 0))
    if ctypes.util.find_library("cuda") is None:  # no driver here: the reason names it
        monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1")
        with pytest.raises(ordered_timing.Unavailable, match="cuCtxRecordEvent"):
            ordered_timing.OrderedTiming(torch.device("cuda", 0))
    cpu = torch.device("cpu")
    assert harness.timing_method(cpu) == "cpu"
    res = harness.time_calls(lambda: torch.relu(torch.ones(4096)), cpu, warmup=2, min_calls=10, max_calls=50,
                             budget_s=0.5, stable_rel=0.5, flusher=harness.L2Flusher(cpu, 1 << 20))
    assert res["timing"] == "cpu" and res["hold_us"] is None and res["unordered_why"] is None
    assert len(res["times_ms"]) >= 10 and res["overhead_ms"] == 0.0


def test_compare_rejects_zeros_on_tiny_outputs_and_checks_the_nonfinite_pattern():
    ref = [torch.softmax(torch.randn(8, 400_000), dim=1)]  # max ~1e-5: zeros would pass a plain atol of 1e-4
    assert compare_outputs(ref, [torch.zeros_like(ref[0])], TOL)["what"] == "values"
    assert compare_outputs(ref, [ref[0] * (1 + 1e-6)], TOL) is None
    r = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_outputs([r], [torch.tensor([1.0, 0.0, float("inf")])], TOL)["what"] == "nonfinite"
    assert compare_outputs([r], [r.clone()], TOL) is None
    assert compare_outputs([r], [r.double()], TOL)["what"] == "dtype"
    assert compare_outputs([r], [r[:2]], TOL)["what"] == "shape"
    assert compare_outputs([r], [r, r], TOL)["what"] == "count"
    h = torch.randn(100).half()
    assert compare_outputs([h], [h + 5e-3], TOL) is None  # fp16 tolerance 1e-2
    assert compare_outputs([h.float()], [h.float() + 5e-3], TOL)["what"] == "values"  # fp32: 1e-4


def test_compare_in_chunks_gives_the_verdict_of_one_piece(monkeypatch):
    # outputs are compared in chunks (bounded temporaries on 6.4 GB tensors): counts, the largest
    # error, the scale that caps atol and the worst element must not depend on the chunk size
    from kernel_env.judge import compare
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(37, 29, generator=g) * 1e-3
    got = ref + torch.randn(37, 29, generator=g) * 1e-4 * (torch.rand(37, 29, generator=g) < 0.2)
    got[36, 28] += 1.0                                     # the worst element sits in the last chunk
    nan_ref, nan_got = ref.clone(), ref.clone()
    nan_ref[0, 0] = nan_got[0, 0] = float("nan")
    nan_got[20, 3] = float("inf")
    cases = [([ref], [got], None), ([ref], [got], [50.0]), ([ref], [torch.zeros_like(ref)], None),
             ([nan_ref], [nan_got], None), ([ref.half()], [got.half()], None), ([ref], [ref.clone()], None),
             ([nan_ref], [nan_ref.clone()], None)]  # the same NaN where the reference has one: a match
    orig = compare._compare_values
    verdicts = []
    for chunk in (1, 5, 64, 1 << 24):
        monkeypatch.setattr(compare, "_compare_values", lambda *a, chunk=chunk, **k: orig(*a, chunk=chunk, **k))
        verdicts.append([compare.compare_outputs(r, o, TOL, s) for r, o, s in cases])
    assert all(v == verdicts[-1] for v in verdicts), verdicts
    whole = verdicts[-1]
    assert whole[0]["index"] == [36, 28] and whole[0]["max_abs_err"] == pytest.approx(1.0, rel=1e-3)
    assert whole[3]["what"] == "nonfinite" and whole[5] is None and whole[6] is None
    assert whole[2]["what"] == "values" and whole[4]["what"] == "values"


FUSED_CHECK = """
import math, torch
from kernel_env.judge import compare
g = torch.Generator().manual_seed(1)
r = torch.randn(5003, generator=g)
cases = {"close": r + 1e-6 * torch.randn(5003, generator=g), "off": r.clone(), "nan": r.clone(),
         "inf_got": r.clone(), "inf_ref": r.clone(), "same": r.clone()}
cases["off"][4999] += 2.0
cases["nan"][17] = math.nan
cases["inf_got"][3] = -math.inf
r_inf = r.clone(); r_inf[5000] = math.inf
for name, got in cases.items():
    for dtype in (torch.float32, torch.float16):
        ref = (r_inf if name == "inf_ref" else r).to(dtype)
        got_d = got.to(dtype)
        worst, scale, bad = compare._run_fused(ref, got_d, 1e-4, max_programs=3, block=256)
        rf, gf = ref.float(), got_d.float()
        w = (gf - rf).abs() - 1e-4 * rf.abs()
        want_bad = not (torch.isfinite(w).all() and torch.isfinite(rf).all())
        assert bool(bad) == want_bad, (name, dtype, bad)
        if not want_bad:
            assert math.isclose(worst, float(w.max()), rel_tol=1e-6, abs_tol=1e-9), (name, dtype, worst, float(w.max()))
            assert scale == float(rf.abs().max()), (name, dtype)
print("ok")
"""


def test_one_pass_comparison_leaves_nonfinite_and_near_denormal_outputs_to_the_torch_passes():
    from kernel_env.judge.compare import _fused_verdict
    assert _fused_verdict(1e-6, 2.0, 0.0) == (1e-6, 2.0)
    worst, scale = _fused_verdict(1e-6, 2.0, 1.0)  # something was not finite: the element-wise description
    assert math.isnan(worst) and math.isnan(scale)
    assert _fused_verdict(0.0, 0.0, 0.0) is None     # all zeros, or denormals a flushing kernel saw as 0
    assert _fused_verdict(1e-40, 1e-38, 0.0) is None
    # and the torch passes catch zeros in place of tiny outputs (the atol cap at 1 % of the scale)
    ref = torch.full((1000,), 1e-36)
    assert compare_outputs([ref], [torch.zeros_like(ref)], TOL)["what"] == "values"


def test_one_pass_comparison_kernel_finds_the_torch_maxima_and_every_nonfinite(tmp_path):
    # The CUDA fast path of _compare_values is one Triton kernel; here it runs under Triton's
    # interpreter on CPU tensors (several programs striding, a ragged last block, fp32 and fp16)
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", FUSED_CHECK], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kernel_env.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, **kw)


@slow
def test_cli_bad_input_is_one_line_and_nonzero(tmp_path):
    empty = tmp_path / "empty.py"
    empty.write_text("")
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\xff\xfe\x00")
    huge = tmp_path / "huge.py"
    huge.write_text("#" * (300 * 1024))
    bad_syntax = tmp_path / "syn.py"
    bad_syntax.write_text("def (:\n")
    cases = [
        ["tasks", "--kernelbench-dir", str(tmp_path / "nope")],
        ["tasks", "--levels", "4"],
        ["eval", "--task-id", "level1/999_Nope", "--code", str(empty)],
        ["eval", "--task-id", "level1/1_Small_ReLU", "--code", str(tmp_path / "missing.py")],
        ["eval", "--task-id", "level1/1_Small_ReLU", "--code", str(empty)],
        ["eval", "--task-id", "level1/1_Small_ReLU", "--code", str(binary)],
        ["eval", "--task-id", "level1/1_Small_ReLU", "--code", str(huge)],
        ["eval", "--task-id", "level1/1_Small_ReLU", "--code", str(bad_syntax)],
        ["eval", "--task-id", "../../etc/passwd", "--code", str(empty)],
    ]
    for args in cases:
        r = _cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
        assert r.stderr.startswith("kernel-env: error:")


@slow
def test_cli_eval_json_and_tasks(tmp_path):
    r = _cli("tasks", "--split", "eval", "--levels", "1")
    assert r.returncode == 0 and r.stdout.split() == ["level1/4_Small_LayerNorm"]
    wrong = tmp_path / "relu_wrong.py"
    wrong.write_text(submission("relu_wrong.py"))
    r = _cli("eval", "--task-id", "level1/1_Small_ReLU", "--code", str(wrong), "--json")
    assert r.returncode == 0, r.stderr
    import json
    v = json.loads(r.stdout)
    assert v["stage"] == "correctness" and v["correct"] is False


def _processes_mentioning(text: str) -> list[str]:
    """Processes whose command line or environment holds `text` (this user's, from /proc)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            blob = (d / "cmdline").read_bytes() + b"\0" + (d / "environ").read_bytes()
        except OSError:
            continue
        if text.encode() in blob:
            found.append(f"{d.name}: {(d / 'cmdline').read_bytes().replace(bytes(1), b' ')[:200]!r}")
    return found


@slow
def test_a_one_shot_eval_leaves_no_process_behind(tmp_path):
    """`kernel-env eval` on a fresh cache: the judge's helpers (the precompiled header's build, the
    bytecode cache's compile) are not left running once the command has answered."""
    cache = tmp_path / "fresh-cache"
    env = {**os.environ, "KERNEL_ENV_CACHE": str(cache)}
    bad = tmp_path / "no_model.py"
    bad.write_text("import torch\nclass Other: pass\n")
    r = _cli("eval", "--task-id", "level1/1_Small_ReLU", "--code", str(bad), "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["error_kind"] == "no_model_new", r.stderr
    time.sleep(0.5)
    assert not _processes_mentioning(str(cache)), _processes_mentioning(str(cache))


@slow
def test_a_build_killed_midway_leaves_nothing_behind(cache_dir):
    # a kernel source of its own (its own build folder); killed by the build timeout while compiling
    code = submission("relu_ok.py").replace('name="kernel_env_test_ops"', 'name="kernel_env_killed_build"').replace(
        "// Never returns", "// a different source: built in a folder of its own\\n// Never returns")
    judge = make_judge(cache_dir, build_timeout_s=8)
    from kernel_env.judge.builds import build_key
    ext_dir = cache_dir / "torch_extensions" / build_key(code)
    v = judge.evaluate_sync("level1/1_Small_ReLU", code)
    assert v.stage == "build" and v.error_kind == "build_timeout", v.feedback
    # it compiled in its build process's own folder, removed with the process: nothing of it reached
    # the cache (a half build, torch's lock) for the next build of the same source to trip on
    assert not list(ext_dir.glob("*"))
    assert not list((cache_dir / "torch_extensions").glob("*/*/lock"))
    assert _candidates_gone(keep=()) == [] and not _leftovers(judge)


def test_build_folder_follows_the_kernel_source_not_the_python_around_it():
    from kernel_env.judge.builds import build_key
    ok = submission("relu_ok.py")
    assert build_key(ok) == build_key(submission("relu_wrong.py")) == build_key(submission("tanh_ok.py"))
    assert build_key('"""another docstring"""\n' + ok) == build_key(ok)
    assert build_key(ok.replace("out[i] = in[i] > 0.0f", "out[i] = in[i] >= 0.0f")) != build_key(ok)


def test_a_finished_build_moves_into_the_cache_without_changing_a_file_there(tmp_path):
    """What a build process built in its own folder moves into the source's build folder; modules of
    calls the folder already has stay as they are (a run process may be reading them)."""
    import json
    from kernel_env.candidate.fast_build import BUILT_MANIFEST
    from kernel_env.judge.builds import publish_build

    def staged(keys, name="ext"):  # a build process's torch_extensions folder
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        (root / name).mkdir()
        for k in keys:
            (root / name / f"{name}.so").write_text(f"module {k}")  # torch names every build of `name` alike
        (root / name / BUILT_MANIFEST).write_text(json.dumps({k: {"module": name, "file": f"{name}.so"} for k in keys}))
        return root

    def manifest(folder):
        return json.loads((folder / BUILT_MANIFEST).read_text())

    ext = tmp_path / "cache" / "source1"
    first = staged(["a"])
    (first / "ext" / BUILT_MANIFEST).write_text(json.dumps({"a": {"module": "ext", "file": "ext.so"},
                                                            "z": {"module": "ext", "file": "/etc/passwd"}}))
    publish_build(first, ext)
    assert manifest(ext / "ext") == {"a": {"module": "ext", "file": "ext.so"}}  # only what was checked
    publish_build(staged(["a"]), ext)  # the same source built twice at once: the first stays
    publish_build(staged(["b"]), ext)  # another call (flags, header): its module moves in under a name of its own
    m = manifest(ext / "ext")
    assert (ext / "ext" / "ext.so").read_text() == "module a" and m["a"]["file"] == "ext.so"
    assert m["b"]["file"] != "ext.so" and (ext / "ext" / m["b"]["file"]).read_text() == "module b"
    assert sorted(p.name for p in (ext / "ext").iterdir()) == sorted(["ext.so", m["b"]["file"], BUILT_MANIFEST])

    # the manifest is a claim of the candidate: a module outside its folder, a symlink, a huge manifest,
    # a symlinked extension folder do not move
    (tmp_path / "outside.so").write_text("elsewhere")
    odd = Path(tempfile.mkdtemp(dir=tmp_path))
    for name, file in (("up", "../outside.so"), ("link", "link.so"), ("huge", "huge.so")):
        (odd / name).mkdir()
        (odd / name / BUILT_MANIFEST).write_text(json.dumps({"k": {"module": name, "file": file}}))
    (odd / "link" / "link.so").symlink_to(tmp_path / "outside.so")
    (odd / "huge" / "huge.so").write_text("x")
    (odd / "huge" / BUILT_MANIFEST).write_text(json.dumps({"k": {"module": "huge", "file": "huge.so"}, "pad": "x" * (2 << 20)}))
    (odd / "deep").mkdir()
    (odd / "deep" / "deep.so").write_text("x")
    (odd / "deep" / BUILT_MANIFEST).write_text('{"k": {"module": "deep", "file": "deep.so"}, "pad": ' + "[" * 100_000)
    (odd / "linked_folder").symlink_to(staged(["c"]) / "ext", target_is_directory=True)
    publish_build(odd, ext)
    assert sorted(p.name for p in ext.iterdir()) == ["ext"]


def test_a_published_build_is_loaded_only_while_every_module_has_its_recorded_hash(tmp_path):
    """The one check the judge (before skipping a build) and the run process (before loading from the
    cache) both make: every module a manifest names, read as fast_build reads it, has the hash recorded
    at publish."""
    import json
    from kernel_env.candidate.fast_build import BUILT_MANIFEST
    from kernel_env.judge.builds import intact, publish_build
    from kernel_env.published_builds import intact as shared_intact

    ext = tmp_path / "cache" / "source1"
    assert shared_intact(ext, if_absent=True) and not intact(ext)  # nothing published: the judge builds
    staged = tmp_path / "staged"
    (staged / "ext").mkdir(parents=True)
    (staged / "ext" / "ext.so").write_text("module a")
    (staged / "ext" / BUILT_MANIFEST).write_text(json.dumps({"a": {"module": "ext", "file": "ext.so"}}))
    publish_build(staged, ext)
    assert intact(ext) and shared_intact(ext, if_absent=True)

    module, manifest = ext / "ext" / "ext.so", ext / "ext" / BUILT_MANIFEST
    module.write_text("module a, changed")
    assert not intact(ext) and not shared_intact(ext, if_absent=True)
    module.write_text("module a")
    assert intact(ext)
    (ext / "ext" / "other.so").write_text("never published")  # a manifest naming a file with no record
    manifest.write_text(json.dumps({"a": {"module": "ext", "file": "ext.so"}, "b": {"module": "ext", "file": "other.so"}}))
    assert not intact(ext)
    manifest.write_text("{not json")  # a manifest fast_build could not read whole either
    assert not intact(ext)
    manifest.unlink()
    manifest.symlink_to(tmp_path / "staged" / "ext" / BUILT_MANIFEST)
    assert not intact(ext)
    manifest.unlink()  # an extension folder without a manifest names no module
    assert intact(ext)


@slow
def test_a_fresh_judge_loads_an_earlier_build_instead_of_compiling(cache_dir):
    code = submission("relu_ok.py")
    first = make_judge(cache_dir).evaluate_sync("level1/1_Small_ReLU", code)  # built here or by an earlier test
    again = make_judge(cache_dir).evaluate_sync("level1/1_Small_ReLU", code)  # remembers nothing
    assert first.correct and again.correct, (first.feedback, again.feedback)
    assert again.details.get("build_reused") == 1 and "build_cached" not in again.details


@slow
def test_samples_that_share_a_kernel_compile_it_once(cache_dir):
    # A step's samples often share a kernel and differ in their Python. Submitted at once, the first
    # compiles it; the others wait for its build folder, then load what it published.
    tag = os.urandom(6).hex()  # a kernel no earlier evaluation built
    kernel = (f'cpp = "#include <torch/extension.h>\\n// {tag}: a kernel built once\\n'
              f'torch::Tensor relu(torch::Tensor x) {{ x = x.contiguous(); auto y = torch::empty_like(x); '
              f'const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>(); '
              f'for (int64_t i = 0; i < x.numel(); ++i) q[i] = p[i] > 0 ? p[i] : 0; return y; }}"\n'
              f'ext = load_inline(name="relu_{tag}", cpp_sources=cpp, functions=["relu"])\n')
    head = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
    model = "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x){}\n"
    a, b = head + kernel + model.format(""), head + kernel + model.format("  # the same kernel, other Python")
    judge = make_judge(cache_dir, run_timeout_s=600, run_step_floor_s=600, run_first_call_s=600)

    async def main():
        try:
            return await asyncio.gather(*(judge.evaluate("level1/1_Small_ReLU", c) for c in (a, b, a)))
        finally:
            await judge.aclose()

    vs = asyncio.run(main())
    assert all(v.correct for v in vs), [v.feedback for v in vs]

    def how(v):
        return "cached" if v.details.get("build_cached") else "loaded" if v.details.get("build_reused") == 1 else "compiled"
    # whichever got the folder first compiled; the other text loaded its build; the same text again
    # needed no build process at all
    assert sorted(how(v) for v in vs) == ["cached", "compiled", "loaded"], [(how(v), v.timings) for v in vs]
    assert judge.stats()["builds"] == 2  # build processes: the compile and the load


@slow
def test_builds_with_the_same_binding_file_compile_it_once(cache_dir):
    # Two calls that differ only in what main.cpp does not see (here the link flags; a CUDA submission's
    # .cu): the second compile process links the binding object the judge published after the first,
    # read from the judge's cache inside its sandbox.
    tag = os.urandom(6).hex()
    def code(ldflag):
        return ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
                f'cpp = "#include <torch/extension.h>\\n// {tag}: one binding file\\n'
                'torch::Tensor relu(torch::Tensor x) { x = x.contiguous(); auto y = torch::empty_like(x); '
                'const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>(); '
                'for (int64_t i = 0; i < x.numel(); ++i) q[i] = p[i] > 0 ? p[i] : 0; return y; }"\n'
                f'ext = load_inline(name="relu_{tag}", cpp_sources=cpp, functions=["relu"], extra_ldflags=["{ldflag}"])\n'
                "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n")
    judge = make_judge(cache_dir)
    first = judge.evaluate_sync("level1/1_Small_ReLU", code("-lm"))
    second = judge.evaluate_sync("level1/1_Small_ReLU", code("-ldl"))
    stats = judge.stats()
    assert first.correct and second.correct, (first.feedback, second.feedback)
    assert stats["binding_objects_published"] == 1 and stats["binding_objects_reused"] == 1, stats
    assert first.timings["build_s"] > second.timings["build_s"], (first.timings, second.timings)


@slow
def test_a_stalled_event_loop_does_not_void_an_honest_timing(cache_dir):
    # Under load the judge's event loop can stand still longer than a timing lasts; the run process's
    # "outputs" and "timed" are then read together, as if the timing took no wall time. On the H200
    # (docs/log/performance.md) an honest Triton ReLU was discarded that way, 1 of 60.
    judge = make_judge(cache_dir)

    async def main():
        done = asyncio.Event()

        async def staller():
            while not done.is_set():
                time.sleep(1.0)  # blocks the whole loop, as a busy server does
                await asyncio.sleep(0.2)

        t = asyncio.ensure_future(staller())
        try:
            return await judge.evaluate("level1/1_Small_ReLU", submission("relu_ok.py"))
        finally:
            done.set()
            await t
            await judge.aclose()

    for _ in range(2):  # a stall covers both messages in most runs, not all
        v = asyncio.run(main())
        assert v.stage == "timed" and v.correct, (v.feedback, v.details)


@slow
def test_a_quiet_gpu_gets_the_longer_warm_up_and_it_reaches_the_timing(cache_dir, monkeypatch):
    # no call or budget cap before the wall-time rule: a tiny CPU kernel makes 500 calls in well under 1 s
    judge = make_judge(cache_dir, max_timed_calls=10 ** 6, timing_budget_s=60.0)
    # the rule: only on a GPU, and only while no other evaluation waits for that device
    monkeypatch.setattr(judge.cfg, "device", "cuda")
    judge.slots.pending[0] = 1
    assert judge._quiet_timing(0) == {"warmup_s": judge.cfg.quiet_warmup_s, "min_wall_s": judge.cfg.quiet_min_wall_s}
    judge.slots.pending[0] = 2
    assert judge._quiet_timing(0) is None
    monkeypatch.setattr(judge.cfg, "device", "cpu")
    judge.slots.pending[0] = 0
    # the change travels with "go" and the run process times by it (here: at least 1 s of calls)
    monkeypatch.setattr(judge, "_quiet_timing", lambda gpu: {"warmup_s": 0.0, "min_wall_s": 1.0})
    v = judge.evaluate_sync("level1/1_Small_ReLU", submission("relu_ok.py"))
    assert v.correct and v.details["quiet_timing"]["min_wall_s"] == 1.0, v.feedback
    assert v.details["run_phases"]["timing_s"] >= 1.0


@slow
def test_a_starting_run_process_does_its_gpu_work_only_outside_a_candidates_run(cache_dir):
    from kernel_env.judge.pools import discard
    judge = make_judge(cache_dir)

    async def main():
        judge.slots.gate[0]["timing"] = 1  # a candidate is being run and timed on the device
        p = await judge.pools.start_idle(("run", 0))
        try:
            t0 = time.monotonic()
            while not getattr(p, "imported", False) and not p.warmed.done() and time.monotonic() - t0 < 60:
                await asyncio.sleep(0.2)  # it imports torch, then asks for its warm window
            await asyncio.sleep(1.0)
            held = getattr(p, "imported", False) and not p.warmed.done() and judge.slots.gate[0]["warming"] == 0
            judge.slots.gate[0]["timing"] = 0
            msg = await asyncio.wait_for(p.warmed, 60)
            return held, msg
        finally:
            await discard(p)
            await judge.aclose()

    held, msg = asyncio.run(main())
    assert held and msg["event"] == "warmed"


@slow
def test_the_reference_worker_checks_the_trials_before_the_timing_and_compare_does_the_rest(tmp_path):
    """The reference worker's "check" (the trials, while the candidate waits to be timed) and "compare"
    (after it exited), called in this process as the worker would: checked rows are not checked again,
    wrong outputs are a mismatch at once, and after the problem file changed nothing is checked early
    and compare reports it."""
    import hashlib
    from kernel_env import harness
    from kernel_env.judge import reference_worker as rw
    task = tmp_path / "relu.py"
    task.write_text((ROOT / "kernel_env/data/small_tasks/level1/1_Small_ReLU.py").read_text())
    dev, seeds = torch.device("cpu"), [11, 12, 13, 14, 15]
    req = {"device": "cpu", "cache_dir": str(tmp_path / "cache"), "cpu_threads": 1, "l2_flush_bytes": 1 << 20,
           "timing": {"warmup": 1, "warmup_s": 0.0, "min_calls": 3, "max_calls": 5, "budget_s": 0.05,
                      "stable_rel": 0.5}, "tolerance": TOL, "task_id": "t/relu", "task_path": str(task),
           "source_sha": hashlib.sha256(task.read_bytes()).hexdigest()[:16], "seeds": seeds, "init_seed": 7,
           "timing_sets": 2}
    name = rw.device_name(dev)
    peaks = rw.get_peaks(tmp_path / "cache", dev, name)
    task_mod = harness.load_module(task, "test_relu_task")
    model = harness.make_model(task_mod.Model, task_mod, 7, dev)

    def evaluation(k):  # prepare, and a candidate's side: the slots mapped, rows filled with the reference's outputs
        held, slot_dir = {}, tmp_path / f"slots{k}"
        slot_dir.mkdir()
        prep = rw.handle("prepare", {**req, "slot_dir": str(slot_dir), **rows}, req, dev, name, peaks, held)
        slots = harness.open_slots(prep["slots"], dev)
        k = prep["trial_rows"]
        assert len(slots) == k + 2

        def fill(row, wrong=False, salt=None):  # row: a trial, or len(seeds) + a timing set
            seed = seeds[row if row < len(seeds) else row - len(seeds)]
            args = harness.make_inputs(task_mod, seed, dev, prep["dists"][row] if row < len(seeds) else "normal")
            if salt:
                args = harness.perturb_inputs(args, salt)
            out = [o + 1 if wrong else o for o in harness.flatten_outputs(harness.call(model, args, seed))]
            at = row % k if row < len(seeds) else k + row - len(seeds)
            return [{**h, "salt": salt} if salt else h for h in harness.fill_slots(slots[at], out)]
        return held, fill

    def ask(mode, held, **more):
        return rw.handle(mode, {**req, **more}, req, dev, name, peaks, held)

    rows = {}
    held, fill = evaluation(0)
    trials = [fill(i) for i in range(5)]
    got = ask("check", held, trials=trials)
    assert got["rows"] == 5 and got["passed"] == 5 and got["mismatch"] is None and got["phases"]["forward_s"] > 0
    rechecks = [fill(5 + j, salt=3 + j) for j in range(2)]
    res = ask("compare", held, trials=trials, rechecks=rechecks)
    assert res["compare"]["mismatch"] is None and res["compare"]["passed"] == 5
    assert res["phases"]["forward_s"] > 0  # the rechecks

    held, fill = evaluation(1)
    trials = [fill(i, wrong=i == 2) for i in range(5)]
    got = ask("check", held, trials=trials)
    assert got["rows"] == 2 and got["passed"] == 2 and got["mismatch"]["trial"] == 2
    assert "outside tolerance" in got["mismatch"]["message"]

    held, fill = evaluation(2)
    trials = [fill(i) for i in range(5)]
    task.write_text(task.read_text() + "\n# edited while the candidate ran\n")
    got = ask("check", held, trials=trials)
    assert got["rows"] == 0 and got["deferred"]
    res = ask("compare", held, trials=trials, rechecks=[])
    assert res["compare"]["mismatch"]["what"] == "tampered"

    # two trial slots for five trials (a multi-GB task on a smaller card): each batch is checked before
    # its slots take the next trials, and compare checks only the rechecks
    rows = {"trial_rows": 2}
    task.write_text((ROOT / "kernel_env/data/small_tasks/level1/1_Small_ReLU.py").read_text())
    held, fill = evaluation(3)
    passed = 0
    for first in (0, 2, 4):
        batch = [fill(i) for i in range(first, min(first + 2, 5))]
        got = ask("check", held, trials=batch, first=first)
        assert got["mismatch"] is None and got["rows"] == min(first + 2, 5)
        passed += got["passed"]
    assert passed == 5
    rechecks = [fill(5 + j, salt=3 + j) for j in range(2)]
    res = ask("compare", held, trials=[], rechecks=rechecks)
    assert res["compare"]["mismatch"] is None and res["compare"]["passed"] == 5
    # a wrong trial in a later batch, in a slot an earlier trial used: caught as that trial
    held, fill = evaluation(4)
    got = ask("check", held, trials=[fill(0), fill(1)], first=0)
    assert got["mismatch"] is None
    got = ask("check", held, trials=[fill(2), fill(3, wrong=True)], first=2)
    assert got["mismatch"]["trial"] == 3 and got["rows"] == 3


def test_a_prepare_beside_the_end_of_another_evaluation_waits_rather_than_time_or_shrink(tmp_path, monkeypatch):
    """The reference worker's "prepare" marked "beside" (the evaluation before it on the device has not
    ended) answers "wait" when it would time the reference for a profile not made yet, make fewer
    slots than once the other evaluations' slots are given back, or make slots that do not fit the
    device's free memory now (trial_rows fixed); else it makes the slots as usual, and each evaluation
    keeps its own."""
    import hashlib
    from kernel_env.judge import reference_worker as rw
    task = tmp_path / "relu.py"
    task.write_text((ROOT / "kernel_env/data/small_tasks/level1/1_Small_ReLU.py").read_text())
    dev = torch.device("cpu")
    req = {"device": "cpu", "cache_dir": str(tmp_path / "cache"), "cpu_threads": 1, "l2_flush_bytes": 1 << 20,
           "timing": {"warmup": 1, "warmup_s": 0.0, "min_calls": 3, "max_calls": 5, "budget_s": 0.05,
                      "stable_rel": 0.5}, "tolerance": TOL, "task_id": "t/relu", "task_path": str(task),
           "source_sha": hashlib.sha256(task.read_bytes()).hexdigest()[:16], "seeds": [1, 2, 3, 4, 5],
           "init_seed": 7, "timing_sets": 2}
    name = rw.device_name(dev)
    peaks = rw.get_peaks(tmp_path / "cache", dev, name)

    def prepare(held, k, others=0, **more):
        (tmp_path / f"slots{k}").mkdir(exist_ok=True)
        return rw.handle("prepare", {**req, "slot_dir": str(tmp_path / f"slots{k}"), **more}, req, dev, name,
                         peaks, held, others)
    first, second, third = {}, {}, {}
    assert prepare(first, 1, beside=True) == {"ok": True, "task_id": "t/relu", "wait": "profile"}
    assert first == {} and not (tmp_path / "cache" / "profiles").exists()  # nothing timed, nothing made
    made = prepare(first, 1)  # after the evaluation before it: the profile is timed
    assert made["trial_rows"] == 5 and len(made["slots"]) == 7
    beside = prepare(second, 2, beside=True)  # the profile is known now: slots of its own, beside the first's
    assert beside["trial_rows"] == 5 and beside["slots"] != made["slots"] and len(first["slots"]) == 7
    # a device (its memory readings stood in for) where the slots held by another evaluation make the
    # difference between three trial slots and five
    real_slot_plan = rw.slot_plan
    monkeypatch.setattr(rw, "device_free", lambda device: 10)
    monkeypatch.setattr(rw, "plan_bytes", lambda prof, k, sets: 2 * (k + sets))
    monkeypatch.setattr(rw, "slot_plan", lambda req, prof, device, free: (5, 2) if free >= 20 else (3, 2))
    assert prepare(third, 3, others=16, beside=True)["wait"] == "memory" and "slots" not in third
    assert prepare(third, 3, others=4, beside=True)["trial_rows"] == 3  # three either way: no wait
    assert prepare(third, 3)["trial_rows"] == 3  # after it: the slots that fit
    # trial_rows fixed by the judge's config: the same plan either way, but it does not fit beside
    monkeypatch.setattr(rw, "slot_plan", real_slot_plan)
    fourth = {}
    assert prepare(fourth, 4, others=16, beside=True, trial_rows=5)["wait"] == "memory" and "slots" not in fourth
    assert prepare(fourth, 4, others=16, trial_rows=5)["trial_rows"] == 5  # after it: as configured


@slow
def test_a_reference_worker_that_holds_too_much_ends_after_the_evaluations_it_serves(cache_dir):
    """A worker retired (it kept more memory than it may) serves no new evaluation, and ends only once
    the last one it serves is done: never under an evaluation still using it."""
    from kernel_env.judge.reference import common_request
    judge = make_judge(cache_dir)
    refs = judge.references

    async def main():
        try:
            req = common_request(judge.cfg)
            a = await refs.hold(0, req)
            b = await refs.hold(0, req)  # a second evaluation beside the first
            assert a is b
            refs.retire(0, a)
            fresh = await refs.get(0, req)  # the next evaluations get a worker of their own
            assert fresh is not a
            await refs.done_with(0, a)
            alive_with_one = a.returncode is None
            ok = (await refs.ask(a, {"mode": "release", "device": "cpu", "eval": "x"}))["ok"]
            await refs.done_with(0, b)
            counts = judge.stats()["reference_workers_started"], judge.stats()["reference_workers_retired"]
            return alive_with_one, ok, a.returncode is not None, fresh.returncode is None, counts
        finally:
            await judge.aclose()
    assert asyncio.run(main()) == (True, True, True, True, (2, 1))


def test_slots_and_timing_sets_shrink_to_the_devices_free_memory(monkeypatch):
    """reference_worker.slot_plan on a GPU (its memory readings stood in for: this box has none): all
    five trial slots and two timing sets while they fit, then fewer trial slots, then one timing set;
    the judge's trial_rows overrides it. Sizes are KernelBench's: a ReLU of 6 GiB in and out, an L1
    norm of 8 GiB."""
    from kernel_env.judge import reference_worker as rw
    gib = 1 << 30
    free = {"bytes": 0}
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free["bytes"], 80 * gib))
    cuda = torch.device("cuda", 0)

    def plan(side_gib, free_gib, **req):
        free["bytes"] = free_gib * gib
        prof = {"outputs": [{"dtype": "float32", "shape": [side_gib, gib // 4]}], "bytes": 2 * side_gib * gib}
        return rw.slot_plan({"seeds": [1, 2, 3, 4, 5], "timing_sets": 2, **req}, prof, cuda, rw.device_free(cuda))

    assert plan(1, 70) == (5, 2)       # a small task: every trial its own slot
    assert plan(6, 130) == (5, 2)      # ReLU on an H200
    assert plan(6, 70) == (3, 2)       # ReLU on an H100 with 16 idle run processes
    assert plan(8, 75) == (1, 2)       # the L1 norm: one trial slot
    assert plan(8, 70) == (1, 1)       # ... and one timing set
    assert plan(8, 70, trial_rows=2) == (2, 2)  # fixed by the judge's config
    relu = {"outputs": [{"dtype": "float32", "shape": [6, gib // 4]}], "bytes": 12 * gib}
    assert rw.plan_bytes(relu, 3, 2) <= 70 * gib < rw.plan_bytes(relu, 4, 2)  # what slot_plan sized above
    assert rw.slot_plan({"seeds": [1, 2, 3], "timing_sets": 2}, {"outputs": [], "bytes": 0},
                        torch.device("cpu"), None) == (3, 2)


@slow
def test_candidate_processes_load_torch_compiled_by_the_judge_and_cannot_write_it(cache_dir, tmp_path):
    """A trusted process compiles what candidate processes import into the cache, once (its bytecode:
    judge/bytecode_cache.py); candidates load it from there instead of compiling torch's sources."""
    import importlib.util
    from kernel_env.judge import bytecode_cache
    from kernel_env.judge.sandbox import PYTHON
    judge = make_judge(cache_dir)
    asyncio.run(judge._bytecode.ready())
    folder = judge._bytecode.dir
    assert folder == bytecode_cache.cache_folder(cache_dir) and list(folder.glob("ready-*"))
    prefix = sys.pycache_prefix
    try:
        sys.pycache_prefix = str(folder)
        compiled = importlib.util.cache_from_source(torch.__file__)
    finally:
        sys.pycache_prefix = prefix
    assert Path(compiled).is_file() and Path(compiled).is_relative_to(folder)
    # a candidate process (the judge's sandbox and environment) loads it, and cannot plant a file there
    work = Path(judge.work_root) / "probe"
    work.mkdir()
    code = ("import torch, sys, pathlib\ntry:\n    pathlib.Path(sys.argv[1], 'planted.pyc').write_text('x')\n"
            "except OSError as e:\n    print('refused', type(e).__name__)")
    argv, env = asyncio.run(judge.pools.candidate_command("build", [PYTHON, "-v", "-c", code, str(folder)], work, 0,
                                                     tmp_path, tmp_path, None))
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert f"code object from '{compiled}'" in r.stderr, r.stderr[-3000:]
    assert "refused" in r.stdout and not (folder / "planted.pyc").exists(), r.stdout
    # a judge started again finds the folder filled: no process
    again = make_judge(cache_dir)
    assert again._bytecode._proc is None
    asyncio.run(judge.aclose())
    asyncio.run(again.aclose())


def test_a_large_build_is_published_while_other_sessions_go_on(tmp_path):
    """Publishing hashes every module it moves. A module of a GiB (an .incbin of a large library makes
    one) is hashed in a thread: the event loop, and every other session's messages, go on meanwhile."""
    import asyncio
    import json
    import time
    from kernel_env.candidate.fast_build import BUILT_MANIFEST
    from kernel_env.judge.builds import Builds

    staged = tmp_path / "staged"
    (staged / "ext").mkdir(parents=True)
    with open(staged / "ext" / "ext.so", "wb") as f:
        f.truncate(1 << 30)  # sparse: a GiB to read, no disk
    (staged / "ext" / BUILT_MANIFEST).write_text(json.dumps({"a": {"module": "ext", "file": "ext.so"}}))
    ext = tmp_path / "cache" / "source1"

    async def go():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1
        t = asyncio.ensure_future(ticker())
        t0 = time.monotonic()
        await Builds(JudgeConfig(device="cpu"), None, {}).publish(staged, ext)
        took = time.monotonic() - t0
        t.cancel()
        return ticks, took

    ticks, took = asyncio.run(go())
    assert (ext / "ext" / "ext.so").stat().st_size == 1 << 30
    assert took > 0.1 and ticks >= 10, (ticks, took)
