"""The device slot: how long it stood free before its holder took it, the shorter warm-up of a slot
taken right after another one, the warm-up's own numbers, and the judge's clock of the slot."""
import asyncio
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernel_env import harness
from kernel_env.judge import Judge, JudgeConfig, deadlines
from kernel_env.judge.deadlines import process_tree
from kernel_env.judge.devices import DeviceSlots
from kernel_env.judge.reference import timing_rule

from conftest import submission


def test_a_slot_knows_how_long_the_device_stood_free_before_it():
    async def go():
        slots = DeviceSlots((0,))
        async with slots.slot(0):
            first = slots.free_before_s[0]
        async with slots.slot(0):  # right after
            second = slots.free_before_s[0]
        await asyncio.sleep(0.2)
        async with slots.slot(0):
            third = slots.free_before_s[0]
        return first, second, third
    first, second, third = asyncio.run(go())
    assert first == float("inf")  # the device never held a slot before
    assert 0 <= second < 0.05
    assert third >= 0.2


def test_the_timing_waits_for_run_processes_already_warming_up():
    async def go():
        slots = DeviceSlots((0,))
        release = asyncio.Event()

        async def warmer():  # began before the slot: a run process making its CUDA context
            async with slots.warm_window(0):
                await release.wait()
        task = asyncio.create_task(warmer())
        await asyncio.sleep(0.01)
        async with slots.timing_window(0, 0.0):       # under load the slot itself does not wait
            late = asyncio.create_task(warmer())       # none begins inside the timing window
            asyncio.get_running_loop().call_later(0.2, release.set)
            waited = await slots.warmers_done(0, 5.0)  # the timing does, for the one under way
            started_late = slots.gate[0]["warming"]
            capped = None
            release.clear()
            blocker = asyncio.create_task(warmer())
        await asyncio.sleep(0.05)  # outside the window the late one warms, then the next one
        async with slots.timing_window(0, 0.0):
            capped = await slots.warmers_done(0, 0.1)  # one that never ends: waited for no longer than asked
        release.set()
        await asyncio.gather(task, late, blocker)
        return waited, started_late, capped
    waited, started_late, capped = asyncio.run(go())
    assert 0.15 <= waited < 1.0
    assert started_late == 0
    assert 0.1 <= capped < 0.5


def test_a_warm_up_beside_a_warming_process_it_cannot_stop_does_not_stop_on_steady_calls():
    async def go(busy, warming_s):
        cfg = JudgeConfig(device="cuda", timing_warm_wait_s=0.1)
        slots = DeviceSlots((0,))
        judge = SimpleNamespace(cfg=cfg, slots=slots)

        async def warmer():  # no processes known for its step: it cannot be stopped
            async with slots.warm_window(0):
                await asyncio.sleep(warming_s)
        task = asyncio.create_task(warmer())
        await asyncio.sleep(0.01)
        t = time.monotonic()
        change = await Judge._before_timing(judge, 0, busy)
        waited = time.monotonic() - t
        await task
        return change, waited
    steady = {"warmup_s": 0.2, "warmup_steady_rel": 0.005}
    change, waited = asyncio.run(go(steady, 1.0))  # still warming after the wait: the whole warm-up
    assert change == {"warmup_steady_rel": 0.0} and 0.09 <= waited < 0.5
    change, waited = asyncio.run(go(steady, 0.03))  # done within the wait: steady calls may end it
    assert change == {} and waited < 0.09
    assert asyncio.run(go(None, 0.3))[0] == {}      # not a busy slot: its rule has no steady stop


def _states(pids) -> dict:
    return {pid: deadlines._stat(str(pid)).state for pid in pids}


@asynccontextmanager
async def _step_under_way(slots: DeviceSlots, pids: dict):
    """A run process's warm-up step under way on device 0 (its processes `pids`) while the block runs."""
    step = asyncio.Event()

    async def warmer():
        async with slots.warm_window(0, pids):
            await step.wait()
    task = asyncio.create_task(warmer())
    await asyncio.sleep(0.01)
    try:
        yield
    finally:
        step.set()
        await task


def test_a_run_process_at_a_warm_up_step_is_stopped_for_the_timing_and_resumed_after_it():
    """A warm-up step still under way when a candidate's timing begins: its processes (here a real one
    and its child) are stopped until the candidate's run ends, then go on; the warm-up may then stop
    on steady calls. With stop_warmers off, the whole warm-up instead."""
    # a parent and its child that keep counting: each writes a line every 10 ms
    code = ("import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time\\nwhile True: time.sleep(0.01)'])\n"
            "while True:\n    print(time.time(), flush=True); time.sleep(0.01)\n")

    async def go(stop):
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
        try:
            t0 = time.monotonic()
            while len(process_tree(proc.pid)) < 2 and time.monotonic() - t0 < 10:
                await asyncio.sleep(0.02)
            tree = process_tree(proc.pid)
            cfg = JudgeConfig(device="cuda", stop_warmers=stop)
            slots = DeviceSlots((0,))
            judge = SimpleNamespace(cfg=cfg, slots=slots)
            async with _step_under_way(slots, tree):
                async with slots.timing_window(0, 0.0):
                    change = await Judge._before_timing(judge, 0, {"warmup_s": 0.2, "warmup_steady_rel": 0.005})
                    await asyncio.sleep(0.1)
                    inside = _states(tree)
                await asyncio.sleep(0.1)
                after = _states(tree)
            return change, inside, after, slots.warmers_stopped
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    change, inside, after, stopped = asyncio.run(go(True))
    assert change == {} and stopped == 1
    assert set(inside.values()) == {"T"}, inside      # every process of the step stopped
    assert "T" not in after.values(), after           # and going on once the run ended
    change, inside, after, stopped = asyncio.run(go(False))
    assert change == {"warmup_steady_rel": 0.0} and stopped == 0
    assert "T" not in inside.values(), inside


@pytest.mark.parametrize("mode", ["bwrap", "unshare"])
def test_a_sandboxed_run_process_is_stopped_and_continued_through_its_sandbox(mode, tmp_path):
    """The same through each sandbox (a PID namespace whose first process the judge signals from
    outside): every process of the step stops, and nothing it writes moves until it is continued."""
    from kernel_env.judge.sandbox import child_env, isolation, wrap
    try:
        isolation(mode)
    except RuntimeError:
        pytest.skip(f"{mode} does not work on this machine")
    work = tmp_path / "w"
    work.mkdir()
    # the count is replaced whole (os.replace): a read between a truncate and its write would see no count
    code = ("import os, time\nn = 0\nwhile True:\n    n += 1; open('count.new', 'w').write(str(n)); "
            "os.replace('count.new', 'count'); time.sleep(0.005)\n")
    proc = subprocess.Popen(wrap(mode, [sys.executable, "-c", code], work, []), env=child_env(work, {}),
                            cwd=work, start_new_session=True)
    count = lambda: int((work / "count").read_text())  # noqa: E731
    try:
        t0 = time.monotonic()
        while not (work / "count").exists() and time.monotonic() - t0 < 30:
            time.sleep(0.05)
        tree = process_tree(proc.pid)
        assert len(tree) >= 2, tree  # the wrapper and what runs inside it
        slots = DeviceSlots((0,))

        async def go():
            async with _step_under_way(slots, tree):
                async with slots.timing_window(0, 0.0):
                    assert slots.stop_warmers(0)
                    await asyncio.sleep(0.1)
                    states, before = _states(tree), count()
                    await asyncio.sleep(0.3)
                    frozen = count() == before
                await asyncio.sleep(0.3)
                moved = count() > before
            return states, frozen, moved
        states, frozen, moved = asyncio.run(go())
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert set(states.values()) == {"T"}, states
    assert frozen and moved


def test_busy_warmup_only_right_after_another_slot_on_a_gpu():
    def busy(free_before_s, **kw):
        cfg = JudgeConfig(**{"device": "cuda", **kw})
        slots = DeviceSlots((0,))
        slots.free_before_s[0] = free_before_s
        return Judge._busy_timing(SimpleNamespace(cfg=cfg, slots=slots), 0)

    steady = JudgeConfig().busy_warmup_steady_rel
    assert steady > 0                                     # by default it ends once the calls are steady
    assert busy(0.01) == {"warmup_s": 0.2, "warmup_steady_rel": steady}
    assert busy(0.01, busy_warmup_s=0.05) == {"warmup_s": 0.05, "warmup_steady_rel": steady}
    assert busy(0.01, busy_warmup_s=0.0, busy_warmup_steady_rel=0.0) == {"warmup_s": 0.0, "warmup_steady_rel": 0.0}
    assert busy(5.0, busy_warmup_s=0.05) is None          # the GPU idled in between: the full warm-up
    assert busy(5.0) is None
    assert busy(0.01, busy_warmup_steady_rel=0.0) is None  # neither shorter nor steady: the full warm-up
    assert busy(0.01, busy_warmup_s=1.0) == {"warmup_s": 0.2, "warmup_steady_rel": steady}  # never longer
    assert busy(0.01, device="cpu") is None               # the CPU device has no clocks to keep up


def test_time_calls_reports_its_warmup():
    dev = torch.device("cpu")
    flusher = harness.L2Flusher(dev, 1 << 16)
    res = harness.time_calls(lambda: time.sleep(0.002), dev, warmup=3, min_calls=5, max_calls=500, budget_s=1.0,
                             stable_rel=0.5, flusher=flusher, warmup_s=0.05)
    assert res["warmup_calls"] >= 3 and res["warmup_s"] >= 0.05
    res = harness.time_calls(lambda: torch.ones(64).sum(), dev, warmup=3, min_calls=5, max_calls=50, budget_s=1.0,
                             stable_rel=0.5, flusher=flusher, warmup_s=0.0)
    assert res["warmup_calls"] == 3  # no time floor: the calls alone


def test_a_steady_warmup_ends_before_its_time_floor():
    dev = torch.device("cpu")
    flusher = harness.L2Flusher(dev, 1 << 16)
    kw = dict(warmup=3, min_calls=5, max_calls=500, budget_s=1.0, stable_rel=0.5, flusher=flusher, warmup_s=0.5)
    # calls of 5 ms that agree within 5 %: steady after STEADY_CALLS of them, long before 0.5 s
    res = harness.time_calls(lambda: time.sleep(0.005), dev, warmup_steady_rel=0.05, **kw)
    assert harness.STEADY_CALLS <= res["warmup_calls"] < 20 and res["warmup_s"] < 0.3
    # calls still getting faster (clocks ramping, caches filling) are not steady: the whole floor
    left = iter([0.1 * 0.94 ** k for k in range(500)])  # 6 % faster each call
    res = harness.time_calls(lambda: time.sleep(next(left)), dev, warmup_steady_rel=0.05, **kw)
    assert res["warmup_s"] >= 0.5
    # off: the floor
    res = harness.time_calls(lambda: time.sleep(0.005), dev, warmup_steady_rel=0.0, **kw)
    assert res["warmup_s"] >= 0.5


def test_the_median_band_is_a_confidence_interval_of_the_median():
    assert harness.median_band([5.0] * 10) == 0.0
    # 10 calls: the 2nd and the 9th (97.9 %); 20 calls: the 6th and the 15th (95.9 %)
    assert harness.median_band(list(range(1, 11))) == pytest.approx((9 - 2) / 5.5)
    assert harness.median_band(list(range(20, 0, -1))) == pytest.approx((15 - 6) / 10.5)
    # one outlier among ten calls does not widen it; two on the same side do
    assert harness.median_band([5.0] * 9 + [50.0]) == 0.0
    assert harness.median_band([5.0] * 8 + [50.0, 50.0]) > 1
    assert harness.median_band([1.0, 2.0, 3.0, 4.0, 5.0]) == math.inf  # too few for 95 %
    assert harness.median_band([]) == math.inf


def _calls_of(monkeypatch, durations_ms):
    """time_calls on the CPU, timed by a clock that each call moves on by the next duration."""
    now, left = [0.0], iter(durations_ms)
    monkeypatch.setattr(harness, "_perf_counter", lambda: now[0])

    def call():
        now[0] += next(left) / 1e3
    return call


def test_a_timing_stops_early_only_on_calls_that_pin_their_median(monkeypatch):
    dev = torch.device("cpu")
    kw = dict(warmup=3, min_calls=20, max_calls=500, budget_s=10.0, stable_rel=0.01,
              flusher=harness.L2Flusher(dev, 1 << 10), warmup_s=0.0, early_calls=10, early_rel=0.005)
    steady = [5.0, 5.01, 4.99, 5.005] * 200  # within 0.4 %
    res = harness.time_calls(_calls_of(monkeypatch, steady), dev, **kw)
    assert len(res["times_ms"]) == 10
    assert harness.time_calls(_calls_of(monkeypatch, steady), dev, **{**kw, "early_calls": 0})["times_ms"].__len__() == 20
    assert len(harness.time_calls(_calls_of(monkeypatch, steady), dev, **{**kw, "early_rel": 0.0})["times_ms"]) == 20
    # calls that scatter by a few per cent (a kernel of microseconds) get the full count
    scatter = [5.0, 5.2, 4.9, 5.1, 5.15, 4.95] * 200
    assert len(harness.time_calls(_calls_of(monkeypatch, scatter), dev, **kw)["times_ms"]) == 20
    # one call in ten disturbed does not keep a steady kernel going; a drift does
    res = harness.time_calls(_calls_of(monkeypatch, [5.0] * 9 + [9.0] + [5.0] * 500), dev, **kw)
    assert len(res["times_ms"]) == 10
    drift = [5.0 * 1.002 ** k for k in range(600)]
    assert len(harness.time_calls(_calls_of(monkeypatch, drift), dev, **kw)["times_ms"]) >= 20
    # the wall-time floor (a quiet GPU's timing) holds before an early stop too
    assert len(harness.time_calls(_calls_of(monkeypatch, steady), dev, **{**kw, "min_wall_s": 0.08})["times_ms"]) == 20


def test_the_judge_asks_candidates_for_an_early_stop():
    rule = timing_rule(JudgeConfig(device="cpu"))
    assert rule["early_calls"] == 10 and rule["early_rel"] == 0.005 and rule["min_calls"] == 20
    assert timing_rule(JudgeConfig(device="cpu", timing_early_calls=0))["early_calls"] == 0


def test_the_hold_is_set_from_the_warm_ups_launches_after_its_first_calls():
    ms = 1e-3
    # a short warm-up that stopped on steady calls: two first launches of 3 and 1 ms, then 50 us each
    host = [3 * ms, 1 * ms, 0.05 * ms, 0.05 * ms, 0.05 * ms, 0.06 * ms]
    assert harness.hold_after_warmup(host, harness.HOLD_MIN_US) == pytest.approx(2 * 60 + harness.HOLD_MIN_US)
    # without leaving them out the hold would be 2 ms (capped): every timed call would wait that long
    assert harness.hold_after_warmup(host[:4], harness.HOLD_MIN_US) == harness.HOLD_MAX_US  # too few to leave any out
    # late calls in the warm-up doubled it: never shorter than that, never past the cap
    assert harness.hold_after_warmup(host, 800.0) == 800.0
    assert harness.hold_after_warmup([0.5] * 8, harness.HOLD_MIN_US) == harness.HOLD_MAX_US
    assert harness.hold_after_warmup([], 45.0) == 45.0


@pytest.mark.slow
def test_the_judge_clocks_the_whole_slot(cache_dir):
    cfg = JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=1, timing_budget_s=0.3,
                      work_dir=tempfile.mkdtemp(prefix="kernel_env_test_work_"))
    t0 = time.monotonic()
    v = Judge(cfg).evaluate_sync("level1/1_Small_ReLU", submission("relu_ok.py"))
    assert v.correct, v.feedback
    tm = v.timings
    parts, tail = ("prepare_s", "outputs_s", "timed_s", "done_s"), ("close_s", "reference_s")
    assert all(tm[k] >= 0 for k in parts + tail), tm
    check = v.details["ref_phases"]["check"]["s"]
    # the parts follow each other inside the slot, the candidate's end and the compare after it, and
    # both are inside the evaluation
    assert sum(tm[k] for k in parts) + check <= tm["slot_s"] + 0.01
    assert sum(tm[k] for k in tail) <= tm["tail_s"] + 0.01
    assert tm["slot_s"] + tm["tail_s"] <= time.monotonic() - t0
    # the run process's timing: its warm-up is part of it
    ph = v.details["run_phases"]
    assert ph["warmup_calls"] >= cfg.warmup_calls and 0 < ph["warmup_s"] <= ph["timing_s"]
    assert tm["timed_s"] >= ph["warmup_s"]


@pytest.mark.slow
def test_the_next_evaluation_runs_beside_the_end_of_the_one_before_and_is_timed_after_it(cache_dir, monkeypatch):
    """Two evaluations queued for one device: the second one prepares and runs its trials while the
    first one's candidate ends and its rechecks are compared (its tail), and is timed only after that
    tail. (overlap_tail=False, where nothing of the second one starts before the first has ended, is
    the bench's side-by-side baseline: bench/slot_split.py.)"""
    from kernel_env.judge.devices import Turn
    events = []
    end_tail, prepare, before_timing = Turn.end_tail, Judge._prepare, Judge._before_timing

    def spy_end_tail(turn):
        if not turn.tail.done():
            events.append(("tail end", turn, time.monotonic()))
        end_tail(turn)

    async def spy_prepare(self, ref, turn, *a):
        events.append(("prepare", turn, time.monotonic()))
        return await prepare(self, ref, turn, *a)

    async def spy_before_timing(self, gpu, busy, turn=None):
        change = await before_timing(self, gpu, busy, turn)
        events.append(("timing", turn, time.monotonic()))
        return change
    monkeypatch.setattr(Turn, "end_tail", spy_end_tail)
    monkeypatch.setattr(Judge, "_prepare", spy_prepare)
    monkeypatch.setattr(Judge, "_before_timing", spy_before_timing)
    judge = Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=1, timing_budget_s=0.3,
                              work_dir=tempfile.mkdtemp(prefix="kernel_env_test_work_")))

    async def main():
        try:
            return await asyncio.gather(*(judge.evaluate("level1/1_Small_ReLU", submission("relu_ok.py"))
                                          for _ in range(2)))
        finally:
            await judge.aclose()
    vs = asyncio.run(main())
    assert all(v.correct for v in vs), [v.feedback for v in vs]
    first, second = sorted({turn for _, turn, _ in events}, key=lambda turn: next(
        t for what, x, t in events if x is turn and what == "prepare"))
    at = {(what, turn): t for what, turn, t in events}
    assert at[("timing", second)] >= at[("tail end", first)]
    assert at[("prepare", second)] < at[("tail end", first)]  # prepared (its trials run) while the first ended
    assert all(v.timings["tail_s"] >= v.timings["close_s"] for v in vs)



@pytest.mark.slow
def test_a_wrong_kernel_ending_beside_the_next_evaluation_leaves_its_verdict_alone(cache_dir):
    """Wrong and honest kernels queued for one device: each wrong one is released while the next one's
    requests are in flight to the same reference worker. Every verdict is the kernel's own, none the
    judge's failure."""
    judge = Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=1, timing_budget_s=0.2,
                              work_dir=tempfile.mkdtemp(prefix="kernel_env_test_work_")))
    files = ["relu_wrong.py", "relu_ok.py"] * 3

    async def main():
        try:
            return await asyncio.gather(*(judge.evaluate("level1/1_Small_ReLU", submission(f)) for f in files))
        finally:
            await judge.aclose()
    vs = asyncio.run(main())
    got = [(f, v.stage, v.error_kind) for f, v in zip(files, vs)]
    assert got == [(f, "correctness", "output_mismatch") if "wrong" in f else (f, "timed", "none")
                   for f in files], [v.details.get("internal_error") for v in vs]


def test_a_pair_of_tasks_that_had_to_wait_waits_as_long_next_time_and_tries_at_once_again_rarely():
    """A PREPARE beside the previous evaluation's tail that had to wait (the two do not fit the
    device's memory at once): the same pair of tasks then waits as long at the slot's start (for the
    candidate before to exit, or for the whole tail), and tries at once again only every
    PREPARE_RETRY-th time (a try that waits costs seconds). A pair that fits keeps preparing beside;
    nothing goes beside without the overlap or a tail still running."""
    from kernel_env.judge import service
    from kernel_env.judge.devices import Turn
    retry = service.PREPARE_RETRY

    async def go():
        judge = SimpleNamespace(cfg=SimpleNamespace(overlap_tail=True), _prepare_waits={})

        def beside(previous, task="level1/b"):
            return Judge._beside_previous(judge, Turn(previous, task), task)

        big, small = Turn(None, "level1/a"), Turn(None, "level1/c")  # their tails still running
        assert beside(big) == beside(small) == service.BESIDE_TAIL  # a pair not seen before tries at once
        for waited in (service.AFTER_TAIL, service.AFTER_CANDIDATE):
            uses = judge._prepare_waits[("level1/a", "level1/b")][1]
            judge._prepare_waits[("level1/a", "level1/b")] = (waited, uses)  # as _prepare records a wait
            tries = [beside(big) for _ in range(2 * retry)]
            assert tries.count(service.BESIDE_TAIL) == 2 and tries.index(service.BESIDE_TAIL) == retry - 1 - uses % retry
            assert set(tries) == {service.BESIDE_TAIL, waited}
        assert all(beside(small) == service.BESIDE_TAIL for _ in range(retry))
        ended = Turn(None, "level1/c")
        ended.end_tail()
        assert beside(ended) == service.AFTER_TAIL
        judge.cfg.overlap_tail = False
        assert beside(small) == service.AFTER_TAIL

    asyncio.run(go())


def test_a_prepare_that_does_not_fit_beside_the_candidate_before_goes_beside_its_compare():
    """The reference worker answers "wait" (memory) to a PREPARE beside the previous evaluation's
    tail while its candidate still holds device memory: the judge asks again once that candidate has
    exited, before the evaluation before asks for its compare (the worker answers one request at a
    time), and prepares beside the compare; the pair remembers it. A "wait" then too, or one for the
    reference's profile, waits for the whole tail."""
    from kernel_env.judge import service
    from kernel_env.judge.devices import Turn

    async def go(answers_with_candidate_gone, answer_while_running="memory"):
        asked = []
        previous = Turn(None, "level1/a")
        previous.hand_on()

        async def ask(ref, req):
            # what the worker would say: the memory comes back with the candidate before
            asked.append(("beside" if req.get("beside") else "after", previous.candidate_ended.done(), previous.tail.done()))
            await asyncio.sleep(0.01)
            if not req.get("beside"):
                return {"ok": True}
            if not previous.candidate_ended.done():
                return {"ok": True, "wait": answer_while_running}
            return {"ok": True, "wait": "memory"} if not answers_with_candidate_gone else {"ok": True}

        judge = SimpleNamespace(cfg=SimpleNamespace(overlap_tail=True), _prepare_waits={},
                                references=SimpleNamespace(ask=ask))
        turn = Turn(previous, "level1/b")
        v = SimpleNamespace(timings={}, details={})
        cand = SimpleNamespace(workdir=Path("/nonexistent"))

        async def tail():  # the evaluation before: its candidate's end, then its compare
            await asyncio.sleep(0.05)
            previous.candidate_gone()
            await previous.next_asks_first()
            asked.append(("compare", True, False))
            await asyncio.sleep(0.05)
            previous.end_tail()

        ending = asyncio.ensure_future(tail())
        await Judge._prepare(judge, None, turn, {}, cand, v, "level1/b")
        await ending
        return asked, v, judge._prepare_waits[("level1/a", "level1/b")][0]

    asked, v, memo = asyncio.run(go(True))
    # beside the running candidate, then beside the compare: asked before it (the candidate gone, the tail not ended)
    assert asked == [("beside", False, False), ("beside", True, False), ("compare", True, False)], asked
    assert v.details == {"prepared_beside": "compare", "ref_phases": {"prepare": None}} and memo == service.AFTER_CANDIDATE
    assert 0.03 < v.timings["prepare_wait_s"] < 0.09
    asked, v, memo = asyncio.run(go(False))  # no room beside the compare either: after the tail
    assert asked == [("beside", False, False), ("beside", True, False), ("compare", True, False),
                     ("after", True, True)], asked
    assert v.details["prepare_waited_for"] == "memory" and memo == service.AFTER_TAIL
    asked, v, memo = asyncio.run(go(True, "profile"))  # the reference must be timed: never beside a tail
    assert asked == [("beside", False, False), ("compare", True, False), ("after", True, True)], asked
    assert v.details["prepare_waited_for"] == "profile" and memo == service.AFTER_TAIL


def test_a_compare_waits_for_the_next_prepare_only_when_the_next_evaluation_waits_and_not_for_ever():
    """The evaluation before asks for its compare at once when nobody waits for its candidate's end;
    when the next one waits and then never asks (it failed), within NEXT_ASK_WAIT_S."""
    from kernel_env.judge import devices
    from kernel_env.judge.devices import Turn

    async def go():
        a = Turn(None, "level1/a")
        a.candidate_gone()
        t = time.monotonic()
        await a.next_asks_first()
        assert time.monotonic() - t < 0.05
        b = Turn(None, "level1/a")
        nxt = Turn(b, "level1/b")
        waiting = asyncio.ensure_future(nxt.after_previous_candidate())
        await asyncio.sleep(0.01)
        assert b.next_waits
        b.candidate_gone()
        await waiting
        t = time.monotonic()
        await b.next_asks_first()  # the next one never asks
        assert devices.NEXT_ASK_WAIT_S - 0.05 < time.monotonic() - t < devices.NEXT_ASK_WAIT_S + 0.5

    asyncio.run(go())
