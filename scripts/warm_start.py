"""Warm-start a small model on the demo corpus with TRL's SFTTrainer (kernel_env/agent/warm_start.py).

    python scripts/warm_start.py MODEL_DIR OUT_DIR [--epochs 40] [--learning-rate 5e-3] [--max-turns 1]
"""
from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

from kernel_env.agent.warm_start import corpus_dir_for, corpus_tasks, fetch_env_prompts, variant_shares, warm_start


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", help="the model to start from (e.g. from scripts/make_tiny_model.py)")
    p.add_argument("out_dir")
    p.add_argument("--epochs", type=float, default=40)
    p.add_argument("--learning-rate", type=float, default=5e-3)
    p.add_argument("--max-turns", type=int, default=1, help="as the env server will say in its prompt")
    p.add_argument("--prompts-per-answer", type=int, default=6,
                   help="prompts per task (without and with made-up timing numbers), each with every answer")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", nargs="*", default=None, help="only these corpus tasks (default: all)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="the env server's device: its corpus (C++ or CUDA answers) and prompts; also where SFT runs")
    p.add_argument("--env-prompts", action="store_true",
                   help="train on the prompt an env server on this machine sends too (an embedded one, started "
                        "with --env-args; it keeps the tasks' profiles in $KERNEL_ENV_CACHE, which later servers share)")
    p.add_argument("--env-args", default="", help="the embedded env server's flags (kernel-env serve's)")
    a = p.parse_args(argv)
    tasks = a.tasks or corpus_tasks(corpus_dir_for(a.device))
    env_prompts = None
    if a.env_prompts:
        t0 = time.monotonic()
        env_prompts = fetch_env_prompts(tasks, a.device, shlex.split(a.env_args), Path(a.out_dir) / "env_server.log")
        print(f"warm start: the env's prompts for {len(env_prompts)} tasks in {time.monotonic() - t0:.0f} s")
    r = warm_start(a.model_dir, a.out_dir, epochs=a.epochs, learning_rate=a.learning_rate, max_turns=a.max_turns,
                   prompts_per_answer=a.prompts_per_answer, batch_size=a.batch_size, seed=a.seed, tasks=a.tasks,
                   device=a.device, env_prompts=env_prompts)
    print(f"warm start: final loss {r['loss']:.4f} after {r['seconds']:.0f} s; model written to {a.out_dir}")
    for task in tasks:  # what GRPO starts from: the mix of variants the model answers with
        shares = variant_shares(a.out_dir, task, a.max_turns, a.device)
        print(f"  {task}: " + "  ".join(f"{v} {100 * x:.0f}%" for v, x in sorted(shares.items())))


if __name__ == "__main__":
    main()
