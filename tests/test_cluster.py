"""The judge on a real local Ray cluster of several nodes (Ray's own cluster test utility: one head and
worker nodes, each a raylet of its own on this machine), CPU device, real evaluations."""
import asyncio
import json
import tempfile
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from kernel_env.cluster import connect
from kernel_env.cluster.router import ClusterJudge
from kernel_env.judge import JudgeConfig
from kernel_env.tasks import TaskSet

from conftest import submission, waits_for_the_loop

slow = pytest.mark.slow  # a Ray cluster of real raylets and real evaluations

TASK = "level1/1_Small_ReLU"
# a dead node is noticed in ~1.5 s instead of Ray's default ~30 s
FAST_HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                      "_system_config": FAST_HEALTH})
    c.add_node(num_cpus=1)
    try:
        assert connect(c.address, "auto") == "cpu"  # no GPU in the cluster: the CPU device
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def _config(cache_dir, **kw):
    # the session's precompiled header (conftest.py) is in cache_dir already: the nodes' judges use it
    return JudgeConfig(device="cpu", cache_dir=cache_dir, timing_budget_s=0.3, build_slots=1,
                       work_dir=tempfile.mkdtemp(prefix="kernel_env_test_work_"), **kw)


async def _until(cond, timeout_s, what):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(0.2)


@slow
def test_evaluations_spread_over_nodes_survive_a_lost_node_and_use_a_new_one(cluster, cache_dir):
    code = submission("relu_ok.py")

    async def run():
        judge = ClusterJudge(_config(cache_dir), TaskSet(), refresh_s=0.5)
        judge.start_ahead()
        try:
            await _until(lambda: judge.stats()["nodes_ready"] == 2, 180, "both nodes' judges ready")
            # a rejected source is answered at the front door: no node sees it
            v = await judge.evaluate(TASK, "import torch\n")
            assert v.error_kind == "no_model_new" and "node" not in v.details

            first = await asyncio.gather(*[judge.evaluate(TASK, code) for _ in range(4)])
            assert all(v.correct for v in first), [v.feedback for v in first]
            used = {v.details["node"] for v in first}
            assert len(used) == 2, f"all four on {used}"

            # a node lost while it judges: its evaluations run again on the other, each answered once
            worker = next(iter(cluster.worker_nodes))  # not the head: the cluster lives on without it
            victim_id = worker.node_id
            victim = judge.nodes[victim_id]
            batch = [asyncio.ensure_future(judge.evaluate(TASK, code)) for _ in range(4)]
            await _until(lambda: victim.inflight > 0, 60, "an evaluation running on the node to be lost")
            await asyncio.sleep(1.0)  # inside its evaluation, not before it
            cluster.remove_node(worker, allow_graceful=False)
            second = await asyncio.wait_for(asyncio.gather(*batch), 300)
            assert all(v.correct and v.stage == "timed" for v in second), [v.feedback for v in second]
            s = judge.stats()
            assert s["reruns"] >= 1 and s["nodes"][victim_id]["state"] == "lost"
            survivor = next(n for n in judge.nodes.values() if n.state == "ready")
            assert {v.details["node"] for v in second} == {survivor.address}
            assert s["evaluations"] == 1 + 4 + 4  # each submission counted once, the rerun ones too
            # the survivor's own judge returned each of its verdicts once: none doubled
            own = await survivor.actor.stats.remote()
            assert own["evaluations"] == sum(v.details["node"] == survivor.address for v in first + second)

            # a node that joins later is used
            newcomer = cluster.add_node(num_cpus=1)
            await _until(lambda: newcomer.node_id in judge.nodes and judge.nodes[newcomer.node_id].state == "ready",
                         180, "the new node's judge ready")
            third = await asyncio.gather(*[judge.evaluate(TASK, code) for _ in range(3)])
            assert all(v.correct for v in third) and judge.nodes[newcomer.node_id].address in {
                v.details["node"] for v in third}

            # a judge actor killed while its node lives: the evaluation runs again, the node gets a new actor
            target = judge.nodes[newcomer.node_id]
            judge._affinity[TASK] = newcomer.node_id
            job = asyncio.ensure_future(judge.evaluate(TASK, code))
            await _until(lambda: target.inflight > 0, 60, "an evaluation on the actor to be killed")
            # at once: the source is built on this node already, and its whole evaluation can take ~1 s
            ray.kill(target.actor, no_restart=True)
            v = await asyncio.wait_for(job, 300)
            assert v.correct, v.feedback
            assert judge.stats()["reruns"] == s["reruns"] + 1 and judge.stats()["evaluations"] == 1 + 4 + 4 + 3 + 1
            await _until(lambda: newcomer.node_id in judge.nodes and judge.nodes[newcomer.node_id].state == "ready"
                         and judge.nodes[newcomer.node_id] is not target, 180, "a new judge on the node")
        finally:
            await judge.aclose()

    asyncio.run(run())


@slow
def test_no_node_for_the_device_is_a_clear_verdict_not_a_hang(cluster, cache_dir):
    async def run():
        # a CUDA judge on a cluster without GPUs: no node is eligible
        judge = ClusterJudge(JudgeConfig(device="cuda", cache_dir=cache_dir), TaskSet(), refresh_s=0.2,
                             no_node_wait_s=2.0)
        judge.start_ahead()
        try:
            t0 = time.monotonic()
            v = await judge.evaluate(TASK, submission("relu_ok.py"))
            assert time.monotonic() - t0 < 10
            assert v.error_kind == "internal" and not v.correct
            assert "No judge node" in v.feedback and "no node for the cuda device" in v.feedback
            assert judge.stats()["no_node"] == 1
        finally:
            await judge.aclose()

    asyncio.run(run())


@slow
def test_the_front_doors_screen_leaves_its_event_loop_free(cluster, cache_dir, monkeypatch):
    """The front door screens text the submission controls (most of a second, built to be slow) before
    any node sees it: the other sessions' messages must not wait on it. Here a screen that finishes
    only once the event loop has run something else."""
    from kernel_env.cluster import router

    stand_in, screening, loop_ran = waits_for_the_loop(router.screen)
    monkeypatch.setattr(router, "screen", stand_in)

    async def run():
        judge = ClusterJudge(_config(cache_dir), TaskSet(), refresh_s=0.2)
        try:
            evaluation = asyncio.create_task(judge.evaluate(TASK, "class ModelNew(:\n"))
            while not screening.is_set():
                await asyncio.sleep(0.01)
            loop_ran.set()  # this coroutine ran while the screen was under way
            return await evaluation
        finally:
            await judge.aclose()

    v = asyncio.run(run())
    assert (v.stage, v.error_kind) == ("format", "syntax_error")


def test_routing_prefers_the_least_queued_node_then_the_task_s_last_node():
    from kernel_env.cluster.router import Node

    judge = ClusterJudge(JudgeConfig(device="cpu"), TaskSet())  # no cluster needed to route
    a, b = Node("a", "a:1", state="ready"), Node("b", "b:1", state="ready", devices=2)
    judge.nodes = {"a": a, "b": b}
    assert judge._pick(TASK).node_id == "a"  # tie on load: the one with fewer verdicts, then the first
    judge._affinity[TASK] = "b"
    a.inflight, b.inflight = 0, 2  # b: 2 queued on 2 GPUs = 1 per GPU, within one of a's 0
    assert judge._pick(TASK).node_id == "b"
    b.inflight = 3  # 1.5 per GPU: too far ahead, the least queued wins
    assert judge._pick(TASK).node_id == "a"
    b.others, b.inflight = 4, 0  # other front doors' evaluations count too
    assert judge._pick("level1/6_Small_Tanh").node_id == "a"
    a.state = "lost"
    assert judge._pick(TASK).node_id == "b"
    b.state = "starting"
    assert judge._pick(TASK) is None


def _running_candidates(marker: str) -> list[str]:
    """Candidate processes anywhere on this machine that hold a submission with `marker` in it (the
    node judges' are children of Ray's workers, not of a server; other judges may run here too)."""
    import re
    from pathlib import Path

    from test_server import _proc_table
    out = []
    for _, cmd in _proc_table().values():
        m = re.search(r"kernel_env\.candidate\.runner (?:run|build|compile) (\S+)", cmd)
        try:
            if m and marker in (Path(m.group(1)) / "submission.py").read_text():
                out.append(cmd)
        except OSError:  # not there (yet, or any more)
            continue
    return out


@slow
def test_front_doors_share_the_node_judges_and_a_client_that_leaves_cancels_its_evaluation(cluster, cache_dir,
                                                                                           tmp_path):
    from test_server import Server, ask, client, raw_ws, wait_for

    from kernel_env import KernelAction

    flags = ("--ray", cluster.address, "--cache-dir", str(cache_dir), "--max-turns", "1", "--timing-budget-s", "0.3",
             "--build-slots", "1", "--no-precompiled-header")
    doors = [Server(tmp_path / f"door{i}", *flags) for i in range(2)]
    try:
        for d in doors:
            d.wait_ready(180)

        def judges(d):
            nodes = d.stats()["judge"]["nodes"]
            return {n["address"]: n["pid"] for n in nodes.values() if n["state"] == "ready"}

        assert wait_for(lambda: len(judges(doors[0])) == 2 and len(judges(doors[1])) == 2, 180), \
            [d.stats()["judge"] for d in doors]
        # one judge per node, whichever front door placed it
        assert judges(doors[0]) == judges(doors[1])

        with client(doors[1]) as env:
            env.reset(task_id=TASK, split="train")
            obs = env.step(KernelAction(code=submission("relu_ok.py"))).observation
            assert obs.correct and obs.stage == "timed", obs.feedback

        # a client that leaves mid-evaluation: the node's judge kills the evaluation's processes
        marker = f"# this test's hanging submission {time.time_ns()}"
        with raw_ws(doors[0]) as ws:
            assert ask(ws, {"type": "reset", "data": {"task_id": TASK, "split": "train"}})["type"] == "observation"
            ws.send(json.dumps({"type": "step", "data": {"code": submission("relu_hang.py") + marker + "\n"}}))
            assert wait_for(lambda: any("runner run" in c for c in _running_candidates(marker)), 240, 0.5), \
                doors[0].stats()["judge"]
        assert wait_for(lambda: not _running_candidates(marker), 30), _running_candidates(marker)
        assert wait_for(lambda: doors[0].stats()["env"]["steps_cancelled"] == 1, 20)
        assert wait_for(lambda: all(n["judge"].get("running") == 0 for n in doors[0].stats()["judge"]["nodes"].values()
                                    if n["state"] == "ready"), 20), doors[0].stats()["judge"]
    finally:
        for d in doors:
            d.stop()


def test_an_unreachable_head_is_one_line_not_minutes_of_retries():
    import socket

    from kernel_env.cluster import _check_reachable

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(SystemExit, match=f"--ray 127.0.0.1:{port}: cannot reach the Ray head"):
        _check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 5
    _check_reachable("auto")  # resolved by Ray itself
    _check_reachable("ray://head:10001")
