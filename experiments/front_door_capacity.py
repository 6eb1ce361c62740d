"""What one front door can pass: its CPU per step, and what a Ray call to a node judge adds.

    python experiments/front_door_capacity.py [--sessions 16] [--seconds 20] [--ray-calls 2000]

Decision it informs: the throughput model in docs/design/cluster.md (how many front doors a cluster of
N GPU nodes needs). Two measurements, each on a real process:
1. a real `kernel-env serve` (CPU device, no Ray) with `--sessions` clients stepping a source the
   judge's static check rejects (screened at the front door, as every step is before it travels to a
   node): steps per second and the server process's CPU seconds per step (/proc/<pid>/stat), which is
   the WebSocket, OpenEnv, screen, reward and history work of a step;
2. a local Ray cluster (ray.init in this process) and one async actor: the driver's CPU seconds and the
   wall time of one call that sends a submission-sized argument and gets a verdict-sized answer back,
   which is what the front door adds per evaluation on Ray.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REJECTED = ("import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.relu(x)\n")  # strict: PyTorch does the compute


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def front_door(sessions: int, seconds: float) -> dict:
    from kernel_env import KernelAction, KernelEnv
    from kernel_env.agent.local_server import LocalEnvServer

    log = Path("/tmp/front_door_capacity.log")
    server = LocalEnvServer("cpu", ["--stats-interval-s", "0", "--max-turns", "4"], log, None).start()
    counts = [0] * sessions
    stop = threading.Event()

    def client(i: int) -> None:
        with KernelEnv(base_url=server.url, token=server.token, message_timeout_s=60).sync() as env:
            while not stop.is_set():
                env.reset(task_id="level1/1_Small_ReLU", split="train")
                for _ in range(4):
                    r = env.step(KernelAction(code=REJECTED))
                    assert r.observation.stage == "static", r.observation.feedback
                    counts[i] += 1

    try:
        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(sessions)]
        for t in threads:
            t.start()
        time.sleep(3)  # connected and stepping
        n0, c0, t0 = sum(counts), _cpu_s(server.proc.pid), time.monotonic()
        time.sleep(seconds)
        n1, c1, t1 = sum(counts), _cpu_s(server.proc.pid), time.monotonic()
        stop.set()
        for t in threads:
            t.join(30)
    finally:
        server.stop()
    steps = n1 - n0
    return {"sessions": sessions, "steps": steps, "steps_per_s": steps / (t1 - t0),
            "server_cpu_s_per_step": (c1 - c0) / max(1, steps)}


def ray_call(calls: int) -> dict:
    import ray

    ray.init(address="local", include_dashboard=False, log_to_driver=False, num_cpus=1)

    @ray.remote
    class Echo:
        async def evaluate(self, task_id: str, code: str, policy: str) -> dict:
            return {"task_id": task_id, "feedback": "x" * 2000, "details": {"timings": list(range(50))}}

    async def run() -> dict:
        actor = Echo.options(max_concurrency=1000).remote()
        code = "y" * 8000  # a typical submission's size
        await actor.evaluate.remote("t", code, "strict")
        c0, t0 = time.process_time(), time.monotonic()
        for _ in range(calls):
            await actor.evaluate.remote("t", code, "strict")
        c1, t1 = time.process_time(), time.monotonic()
        return {"calls": calls, "driver_cpu_ms_per_call": 1000 * (c1 - c0) / calls,
                "wall_ms_per_call": 1000 * (t1 - t0) / calls}

    try:
        return asyncio.run(run())
    finally:
        ray.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--ray-calls", type=int, default=2000)
    a = ap.parse_args()
    print("front door:", front_door(a.sessions, a.seconds), flush=True)
    print("ray call:", ray_call(a.ray_calls), flush=True)


if __name__ == "__main__":
    main()
