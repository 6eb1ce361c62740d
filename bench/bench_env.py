"""This project's side of the benchmark: the real server (a subprocess) driven by the real client.

    python -m kernel_env.server.app --host 127.0.0.1 --port P --device D [--kernelbench-dir KB] ...

EnvHarness starts it (kernel_env.agent.local_server.LocalEnvServer: a free port, a random token), waits for /health, hands out sessions (one KernelEnv WebSocket each) and reads
/stats. A session's evaluate() is one step(): reset(task, split) first when the task changes or the
episode is over; the per-evaluation timings (build, device queue, measurement) come from the last
entry of state().history, fetched after the step (outside the step's latency).
"""
from __future__ import annotations

import json
import shlex
import time
import urllib.request
from pathlib import Path

from kernel_env.agent.local_server import LocalEnvServer
from kernel_env import KernelAction, KernelEnv
from kernel_env.tasks import split_of


# one evaluation's device work (service.py): its slot, and its tail (the candidate's end and the compare,
# beside the next evaluation's trials)
MEASURE_KEYS = ("prepare_s", "run_s", "close_s", "reference_s")


class EnvHarness:
    name = "env"

    def __init__(self, device: str, kernelbench_dir: str, work_dir: Path, gpus: str = "", max_turns: int = 4,
                 server_args: str = "", timeout_s: float = 900.0, name: str = "env"):
        self.device, self.kernelbench_dir, self.gpus, self.name = device, kernelbench_dir, gpus, name
        self.work = Path(work_dir) / name
        self.max_turns, self.server_args, self.timeout_s = max_turns, server_args, timeout_s
        self.log_path = self.work / "server.log"
        self.server: LocalEnvServer | None = None
        self.url = self.token = ""
        self.startup_s = None

    def start(self) -> None:
        args = ["--max-turns", str(self.max_turns), "--stats-interval-s", "30"]
        if self.gpus:
            args += ["--gpus", self.gpus]
        args += shlex.split(self.server_args)
        t = time.monotonic()
        self.server = LocalEnvServer(self.device, args, self.log_path, self.kernelbench_dir, ready_timeout_s=180).start()
        self.startup_s = round(time.monotonic() - t, 2)
        self.url, self.token = self.server.url, self.server.token

    def client(self) -> KernelEnv:
        return KernelEnv(base_url=self.url, token=self.token, message_timeout_s=self.timeout_s).sync()

    def stats(self) -> dict:
        req = urllib.request.Request(self.url + "/stats", headers={"Authorization": f"Bearer {self.token}"})
        return json.loads(urllib.request.urlopen(req, timeout=10).read())

    def device_busy(self) -> tuple[float, int]:
        """Seconds the judge held a device slot, summed over devices (busy_frac x judge uptime)."""
        j = self.stats()["judge"] or {}
        fr = j.get("device_busy_frac") or {}
        return sum(fr.values()) * j.get("uptime_s", 0.0), max(1, len(fr))

    def prepare(self, task_ids) -> dict:
        """One reset per task before the phases: the judge profiles each task (t_ref, FLOPs, bytes) on first
        use, on the device, and keeps it on disk; a long-running server has them all."""
        env = self.client()
        out = {}
        try:
            for t in task_ids:
                t0 = time.monotonic()
                env.reset(task_id=t, split=split_of(t))
                out[t] = round(time.monotonic() - t0, 2)
        finally:
            env.close()
        # and its precompiled header (made once per box, in the background): a cold build measured
        # while it is being made would not use it, and the same source built again would (its
        # main.cpp differs): the warm phase would measure a second build
        t0 = time.monotonic()
        while (self.stats()["judge"] or {}).get("precompiled_header_ready") is False and time.monotonic() - t0 < 600:
            time.sleep(2)
        out["precompiled_header_wait_s"] = round(time.monotonic() - t0, 2)
        return out

    def queue_sample(self) -> dict:
        """Evaluations waiting for a build slot, waiting for a device, in the judge (one /stats read)."""
        j = self.stats()["judge"] or {}
        return {k: j.get(k) for k in ("waiting_build", "waiting_device", "running")}

    def session(self) -> "EnvSession":
        return EnvSession(self)

    def abort(self) -> None:
        """End the load: stop the server (in-flight evaluations are killed with it)."""
        self.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop(30)


class EnvSession:
    def __init__(self, h: EnvHarness):
        self.h = h
        self.env = h.client()
        self.task = None
        self.turns = 0
        self.max_turns = h.max_turns
        self.done = True

    def evaluate(self, task_id: str, code: str) -> dict:
        reset_s = None
        if task_id != self.task or self.done:
            t = time.monotonic()
            obs = self.env.reset(task_id=task_id, split=split_of(task_id)).observation
            reset_s = time.monotonic() - t
            self.task, self.turns, self.done = task_id, 0, False
            self.max_turns = (obs.metadata or {}).get("max_turns", self.max_turns)
        t = t_start = time.monotonic()
        r = self.env.step(KernelAction(code=code))
        latency = time.monotonic() - t
        self.turns += 1
        self.done = bool(r.done) or self.turns >= self.max_turns
        hist = self.env.state().history
        tm = (hist[-1].get("timings") if hist else None) or {}
        o = r.observation
        measure = [tm[k] for k in MEASURE_KEYS if tm.get(k) is not None]
        return {"task": task_id, "stage": o.stage, "correct": bool(o.correct), "t_new_ms": o.t_new_ms,
                "speedup": o.speedup, "latency_s": latency, "build_s": tm.get("build_s"),
                "queue_s": tm.get("queue_s"), "build_wait_s": tm.get("build_wait_s"), "measure_s": sum(measure) if measure else None,
                "judge_s": tm.get("total_s"), "reset_s": reset_s, "timings": tm, "t_start": t_start,
                "timing_spread": hist[-1].get("timing_spread") if hist else None,
                "timed_calls": hist[-1].get("timed_calls") if hist else None,
                "run_phases": hist[-1].get("run_phases") if hist else None,
                "ref_phases": hist[-1].get("ref_phases") if hist else None,
                "error": None if o.correct else (o.feedback or "")[:300]}

    def close(self) -> None:
        try:
            self.env.close()
        except Exception:
            pass
