"""Held-out multi-turn evaluation of a model on kernel_env (a script: its library is kernel_env.agent).

    python baseline_eval.py --env_url local --policy openai --base_url http://localhost:8001/v1 \\
        --model Qwen/Qwen2.5-Coder-7B-Instruct --out runs/baseline
    python baseline_eval.py --env_url http://EVAL_BOX:8000 --policy transformers --model ./my-checkpoint
    python baseline_eval.py --env_url http://BOX_A:8000,http://BOX_B:8000 --policy openai ...
    python baseline_eval.py --env_url local --policy vllm --model ./my-checkpoint --samples 4
    python baseline_eval.py --env_url local --policy replay --solutions DIR --split train

An episode is what training does (grpo_kernel.py; kernel_env.agent.episodes.run_episode): reset one env session on a task (its problem is
the first user message), then model turn -> `extract_code` -> env.step -> `feedback_message` as the
next user turn, until the env ends the episode (its max turns) or the next turn would not fit the
token budget. Episodes run concurrently (`--concurrency`); a progress bar shows them finish.
Outputs in `--out`: `episodes.jsonl` (one record per episode, the same format as the trainer's
`rollouts-rank*.jsonl`), `summary.json` (`summarize` of all episodes, plus per task), and a table
on stdout with the field's numbers under it (fast_p, geometric mean speedup, kernel share, pass@k:
docs/metrics.md).

Policies (kernel_env/agent/policies.py says more): `openai` (any OpenAI-compatible chat endpoint:
`--base_url`, `--model`, key from `--api_key` or $OPENAI_API_KEY), `vllm` (a local vllm.LLM),
`transformers` (local `generate`, batched across episodes), `replay` (files from `--solutions DIR`:
`DIR/level1__1_Small_ReLU.py` for turn 1, `DIR/level1__1_Small_ReLU.turn2.py` for turn 2, ...). By
default replay runs only the tasks of the split with a turn-1 file; with `--tasks` a listed task
without a file is submitted empty code (a format failure).

`--env_url local` starts an embedded env server (`python -m kernel_env.server.app` on a free
loopback port, CPU device unless `--local_env_device`), stopped at exit. A comma-separated list of
URLs names several front doors of one judge cluster: episode j starts at door j mod their number,
and an episode whose door fails is replayed on the next one.

Infrastructure failures (server down, timeouts, the judge failing internally) are retried with a
fresh session that replays the episode's earlier submissions, then fail the run: they are never
scored as a wrong kernel.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from kernel_env.agent.local_server import TOKEN_ENV, LocalEnvServer, exit_on_sigterm
from kernel_env.agent.episodes import episodes_per_door, run_episode
from kernel_env.agent.metrics import counts_correct, format_headline, format_table, per_task, summarize
from kernel_env.agent.policies import make_policy
from kernel_env.agent.session import describe_doors, parse_env_urls
from kernel_env.agent.turns import extract_code, feedback_message
from kernel_env.tasks import split_task_ids

# what the seed's grpo_kernel.py imports from here
__all__ = ["extract_code", "feedback_message", "split_task_ids", "summarize"]

log = logging.getLogger("baseline_eval")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="baseline_eval.py", description="Held-out multi-turn evaluation on kernel_env.",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--env_url", default="local",
                   help="kernel_env server URL, several comma-separated (front doors of one judge cluster: "
                        "episodes are spread over them, a failed door's episodes move to the next), "
                        "or 'local' to start one here")
    p.add_argument("--env_token", default=None, help=f"server token, the same for every door (default ${TOKEN_ENV})")
    p.add_argument("--local_env_device", default="cpu", choices=("cpu", "cuda", "auto"),
                   help="device of the embedded server (--env_url local)")
    p.add_argument("--local_env_args", default="", help="extra flags for the embedded server, e.g. '--max-turns 2'")
    p.add_argument("--policy", default="openai", choices=("openai", "vllm", "transformers", "replay"))
    p.add_argument("--model", default="", help="model name (openai) or local path / id (vllm, transformers)")
    p.add_argument("--base_url", default=os.environ.get("OPENAI_BASE_URL", ""), help="OpenAI-compatible /v1 URL")
    p.add_argument("--api_key", default="", help="API key (default $OPENAI_API_KEY)")
    p.add_argument("--solutions", default="", help="replay: folder of solution files (see --help text above)")
    p.add_argument("--split", default="eval", choices=("eval", "train"))
    p.add_argument("--levels", type=int, nargs="+", default=[1])
    p.add_argument("--kernelbench_dir", default=os.environ.get("KERNELBENCH_DIR", ""))
    p.add_argument("--tasks", nargs="*", default=None, help="only these task ids (default: the whole split)")
    p.add_argument("--max_tasks", type=int, default=0, help="cap the number of tasks (0 = all)")
    p.add_argument("--samples", type=int, default=1, help="episodes per task")
    p.add_argument("--concurrency", type=int, default=16, help="episodes in flight")
    p.add_argument("--max_tokens", type=int, default=2048, help="per model turn (training: max_completion_length)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top_p", type=float, default=1.0)
    p.add_argument("--enable_thinking", default=None, action=argparse.BooleanOptionalAction,
                   help="Qwen3-style chat template switch (openai: sent only when given)")
    p.add_argument("--max_context", type=int, default=0,
                   help="episode token budget for local policies (0 = the model's context)")
    p.add_argument("--batch_size", type=int, default=8, help="transformers: turns generated together")
    p.add_argument("--device", default="auto", help="transformers: cpu, cuda, cuda:1, auto")
    p.add_argument("--dtype", default="auto", help="transformers: auto, bfloat16, float32")
    p.add_argument("--tensor_parallel_size", type=int, default=1, help="vllm")
    p.add_argument("--return_mode", default="discounted", choices=("discounted", "best"))
    p.add_argument("--gamma", type=float, default=0.9)
    p.add_argument("--env_timeout_s", type=float, default=900.0)
    p.add_argument("--env_retries", type=int, default=3)
    p.add_argument("--out", default="runs/baseline", help="folder for episodes.jsonl and summary.json")
    p.add_argument("--no_progress", action="store_true", help="log lines instead of a progress bar")
    return p


def main(argv=None) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        urls = parse_env_urls(a.env_url)
    except ValueError as e:
        parser.error(str(e))
    exit_on_sigterm()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    policy = make_policy(a)

    tasks = list(a.tasks) if a.tasks else split_task_ids(a.split, a.levels, a.kernelbench_dir)
    if a.policy == "replay" and not a.tasks:
        missing = [t for t in tasks if not policy.has_task(t)]
        if missing:
            log.info("replay: %d task(s) of the split have no solution file, skipped: %s", len(missing),
                     ", ".join(missing[:8]))
        tasks = [t for t in tasks if policy.has_task(t)]
    if a.max_tasks:
        tasks = tasks[: a.max_tasks]
    if not tasks:
        raise SystemExit("no tasks to evaluate")

    server = None
    token = a.env_token or os.environ.get(TOKEN_ENV) or None
    if urls == ["local"]:
        server = LocalEnvServer(a.local_env_device, a.local_env_args.split(), out / "env_server.log",
                                a.kernelbench_dir).start()
        urls, token = [server.url], server.token
    jobs = [(t, k) for k in range(a.samples) for t in tasks]
    log.info("%d episodes (%d tasks x %d samples), policy %s, env %s", len(jobs), len(tasks), a.samples, a.policy,
             describe_doors(urls))
    episodes: list[dict] = []
    t0 = time.monotonic()
    try:
        with open(out / "episodes.jsonl", "w") as f, ThreadPoolExecutor(max_workers=max(1, a.concurrency)) as pool:
            # job j starts at door j mod n: every door gets an even share (the doors share one judge,
            # so which task goes to which door does not matter)
            futs = [pool.submit(run_episode, policy, urls, t, a.split, token=token, env_timeout_s=a.env_timeout_s,
                                env_retries=a.env_retries, return_mode=a.return_mode, gamma=a.gamma, sample=k,
                                first_door=j)
                    for j, (t, k) in enumerate(jobs)]
            bar = None
            if not a.no_progress:
                try:
                    from tqdm.auto import tqdm
                    bar = tqdm(total=len(futs), desc="episodes", unit="ep")
                except ImportError:
                    bar = None
            last_log = time.monotonic()
            for fut in as_completed(futs):
                if fut.exception() is not None:
                    # an EnvFailure or endpoint failure stops the run here, loudly: the episodes not
                    # begun are dropped, the running ones end (the pool's exit waits for them)
                    pool.shutdown(wait=False, cancel_futures=True)
                ep = fut.result()
                episodes.append(ep)
                f.write(json.dumps(ep) + "\n")
                f.flush()
                n_ok = sum(1 for e in episodes if counts_correct(e))
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(correct=n_ok)
                elif time.monotonic() - last_log > 10 or len(episodes) == len(futs):
                    log.info("%d/%d episodes done, %d correct", len(episodes), len(futs), n_ok)
                    last_log = time.monotonic()
            if bar is not None:
                bar.close()
        if len(urls) > 1:
            log.info("episodes per front door (where each ended): %s", episodes_per_door(episodes, urls))
    finally:
        policy.close()
        if server is not None:
            server.stop()
    summary = summarize(episodes)
    tasks_summary = per_task(episodes)
    result = {**summary, "policy": a.policy, "model": a.model or a.solutions, "split": a.split,
              "levels": a.levels, "samples": a.samples, "max_tokens": a.max_tokens, "temperature": a.temperature,
              "seconds": round(time.monotonic() - t0, 1), "tasks": tasks_summary}
    (out / "summary.json").write_text(json.dumps(result, indent=2))
    print(format_table(summary, tasks_summary))
    print(format_headline(summary))
    print(f"\nepisodes: {out / 'episodes.jsonl'}\nsummary:  {out / 'summary.json'}")
    return result


if __name__ == "__main__":
    main()
