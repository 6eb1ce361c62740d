"""TRUSTED: the judge of one node of a Ray cluster, as a Ray actor.

One `NodeJudge` per node, pinned there (NodeAffinitySchedulingStrategy) and holding all of that node's
GPUs (num_gpus), runs today's judge (judge/service.py) unchanged: its candidate processes, build cache,
reference workers and device slots are the node's own, so a build and its measurement never cross
nodes and no other actor's work shares the node's GPUs. The actor is async: Ray runs its methods on
one event loop, which is the judge's loop; cancelling a call (ray.cancel) cancels the evaluation,
which kills its processes and removes its files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
import subprocess

from ..judge.config import JudgeConfig
from ..tasks import TaskSet


def tasks_digest(tasks: TaskSet) -> str:
    """What the front door and a node must agree on: every task id and its source."""
    h = hashlib.sha256()
    for task_id in sorted(tasks.tasks):
        h.update(task_id.encode() + b"\0" + hashlib.sha256(tasks.tasks[task_id].source.encode()).digest())
    return h.hexdigest()


def _gpu_name(gpus: tuple[int, ...]) -> str:
    """The GPU model, asked of nvidia-smi: making a CUDA context in the judge's own process would take
    device memory beside the candidates' measurements."""
    if not gpus or not shutil.which("nvidia-smi"):
        return "cuda"
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", str(gpus[0])],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "cuda"
    return r.stdout.strip() or "cuda"


class NodeJudge:
    """Wrapped by `ray.remote` in router.py (this module does not import Ray)."""

    def __init__(self, cfg: JudgeConfig, kernelbench_dir: str, digest: str):
        import ray
        self.tasks = TaskSet(kernelbench_dir)
        if tasks_digest(self.tasks) != digest:  # a verdict against another version of a task is worthless
            raise ValueError(f"the tasks under {kernelbench_dir} on {socket.gethostname()} differ from the "
                             "front door's: every node needs the same KernelBench folder")
        if cfg.device == "cuda":
            # the GPUs Ray gave this actor, as physical indices: each candidate process is shown one of
            # them by CUDA_VISIBLE_DEVICES, which the judge sets itself
            gpus = tuple(int(g) for g in ray.get_gpu_ids())
            if not gpus:
                raise ValueError("a CUDA judge actor was placed without GPUs")
            cfg = dataclasses.replace(cfg, gpus=gpus)
        from ..judge import Judge
        self.judge = Judge(cfg, self.tasks)
        self.info = {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                     "pid": os.getpid(), "device": cfg.device, "gpus": list(cfg.gpus) if cfg.device == "cuda" else [],
                     "device_name": _gpu_name(cfg.gpus) if cfg.device == "cuda" else "cpu",
                     "isolation": self.judge.isolation}

    async def ready(self) -> dict:
        """Start what the node's evaluations share (idle processes, reference workers), then say who
        this is. Called once by the front door that placed the actor, before any work is sent."""
        self.judge.start_ahead()
        return self.info

    async def evaluate(self, task_id: str, code: str, policy: str) -> object:
        return await self.judge.evaluate(task_id, code, policy)

    async def task_profile(self, task_id: str) -> dict:
        return await self.judge.task_profile(task_id)

    async def stats(self) -> dict:
        return {**self.judge.stats(), **self.info}

    async def close(self) -> None:
        await self.judge.aclose()
