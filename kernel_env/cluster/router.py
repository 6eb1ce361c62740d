"""TRUSTED: the front door's judge on a Ray cluster: the judge's API, its work done by node actors.

`ClusterJudge` stands where the server's `Judge` stands (evaluate, task_profile, policy_for, stats,
start_ahead, aclose) and:
- screens a submission itself: format and static checks need no process, so a rejected source never
  travels to a node;
- keeps one `NodeJudge` actor per alive node (node_judge.py), found by polling Ray's node table, so a
  node that joins later is used within `refresh_s`. The actors are named per node and judge config in
  one namespace, so several front doors on one cluster share them (and each node's device slots);
- sends an evaluation to the node with the fewest evaluations queued per device, preferring, among
  those within one of the least, the node that judged the same task last: its reference worker has
  that task loaded and its build cache may hold the same source;
- when a node (or its actor) is lost mid-evaluation, Ray reports the actor dead; the evaluation runs
  again from the start on another node. A verdict only ever comes from a node's complete evaluation,
  and each evaluation is counted once, when its verdict is returned;
- when no node can take work for `no_node_wait_s`, answers with an `internal` verdict that says so
  (the client's session retries those), never a hang.

The prompts' roofline numbers (task_profile) are made once per task on whichever node is free and
shared by all nodes; a verdict's speedup always uses the reference timed on the node that timed the
submission, side by side on the same GPU.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from ..compute_policy import choose as choose_policy
from ..judge.config import JudgeConfig
from ..judge.intake import screen
from ..judge.verdict import ErrorKind, Stage, Verdict
from ..tasks import TaskSet
from . import NAMESPACE
from .node_judge import NodeJudge, tasks_digest

log = logging.getLogger("kernel_env.cluster")

AFFINITY_SLACK = 1.0   # queued evaluations per device a task's last node may be ahead of the least queued
REFUSED_RETRY_S = 60.0  # a node whose judge would not start is tried again after this (its GPUs may be free now)


@dataclass
class Node:
    node_id: str
    address: str
    actor: object = None
    state: str = "starting"            # starting | ready | lost | refused
    info: dict = field(default_factory=dict)
    devices: int = 1                   # measurements it runs at once (its GPUs; 1 on the CPU device)
    inflight: int = 0                  # this front door's evaluations on it now
    others: int = 0                    # other front doors' evaluations on it, at the last poll
    evaluations: int = 0               # verdicts it returned to this front door
    reruns: int = 0                    # evaluations lost with it and run again elsewhere
    error: str = ""
    refused_at: float = 0.0
    judge: dict = field(default_factory=dict)  # its judge's stats at the last poll

    def load(self) -> float:
        return (self.inflight + self.others) / max(1, self.devices)

    def view(self) -> dict:
        keep = ("evaluations", "running", "queue_depth", "build_s_mean", "measure_s_mean", "device_busy_frac",
                "isolation", "idle_runners", "reference_workers")
        return {"address": self.address, "state": self.state, "host": self.info.get("host"),
                "pid": self.info.get("pid"), "device_name": self.info.get("device_name"), "gpus": self.info.get("gpus"),
                "inflight": self.inflight, "other_front_doors": self.others, "evaluations": self.evaluations,
                "reruns_from_here": self.reruns, "error": self.error or None,
                "judge": {k: self.judge.get(k) for k in keep if k in self.judge}}


class NoJudgeNode(RuntimeError):
    pass


def _config_digest(cfg: JudgeConfig) -> str:
    d = {k: (str(v) if not isinstance(v, (int, float, str, bool, type(None))) else v) for k, v in asdict(cfg).items()}
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


class ClusterJudge:
    def __init__(self, config: JudgeConfig, tasks: TaskSet, *, refresh_s: float = 2.0, no_node_wait_s: float = 60.0,
                 max_attempts: int = 3, actor_start_timeout_s: float = 600.0):
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError
        self._ray = ray
        self._lost_errors = (RayActorError, ActorDiedError, ActorUnavailableError)
        self.cfg, self.tasks = config, tasks
        self.refresh_s, self.no_node_wait_s = refresh_s, no_node_wait_s
        self.max_attempts, self.actor_start_timeout_s = max_attempts, actor_start_timeout_s
        self._digest = tasks_digest(tasks)
        self._name_suffix = _config_digest(config)
        self._remote = ray.remote(NodeJudge)
        self.nodes: dict[str, Node] = {}
        self._changed = asyncio.Event()     # a node became ready: waiters for a node look again
        self._affinity: dict[str, str] = {}  # task id -> the node that judged it last
        self._lost: dict[str, Node] = {}     # nodes lost while this front door used them, for /stats
        self._profiles: dict[str, dict] = {}
        self._profile_locks: dict[str, asyncio.Lock] = {}
        self._background: list[asyncio.Task] = []
        self._t0 = time.monotonic()
        self._stats = {"evaluations": 0, "screened": 0, "reruns": 0, "no_node": 0, "running": 0}

    # ---------------------------------------------------------------- the judge's API
    def policy_for(self, task_id: str, policy: str | None = None) -> str:
        return choose_policy(policy, self.cfg.policy, self.tasks.get(task_id).level)

    def start_ahead(self) -> None:
        """Find the nodes and start their actors (in the server's event loop)."""
        if not self._background:
            self._background.append(asyncio.create_task(self._keep_nodes()))

    async def evaluate(self, task_id: str, code, policy: str | None = None) -> Verdict:
        task = self.tasks.get(task_id)
        policy = self.policy_for(task_id, policy)
        self.start_ahead()
        t_start = time.monotonic()
        self._stats["running"] += 1
        try:
            # text built to be slow takes most of a second to screen (bench/bench_hostile_text.py): in a
            # thread, so every other session's messages go on
            v = await asyncio.to_thread(screen, task.task_id, code, self.cfg, policy)
            if v is not None:
                self._stats["screened"] += 1
            else:
                source = code if isinstance(code, str) else code.decode("utf-8")
                try:
                    v, node = await self._on_a_node("evaluate", task.task_id, source, policy)
                    v.details["node"] = node.address
                except NoJudgeNode as e:
                    v = Verdict(task.task_id, Stage.RUN.value, error_kind=ErrorKind.INTERNAL.value, policy=policy,
                                feedback=f"No judge node could take this submission ({e}); it was not judged. "
                                         "Submit again.")
        finally:
            self._stats["running"] -= 1
        v.timings["front_door_s"] = round(time.monotonic() - t_start, 3)
        self._stats["evaluations"] += 1
        return v

    async def task_profile(self, task_id: str) -> dict:
        """One profile per task for the whole cluster (the prompts' numbers); NoJudgeNode when none can."""
        if task_id in self._profiles:
            return self._profiles[task_id]
        self.start_ahead()
        async with self._profile_locks.setdefault(task_id, asyncio.Lock()):
            if task_id not in self._profiles:
                self._profiles[task_id], _ = await self._on_a_node("task_profile", self.tasks.get(task_id).task_id)
        return self._profiles[task_id]

    def stats(self) -> dict:
        nodes = list(self.nodes.values())
        ready = [n for n in nodes if n.state == "ready"]

        def mean(key):
            vals = [(n.judge.get(key), n.judge.get("measures" if key == "measure_s_mean" else "builds") or 0)
                    for n in ready if n.judge.get(key) is not None]
            total = sum(w for _, w in vals)
            return sum(v * w for v, w in vals) / total if total else None

        return {**self._stats, "device": self.cfg.device, "uptime_s": time.monotonic() - self._t0,
                "queue_depth": sum(n.inflight for n in nodes),
                "nodes_ready": len(ready), "nodes_total": len(nodes),
                "build_s_mean": mean("build_s_mean"), "measure_s_mean": mean("measure_s_mean"),
                "device_busy_frac": {f"{n.address}/{g}": f for n in ready
                                     for g, f in (n.judge.get("device_busy_frac") or {}).items()},
                "nodes": {n.node_id: n.view() for n in [*self._lost.values(), *nodes]}}

    async def aclose(self) -> None:
        for t in self._background:
            t.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        self._background.clear()

    # ---------------------------------------------------------------- routing
    def _pick(self, task_id: str) -> Node | None:
        ready = [n for n in self.nodes.values() if n.state == "ready"]
        if not ready:
            return None
        least = min(n.load() for n in ready)
        last = self.nodes.get(self._affinity.get(task_id, ""))
        if last is not None and last.state == "ready" and last.load() <= least + AFFINITY_SLACK:
            return last
        return min(ready, key=lambda n: (n.load(), n.evaluations))

    async def _on_a_node(self, method: str, task_id: str, *args):
        """(result, node) of `method` run by a node's judge; again on another node when one is lost."""
        attempts, waited_since = 0, None
        while True:
            node = self._pick(task_id)
            if node is None:
                waited_since = waited_since or time.monotonic()
                left = self.no_node_wait_s - (time.monotonic() - waited_since)
                if left <= 0:
                    self._stats["no_node"] += 1
                    raise NoJudgeNode(self._why_no_node())
                self._changed.clear()
                try:  # not wait_for: on Python 3.11 a cancel that comes with the event is dropped
                    async with asyncio.timeout(min(left, self.refresh_s)):
                        await self._changed.wait()
                except TimeoutError:
                    pass
                continue
            waited_since = None
            self._affinity[task_id] = node.node_id
            node.inflight += 1
            ref = getattr(node.actor, method).remote(task_id, *args)
            try:
                result = await ref
            except asyncio.CancelledError:
                self._ray.cancel(ref)  # the node's judge kills the evaluation's processes
                raise
            except self._lost_errors as e:
                try:  # an actor only unreachable for now may still be judging it: its answer would not count
                    self._ray.cancel(ref)
                except Exception:
                    pass
                self._lose(node, e)
                attempts += 1
                node.reruns += 1
                self._stats["reruns"] += 1
                if attempts >= self.max_attempts:
                    raise NoJudgeNode(f"{attempts} nodes were lost while judging it") from e
                log.warning("node %s lost during %s of %s (%s); running it again elsewhere", node.address, method,
                            task_id, type(e).__name__)
                continue
            finally:
                node.inflight -= 1
            node.evaluations += method == "evaluate"
            return result, node

    def _why_no_node(self) -> str:
        if not self.nodes:
            return f"the Ray cluster has no node for the {self.cfg.device} device"
        states = Counter(n.state for n in self.nodes.values())
        detail = "; ".join(f"{n.address}: {n.error}" for n in self.nodes.values() if n.error)[:500]
        return f"no judge node is ready after {self.no_node_wait_s:.0f} s ({json.dumps(states)})" + (
            f": {detail}" if detail else "")

    def _lose(self, node: Node, e: BaseException) -> None:
        if node.state != "lost":
            log.error("judge node %s lost: %s", node.address, str(e)[:300])
        node.state, node.error = "lost", f"{type(e).__name__}: {str(e)[:200]}"
        # a node Ray still lists as alive gets a new actor at the next poll
        if self.nodes.get(node.node_id) is node:  # not the actor that replaced it meanwhile
            del self.nodes[node.node_id]
        self._lost[node.node_id] = node

    # ---------------------------------------------------------------- nodes
    async def _keep_nodes(self) -> None:
        while True:
            try:
                await self._refresh()
            except Exception:  # a bad poll must not end the front door's view of the cluster
                log.exception("polling the Ray cluster failed")
            await asyncio.sleep(self.refresh_s)

    def _eligible(self, n: dict) -> bool:
        if not n.get("Alive"):
            return False
        return n["Resources"].get("GPU", 0) > 0 if self.cfg.device == "cuda" else True

    async def _refresh(self) -> None:
        alive = {n["NodeID"]: n for n in await asyncio.to_thread(self._ray.nodes) if self._eligible(n)}
        now = time.monotonic()
        for node_id, node in list(self.nodes.items()):
            if node_id not in alive:
                self._lose(node, RuntimeError("Ray lists the node as dead"))
            elif node.state == "refused" and now - node.refused_at > REFUSED_RETRY_S:
                del self.nodes[node_id]  # placed again below
        for node_id, n in alive.items():
            if node_id not in self.nodes:
                self._place(node_id, n)
        ready = [n for n in self.nodes.values() if n.state == "ready"]
        answers = await asyncio.gather(*[asyncio.wait_for(n.actor.stats.remote(), self.refresh_s * 5) for n in ready],
                                       return_exceptions=True)
        for node, s in zip(ready, answers):
            if isinstance(s, self._lost_errors):
                self._lose(node, s)
            elif isinstance(s, dict):
                node.judge = s
                node.others = max(0, int(s.get("running", 0)) - node.inflight)

    def _place(self, node_id: str, n: dict) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        gpus = int(n["Resources"].get("GPU", 0)) if self.cfg.device == "cuda" else 0
        address = f"{n.get('NodeManagerAddress', '?')}:{n.get('NodeManagerPort', '?')}"
        node = Node(node_id, address, devices=max(1, gpus))
        node.actor = self._remote.options(
            name=f"judge-{node_id[:16]}-{self._name_suffix}", namespace=NAMESPACE, get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            num_cpus=0, num_gpus=gpus, max_concurrency=10_000, max_restarts=0,
        ).remote(self.cfg, str(self.tasks.root), self._digest)
        self.nodes[node_id] = node
        self._lost.pop(node_id, None)
        self._background = [t for t in self._background if not t.done()]
        self._background.append(asyncio.create_task(self._start(node)))

    async def _start(self, node: Node) -> None:
        try:
            node.info = await asyncio.wait_for(node.actor.ready.remote(), self.actor_start_timeout_s)
        except asyncio.TimeoutError:
            node.state, node.error = "refused", f"its judge did not start in {self.actor_start_timeout_s:.0f} s"
            node.refused_at = time.monotonic()
            log.error("judge node %s: %s", node.address, node.error)
            return
        except Exception as e:  # the actor's constructor failed (different tasks, no GPUs): say why
            cause = getattr(e, "cause", None) or e
            node.state, node.error = "refused", f"{type(cause).__name__}: {str(cause)[:300]}"
            node.refused_at = time.monotonic()
            log.error("judge node %s refused: %s", node.address, node.error)
            return
        if self.nodes.get(node.node_id) is node:
            node.state = "ready"
            log.info("judge node %s ready: %s, %s, isolation %s", node.address, node.info.get("host"),
                     node.info.get("device_name"), node.info.get("isolation"))
            if node.info.get("isolation") == "none" and self.cfg.sandbox != "none":
                log.warning("judge node %s found no sandbox (bwrap, unshare): its candidates run with process "
                            "limits only; --sandbox bwrap or unshare makes that node refuse instead", node.address)
            self._changed.set()
