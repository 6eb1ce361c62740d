"""GRPO on kernel_env through TRL's own multi-turn tool loop (GRPOTrainer's `environment_factory`).

    python examples/trl_tool_loop.py --model_name_or_path Qwen/Qwen2.5-Coder-7B-Instruct \\
        --env_url http://EVAL_BOX:8000 --num_generations 8 --max_tool_calling_iterations 4 \\
        --max_completion_length 4096 --output_dir runs/tool-loop

Each rollout is one env episode (kernel_env.agent.trl_environment.KernelToolEnv): TRL calls
reset(task_id=...) and puts the task's problem in the prompt, the model calls the `submit_kernel`
tool, the judge's feedback comes back as the tool message, and get_reward() scores the episode.
TRL owns the loop, the masks (tool results get no gradient) and the budget: `max_completion_length`
covers the whole episode (every turn and tool result), `max_tool_calling_iterations` caps the tool
calls. The model's chat template must render and parse tool calls (Qwen2.5/Qwen3-style);
kernel_env.agent.tiny_model.build_with_tools makes a tiny one for CPU runs.

The flags are grpo_kernel.py's (GRPOConfig, ModelConfig and its KernelArgs: --env_url, local
server, --levels, --return_mode, --gamma, --enable_thinking, --env_* retries); those of its own
rollout (--max_episode_tokens, --env_concurrency, --max_eval_tasks, --task_file) do not apply here.
When to use which loop: docs/training.md.
"""
import logging
import os
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser, get_peft_config  # noqa: E402

import grpo_kernel as gk  # noqa: E402  (its flags, env start-up and tracking set-up)
from kernel_env.agent.local_server import exit_on_sigterm  # noqa: E402
from kernel_env.agent.trl_environment import KernelToolEnv, log_kernel_metrics, tool_dataset  # noqa: E402
from kernel_env.tasks import split_task_ids  # noqa: E402

log = logging.getLogger("trl_tool_loop")


def main(argv=None):
    args, cfg, model_args = TrlParser((gk.KernelArgs, GRPOConfig, ModelConfig)).parse_args_and_config(args=argv)
    if not model_args.model_name_or_path:
        raise SystemExit("--model_name_or_path is required (its chat template must render tool calls)")
    if cfg.max_tool_calling_iterations is None:
        log.warning("--max_tool_calling_iterations is not set: episodes end only at max_completion_length")
    cfg.model_init_kwargs = gk.model_init_kwargs(cfg, model_args)
    cfg.chat_template_kwargs = gk.chat_template_kwargs(args, cfg)
    train_ids = split_task_ids("train", args.levels, args.kernelbench_dir)
    eval_ids = split_task_ids("eval", args.levels, args.kernelbench_dir)
    if not train_ids:
        raise SystemExit("no training tasks (check --levels / --kernelbench_dir)")
    os.makedirs(cfg.output_dir, exist_ok=True)
    gk.setup_tracking(cfg)
    exit_on_sigterm()
    env_urls, env_token, server = gk.start_env(args, cfg.output_dir)
    try:
        trainer = GRPOTrainer(
            model=model_args.model_name_or_path,
            reward_funcs=[log_kernel_metrics],  # logs kernel/*; the reward is KernelToolEnv.get_reward
            args=cfg,
            train_dataset=tool_dataset(train_ids, split="train"),
            eval_dataset=tool_dataset(eval_ids, split="eval") if cfg.eval_strategy != "no" and eval_ids else None,
            peft_config=get_peft_config(model_args),
            environment_factory=partial(KernelToolEnv, env_urls, token=env_token, return_mode=args.return_mode,
                                        gamma=args.gamma, timeout_s=args.env_timeout_s, retries=args.env_retries,
                                        backoff_s=args.env_retry_backoff_s),
        )
        trainer.train(resume_from_checkpoint=cfg.resume_from_checkpoint)
        trainer.save_model(cfg.output_dir)
        trainer.save_state()
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    main()
