"""The env calls of one GRPO step as each training loop makes them, side by side on the real server.

    python -m bench.bench_loops [--device cpu|cuda] [--episodes 8] [--rounds 3] [--server-args "..."] [--out F.json]

A step is `--episodes` one-turn episodes on the demo corpus's train tasks (kernel_env/data/demo_corpus,
or demo_corpus_cuda on cuda): their fast, slow and wrong answers in turn, each made a text of its own
by a comment, as a policy's samples are (a build process each; the shared kernel is loaded, not
compiled again). The two ways of making the step's env calls:

- `tool_loop`: TRL's tool loop (trl 1.16 `GRPOTrainer._tool_call_loop`) calls each rollout's tools in
  turn, a `for` loop over rollouts (async tools are gathered within one rollout only): a
  `KernelToolEnv` per rollout, `reset` for each, then `submit_kernel` one rollout after the other.
- `rollout_func`: grpo_kernel.py's rollout: a session per episode, reset, then every episode's step
  at once, a thread per session (its ThreadPoolExecutor).

One warm-up step first (the kernel's build, the tasks' reference profiles), then the rounds, the two
loops alternating. Generation is not part of it: both loops generate the same tokens; what differs is
how long the step waits for the judge. Prints each step's wall seconds and the ratio of the medians.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernel_env.agent.local_server import LocalEnvServer
from kernel_env.agent.session import EnvSession
from kernel_env.agent.trl_environment import KernelToolEnv
from kernel_env.agent.turns import turn_record
from kernel_env.agent.warm_start import corpus_dir_for, load_corpus

TRAIN_TASKS = ("level2/4_Small_Scale_Shift_ReLU", "level2/6_Small_Bias_ReLU_Scale")


def step_codes(device: str, episodes: int, tag: str) -> list[tuple[str, str]]:
    """(task, code) for one step: the train tasks' answers in turn, each text unique to this step."""
    subs = load_corpus(corpus_dir_for(device), TRAIN_TASKS)
    return [(s.task_id, f"{s.code}\n# sample {tag}-{i}\n") for i, s in
            ((i, subs[i % len(subs)]) for i in range(episodes))]


def tool_loop(url: str, token: str, codes: list[tuple[str, str]]) -> list[dict]:
    envs = [KernelToolEnv(url, token=token) for _ in codes]
    for env, (task, _) in zip(envs, codes):
        env.reset(task_id=task, split="train")
    for env, (_, code) in zip(envs, codes):  # one rollout after the other
        env.submit_kernel(code)
    return [env.episode["turns"][-1] for env in envs]  # their sessions close with them


def rollout_func(url: str, token: str, codes: list[tuple[str, str]]) -> list[dict]:
    sessions = [EnvSession(url, task, "train", token=token) for task, _ in codes]
    with ThreadPoolExecutor(max_workers=len(sessions)) as pool:
        list(pool.map(lambda s: s.reset(), sessions))
        results = list(pool.map(lambda s, c: s.step(c[1]), sessions, codes))
    for s in sessions:
        s.close()
    return [turn_record(r, code=c, truncated=False, completion_tokens=None) for r, (_, c) in zip(results, codes)]


LOOPS = {"tool_loop": tool_loop, "rollout_func": rollout_func}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-args", default="", help="more flags for the env server (e.g. the demo's CPU timing)")
    ap.add_argument("--out", default="")
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench_loops_"))
    server = LocalEnvServer(a.device, ["--max-turns", "1", "--stats-interval-s", "0", *shlex.split(a.server_args)],
                            work / "server.log", ready_timeout_s=180).start()
    rows = []
    try:
        t = time.monotonic()
        rollout_func(server.url, server.token, step_codes(a.device, a.episodes, "warm"))
        print(f"warm-up step (build, reference profiles): {time.monotonic() - t:.1f} s", flush=True)
        for r in range(a.rounds):
            for name, loop in LOOPS.items():
                t = time.monotonic()
                turns = loop(server.url, server.token, step_codes(a.device, a.episodes, f"{name}-{r}"))
                wall = time.monotonic() - t
                stages = sorted({str(x.get("stage")) for x in turns})
                rows.append({"loop": name, "round": r, "wall_s": round(wall, 2), "stages": stages})
                print(f"round {r} {name:12s} {wall:7.1f} s  ({a.episodes} episodes; stages {stages})", flush=True)
    finally:
        server.stop()
    med = {n: statistics.median(x["wall_s"] for x in rows if x["loop"] == n) for n in LOOPS}
    ratio = med["tool_loop"] / med["rollout_func"] if med["rollout_func"] else float("nan")
    print(f"median step: tool_loop {med['tool_loop']:.1f} s, rollout_func {med['rollout_func']:.1f} s: "
          f"the tool loop's step takes {ratio:.2f}x as long ({a.device}, {a.episodes} episodes)")
    if a.out:
        Path(a.out).write_text(json.dumps({"device": a.device, "episodes": a.episodes, "rows": rows,
                                           "median_s": med, "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
