"""TRL's own tool loop (GRPOTrainer's environment_factory) driving kernel_env: the KernelToolEnv
contract against a real env server on loopback, then a real 2-step GRPO run of
examples/trl_tool_loop.py with a tiny local model taught to call the submit_kernel tool
(kernel_env.agent.canned), so that its tool calls reach the judge."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel_env.agent import local_server  # noqa: E402
from kernel_env.agent.metrics import episode_return  # noqa: E402

pytestmark = pytest.mark.slow
TRAIN = ["level1/1_Small_ReLU", "level1/6_Small_Tanh"]
MAX_TURNS = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tool_server")
    srv = local_server.LocalEnvServer("cpu", ["--max-turns", str(MAX_TURNS), "--stats-interval-s", "0"],
                                      root / "server.log").start()
    yield srv
    srv.stop()


def test_tool_env_contract(server):
    from transformers.utils import get_json_schema
    from kernel_env.agent.trl_environment import EPISODE_OVER, KernelToolEnv, tool_dataset

    env = KernelToolEnv(server.url, token=server.token, retries=0, gamma=0.5)
    # TRL turns the public methods other than reset/get_reward into tools: only submit_kernel
    import inspect
    tools = [n for n, _ in inspect.getmembers(KernelToolEnv, inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    assert tools == ["submit_kernel"]
    schema = get_json_schema(env.submit_kernel)["function"]
    assert schema["name"] == "submit_kernel" and schema["parameters"]["required"] == ["code"]
    assert schema["parameters"]["properties"]["code"]["type"] == "string" and "ModelNew" in schema["description"] + \
        schema["parameters"]["properties"]["code"]["description"]

    row = tool_dataset([TRAIN[0]])[0]
    problem = env.reset(**row)
    assert f"Task {TRAIN[0]}" in problem and env.episode["split"] == "train"
    first = env.submit_kernel("import torch\nx = 1\n")
    assert "Attempt 1 of 2" in first and "ModelNew" in first
    second = env.submit_kernel("not python at all (")
    assert "Attempt 2 of 2" in second and env.episode["done"]
    assert env.submit_kernel("import torch\n") == EPISODE_OVER  # not judged: the env's turn limit holds
    assert len(env.episode["turns"]) == 2
    rewards = [t["reward"] for t in env.episode["turns"]]
    assert env.get_reward() == episode_return(rewards, "discounted", 0.5)
    # the pooled instance is reused: a reset opens a fresh episode on the row's task and split
    problem = env.reset(task_id=TRAIN[1], split="train", prompt=row["prompt"])
    assert f"Task {TRAIN[1]}" in problem and env.episode["turns"] == [] and env.get_reward() == 0.0
    with pytest.raises(ValueError, match="task_id"):
        env.reset(prompt=row["prompt"])
    env._close()
