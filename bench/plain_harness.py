"""The plain harness: what a KernelBench-style evaluation does, written plainly, to compare against.

One evaluation = one fresh Python process (this file run as a script) that imports the reference
problem module and the submission (plain `load_inline` at import, or Triton compiling at its first
call; the only cache is torch's own build folder, one per submission source as KernelBench's
`build_dir` per sample, and Triton's own cache), makes inputs with the task's `get_inputs()` on the
CPU and moves them to the device, checks `torch.allclose` (atol = rtol = 1e-4, fp32) on a few
trials, times a fixed number of calls (3 warm-ups, then CUDA events per call, or perf_counter on the
CPU) and prints one JSON line. The reported time is the mean, as KernelBench's `runtime`.

The driver (PlainHarness) runs every evaluation through one GPU queue: a lock of 1 around the whole
evaluation process, builds included (KernelBench's scripts can pre-compile on the CPU in a separate
pass; a plain harness that takes submissions as they come does not). Reference times come from one
baseline process per task before the run, as KernelBench's precomputed baseline times.

    python bench/plain_harness.py --task-file T.py --submission S.py --device cuda   # one evaluation
    python bench/plain_harness.py --task-file T.py --baseline --device cuda          # reference time
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

MARK = "PLAIN_RESULT "


# ---------------------------------------------------------------- one evaluation (the child process)
def _load(path: str, name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _seed(torch, s: int) -> None:
    torch.manual_seed(s)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(s)


def _time_calls(torch, fn, inputs, device: str, trials: int, warmup: int = 3) -> list[float]:
    """ms per call: CUDA events around each call and a synchronize after it (KernelBench's way)."""
    for _ in range(warmup):
        fn(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            fn(*inputs)
            times.append((time.perf_counter() - t) * 1e3)
    return times


def evaluate_once(args) -> dict:
    t0 = time.perf_counter()
    import torch
    out: dict = {"import_s": round(time.perf_counter() - t0, 3)}
    dev = args.device
    ref_mod = _load(args.task_file, "reference_problem")
    moved = lambda xs: [x.to(dev) if isinstance(x, torch.Tensor) else x for x in xs]  # noqa: E731
    init = moved(ref_mod.get_init_inputs())
    if args.baseline:
        with torch.no_grad():
            _seed(torch, 42)
            model = ref_mod.Model(*init).to(dev)
            _seed(torch, 42)
            times = _time_calls(torch, model, moved(ref_mod.get_inputs()), dev, args.perf_trials)
        return {**out, "stage": "timed", "t_ref_ms": sum(times) / len(times), "times_ms": times}

    t = time.perf_counter()
    try:
        new_mod = _load(args.submission, "submission")
    except Exception as e:
        return {**out, "stage": "build", "correct": False, "error": f"{type(e).__name__}: {e}"[:2000],
                "built_at": time.time()}
    out["import_submission_s"] = round(time.perf_counter() - t, 3)
    out["built_at"] = time.time()  # the driver counts the build from the process start, as the judge does
    t = time.perf_counter()
    try:
        with torch.no_grad():
            _seed(torch, 42)
            ref = ref_mod.Model(*init).to(dev)
            _seed(torch, 42)
            new = new_mod.ModelNew(*init).to(dev)
            passed = 0
            for trial in range(args.trials):
                _seed(torch, 1000 + trial)
                inputs = moved(ref_mod.get_inputs())  # made on the CPU, then moved
                want = ref(*inputs)
                got = new(*inputs)
                if dev == "cuda":
                    torch.cuda.synchronize()
                if got.shape != want.shape or not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
                    return {**out, "stage": "correctness", "correct": False, "trials_passed": passed,
                            "correct_s": round(time.perf_counter() - t, 3)}
                passed += 1
                del inputs, want, got
            out["correct_s"] = round(time.perf_counter() - t, 3)
            t = time.perf_counter()
            _seed(torch, 42)
            times = _time_calls(torch, new, moved(ref_mod.get_inputs()), dev, args.perf_trials)
            out["timing_s"] = round(time.perf_counter() - t, 3)
    except Exception as e:
        return {**out, "stage": "run", "correct": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    return {**out, "stage": "timed", "correct": True, "trials_passed": passed,
            "t_new_ms": sum(times) / len(times), "t_new_median_ms": sorted(times)[len(times) // 2]}


def child_main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="one plain evaluation (prints one JSON line)")
    ap.add_argument("--task-file", required=True)
    ap.add_argument("--submission")
    ap.add_argument("--baseline", action="store_true", help="time the reference Model instead")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--trials", type=int, default=5, help="correctness trials")
    ap.add_argument("--perf-trials", type=int, default=100, help="timed calls")
    args = ap.parse_args(argv)
    try:
        res = evaluate_once(args)
    except Exception as e:  # the reference itself failed: a harness problem, reported as such
        res = {"stage": "harness_error", "correct": False, "error": f"{type(e).__name__}: {e}"[:2000]}
    print(MARK + json.dumps(res), flush=True)


# ---------------------------------------------------------------- the driver (one GPU queue)
class Stopped(RuntimeError):
    pass


class PlainHarness:
    """Runs each evaluation as its own process, one at a time (a lock around the whole process)."""

    name = "plain"

    def __init__(self, device: str, tasks, work_dir: Path, cache_dir: Path, perf_trials: int,
                 gpu: str = "", timeout_s: float = 900.0, trials: int = 5):
        self.device, self.tasks, self.perf_trials, self.trials = device, tasks, perf_trials, trials
        self.work = Path(work_dir) / "plain"
        self.cache = Path(cache_dir) / "plain"
        self.gpu, self.timeout_s = gpu, timeout_s
        self.lock = threading.Lock()
        self.busy_s = 0.0
        self._held_since: float | None = None  # the GPU queue's holder took it then
        self.t_ref: dict[str, float] = {}
        self.baseline_s: dict[str, float] = {}
        self._proc: subprocess.Popen | None = None
        self._stopped = False

    def start(self) -> None:
        (self.work / "subs").mkdir(parents=True, exist_ok=True)
        self.cache.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        self.abort()

    def abort(self) -> None:
        """Stop: the running evaluation is killed, waiting ones are refused."""
        self._stopped = True
        p = self._proc
        if p is not None and p.poll() is None:
            p.kill()

    def resume(self) -> None:
        self._stopped = False

    def device_busy(self) -> tuple[float, int]:
        """Seconds the GPU queue was held, the evaluation holding it now included (one may hold it
        for minutes: a window can end while it runs)."""
        since = self._held_since
        return self.busy_s + (time.monotonic() - since if since is not None else 0.0), 1

    def session(self) -> "PlainSession":
        return PlainSession(self)

    def prepare(self, task_ids) -> dict:
        """Reference times of the tasks, before the phases (KernelBench's precomputed baselines)."""
        return {t: self.baseline(t) for t in task_ids}

    def baseline(self, task_id: str) -> float | None:
        """The reference's time on this device (KernelBench's precomputed baseline), once per task."""
        if task_id not in self.t_ref:
            t = time.monotonic()
            res, _, _ = self._run(["--task-file", str(self.tasks.get(task_id).path), "--baseline"], code_key="ref")
            self.baseline_s[task_id] = round(time.monotonic() - t, 2)
            if res.get("t_ref_ms"):
                self.t_ref[task_id] = res["t_ref_ms"]
        return self.t_ref.get(task_id)

    def evaluate(self, task_id: str, code: str) -> dict:
        path = self.work / "subs" / f"{uuid.uuid4().hex}.py"
        path.write_text(code)
        key = hashlib.sha256(code.encode()).hexdigest()[:16]
        try:
            res, queue_s, latency = self._run(["--task-file", str(self.tasks.get(task_id).path),
                                               "--submission", str(path)], code_key=key)
        finally:
            path.unlink(missing_ok=True)
        t_ref = self.t_ref.get(task_id)
        measure = [res.get(k) for k in ("correct_s", "timing_s") if res.get(k) is not None]
        return {"task": task_id, "stage": res.get("stage"), "correct": bool(res.get("correct")),
                "t_new_ms": res.get("t_new_ms"),
                "speedup": t_ref / res["t_new_ms"] if t_ref and res.get("t_new_ms") else None,
                "latency_s": latency, "build_s": res.get("build_s"), "queue_s": queue_s,
                "measure_s": sum(measure) if measure else None, "error": res.get("error")}

    def _run(self, args: list[str], code_key: str) -> tuple[dict, float, float]:
        """One child process under the GPU queue: (its result, seconds waited, seconds in all)."""
        env = dict(os.environ)
        env["TORCH_EXTENSIONS_DIR"] = str(self.cache / "torch_extensions" / code_key)  # build_dir per sample
        env["TRITON_CACHE_DIR"] = str(self.cache / "triton")
        if self.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
            env["TRITON_INTERPRET"] = "1"  # Triton on the CPU: its interpreter
        elif self.gpu:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        argv = [sys.executable, str(Path(__file__).resolve()), *args, "--device", self.device,
                "--trials", str(self.trials), "--perf-trials", str(self.perf_trials)]
        t_submit = time.monotonic()
        with self.lock:
            if self._stopped:
                raise Stopped("plain harness stopped")
            t_start, started_at = time.monotonic(), time.time()
            self._held_since = t_start
            try:
                self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                              env=env)
                try:
                    out, _ = self._proc.communicate(timeout=self.timeout_s)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    out, _ = self._proc.communicate()
                rc = self._proc.returncode
            finally:
                self._proc = None
                self.busy_s += time.monotonic() - t_start
                self._held_since = None
        t_end = time.monotonic()
        lines = [ln for ln in out.splitlines() if ln.startswith(MARK)]
        if lines:
            res = json.loads(lines[-1][len(MARK):])
        else:
            res = {"stage": "crash", "correct": False, "error": f"exit {rc}: {out[-1500:]}"}
        if res.get("built_at"):  # process start, interpreter, imports, load_inline: like the judge's build_s
            res["build_s"] = res["built_at"] - started_at
        return res, t_start - t_submit, t_end - t_submit


class PlainSession:
    """A client of the plain harness: nothing to hold, each evaluation stands alone."""

    def __init__(self, h: PlainHarness):
        self.h = h

    def evaluate(self, task_id: str, code: str) -> dict:
        return self.h.evaluate(task_id, code)

    def close(self) -> None:
        pass


if __name__ == "__main__":
    child_main()
