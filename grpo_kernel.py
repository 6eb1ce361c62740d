"""GRPO on kernel_env: TRL GRPOTrainer + multi-turn rollout_func over the KernelEnv client.

    accelerate launch grpo_kernel.py --model_name_or_path Qwen/Qwen2.5-Coder-7B-Instruct \\
        --env_url http://EVAL_BOX:8000 --num_generations 8 --use_vllm --output_dir runs/grpo
    python grpo_kernel.py --model_name_or_path runs/tiny-model --env_url local --output_dir runs/grpo \\
        --max_steps 4 --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 64

All GRPOConfig / ModelConfig fields are CLI flags (TrlParser; `--config FILE.yaml` too). Dataset rows
are KernelBench task ids; rollout_func resets one env session per row (TRL already repeats each row
`num_generations` times = one GRPO group per task), then alternates model turn -> env.step ->
feedback turn until the env ends the episode. The whole episode is one completion: model tokens
train (env_mask=1), feedback tokens don't (env_mask=0). Reward = discounted sum of per-turn env
rewards, or best turn. Held-out eval = TRL's own eval loop over eval-split task ids
(`--eval_strategy steps --eval_steps N`).

What this adds to the seed:
- Ranks stay in lockstep: with more than one process, every rank makes the same number of
  `_generate_single_turn` calls, each with its full row count; rows whose episode has ended take
  part with a short dummy prompt and their output is dropped (vLLM server mode and ZeRO-3 gather
  across ranks inside that call and deadlock otherwise). The number of rounds is the max of live
  episodes over ranks (a gather per round).
- Token budget: an episode (prompt + every turn + feedback) never exceeds `--max_episode_tokens`
  (0 = the model's context, capped by `--vllm_max_model_length`). A turn starts only if a whole
  `max_completion_length` answer still fits; otherwise the episode ends there ("budget"). A task
  whose prompt alone cannot fit gets a masked one-token completion (no gradient) and a warning.
- Env calls go through kernel_env.agent.session.EnvSession: connection errors, timeouts, a full server and
  judge-internal verdicts are retried with a fresh session that replays the episode, then the run
  stops with EnvFailure. An infrastructure failure is never scored as a reward of 0.
- `--env_url URL,URL,...`: several front doors of one judge cluster (one token for all). Episodes
  are spread over them round-robin (the episodes of one generation call over all ranks take
  consecutive doors), and an episode whose door fails is replayed on the next door (EnvSession), so a
  lost door costs replays, not the run.
- `--env_url local` (the default) starts an embedded env server for the run (a subprocess of
  `python -m kernel_env.server.app` on a free loopback port, `--local_env_device` cpu unless told
  otherwise, `--local_env_args` for its other flags, its log in OUTPUT_DIR/env_server.log), stopped
  at exit. With several processes, rank 0 starts it and the URL is broadcast (single node only).
- Files in OUTPUT_DIR: rollouts-rank{R}.jsonl (every episode, train and eval, the same records as
  baseline_eval's episodes.jsonl), suspicious.jsonl (flagged turns with their code, written by
  rank 0 from all ranks' episodes), checkpoints; `python report.py OUTPUT_DIR` renders them.
- Resume: the newest OUTPUT_DIR/checkpoint-* (or `--resume_from_checkpoint PATH`) unless `--no_resume`.
- kernel/* metrics are logged through TRL's public `log_metric` (from the reward function), so every
  `--report_to` tracker gets them; `--report_to trackio` logs locally, to $TRACKIO_DIR (a Hub Space
  only with `--trackio_space_id`); `--report_to tensorboard,trackio` for both.
- Chat-template options: `--chat_template_kwargs '{"enable_thinking": true}'` (GRPOConfig) or the seed's
  `--enable_thinking`, which sets the same key; the rollout renders prompts and feedback with them.
- TRL's private API is used in one place, kernel_env/agent/trl_compat.py, which checks the TRL version.
  TRL's own tool loop (`environment_factory`) drives the env too: examples/trl_tool_loop.py.
"""
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from datasets import Dataset
from transformers.trainer_utils import get_last_checkpoint
from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser, get_peft_config

from kernel_env.agent.episodes import episodes_per_door
from kernel_env.agent.local_server import LocalEnvServer, exit_on_sigterm
from kernel_env.agent.metrics import episode_return, flagged_turns
from kernel_env.agent.session import EnvSession, describe_doors, parse_env_urls
from kernel_env.agent.trl_compat import check_trl_version, generate_single_turn
from kernel_env.agent.trl_environment import kernel_metrics
from kernel_env.agent.turns import extract_code, feedback_message, turn_record
from kernel_env.tasks import split_task_ids

log = logging.getLogger("grpo_kernel")

check_trl_version()

DUMMY_USER_MESSAGE = "Reply with only the word OK."  # rows of finished episodes, kept in lockstep


@dataclass
class KernelArgs:
    env_url: str = field(default="local", metadata={
        "help": "kernel_env server (on eval GPUs); several comma-separated (front doors of one judge cluster: "
                "episodes are spread over them, a failed door's episodes move to the next); or 'local' to "
                "start one for this run"})
    env_token: str = field(default="", metadata={
        "help": "server token, the same for every door (default $KERNEL_ENV_TOKEN)"})
    local_env_device: str = field(default="cpu", metadata={
        "help": "device of the local server (--env_url local): cpu, cuda or auto"})
    local_env_args: str = field(default="", metadata={
        "help": "extra flags for the local server, e.g. '--max-turns 2 --gpus 1'"})
    levels: list[int] = field(default_factory=lambda: [1], metadata={"help": "KernelBench levels to use"})
    kernelbench_dir: str = field(default=os.environ.get("KERNELBENCH_DIR", ""), metadata={
        "help": "local copy, for task ids (default: the small tasks shipped with kernel_env)"})
    return_mode: str = field(default="discounted", metadata={"help": "discounted | best"})
    enable_thinking: bool = field(default=False, metadata={
        "help": "Qwen3-style in the chat template (baseline: off); sets chat_template_kwargs' enable_thinking"})
    gamma: float = field(default=0.9, metadata={"help": "discount over turns (return_mode=discounted)"})
    env_timeout_s: float = field(default=900.0, metadata={"help": "per env message; covers GPU-pool queueing"})
    env_retries: int = field(default=3, metadata={"help": "fresh-session retries of a failed env call, then fail"})
    env_retry_backoff_s: float = field(default=5.0, metadata={"help": "first retry wait (doubles each retry)"})
    env_concurrency: int = field(default=0, metadata={"help": "env calls in flight per rank (0 = one per episode)"})
    max_episode_tokens: int = field(default=0, metadata={
        "help": "token budget of one episode: prompt + all turns + feedback (0 = the model's context)"})
    max_eval_tasks: int = field(default=0, metadata={"help": "cap held-out tasks per eval (0 = all)"})
    task_file: str = field(default="", metadata={"help": "JSON list of training task ids (curriculum); default: whole train split"})
    no_resume: bool = field(default=False, metadata={"help": "start fresh even if OUTPUT_DIR has checkpoints"})


def text_tokenizer(processing_class):
    """VLM checkpoints (e.g. Qwen3.5) load a Processor: its chat template returns nested lists and it
    has no eos_token_id. Rollouts are text-only, so use the wrapped tokenizer."""
    return getattr(processing_class, "tokenizer", processing_class)


def _defang(tok, text: str) -> str:
    """Special-token strings in env text (e.g. echoed from code) must not tokenize as special tokens."""
    for s in getattr(tok, "all_special_tokens", []):
        if len(s) > 1 and s in text:
            text = text.replace(s, s[0] + "\u200b" + s[1:])
    return text


def feedback_ids(tok, text: str, enable_thinking: bool = False, template_kwargs: dict | None = None) -> list:
    """Tokens after an assistant turn's EOS: the feedback user turn + next assistant header.

    Cut after the assistant turn's EOS (second-to-last EOS; a default system prompt may add one in
    front) rather than diffing two renders: templates such as Qwen3.5's re-render earlier assistant
    turns differently (they drop the empty think block), so the conversation is not prefix-stable.
    The rollout stitches the model's own tokens, so only this suffix matters. The text is defanged
    first so that no special token inside it can move the cut. `template_kwargs` (GRPOConfig's
    chat_template_kwargs) go to the chat template and override `enable_thinking`.
    """
    msgs = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"},
            {"role": "user", "content": _defang(tok, text)}]
    # templates without the switch ignore it
    kw = {"enable_thinking": enable_thinking, **(template_kwargs or {})}
    full = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False, **kw)
    eos = [i for i, t in enumerate(full) if t == tok.eos_token_id]
    if len(eos) < 2:
        raise ValueError("chat template: expected the assistant turn to end with the tokenizer's EOS token")
    return full[eos[-2] + 1:]


def chat_prompt_ids(tok, text: str, enable_thinking: bool = False, template_kwargs: dict | None = None) -> list:
    kw = {"enable_thinking": enable_thinking, **(template_kwargs or {})}
    return list(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False, **kw))


def chat_template_kwargs(args: KernelArgs, cfg) -> dict:
    """The chat template's options: GRPOConfig's chat_template_kwargs, with `--enable_thinking` mapped onto
    its `enable_thinking` key. enable_thinking is always passed (False unless asked for), because
    Qwen3-style templates think by default and the baseline is off. A conflict is an error."""
    kw = dict(getattr(cfg, "chat_template_kwargs", None) or {})
    if args.enable_thinking and kw.get("enable_thinking") is False:
        raise SystemExit("--enable_thinking contradicts --chat_template_kwargs' enable_thinking=false: give one")
    kw["enable_thinking"] = bool(args.enable_thinking or kw.get("enable_thinking", False))
    return kw


def episode_budget(args: KernelArgs, trainer) -> int:
    if args.max_episode_tokens:
        return args.max_episode_tokens
    cfg = trainer.model.config
    cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n = getattr(cfg, "max_position_embeddings", None) or 1 << 30
    if trainer.args.use_vllm and trainer.args.vllm_max_model_length:
        n = min(n, trainer.args.vllm_max_model_length)
    return n


def _world(trainer) -> int:
    acc = getattr(trainer, "accelerator", None)
    return acc.num_processes if acc is not None else 1


def _global_max(trainer, value: int) -> int:
    """The max of `value` over all ranks (every rank must call this at the same point)."""
    if _world(trainer) == 1:
        return value
    import torch
    acc = trainer.accelerator
    return int(acc.gather(torch.tensor([value], device=acc.device)).max().item())


def make_rollout_func(args: KernelArgs, out_dir: str, env_url, env_token):
    """TRL's rollout_func. `env_url`: one server URL, or a list of front doors of one judge cluster.

    With several doors, the episodes of one call over all ranks take consecutive doors (rank r's
    rows are the r-th block of the call's world * rows episodes), so every step loads the doors
    evenly even when one rank has fewer rows than there are doors; the next call continues where
    this one ended, so a step size that the door count does not divide still evens out over steps.
    """
    doors = parse_env_urls(env_url) if isinstance(env_url, str) else list(env_url)
    state = {"calls": 0}

    def rollout_func(prompts: list, trainer) -> dict:
        tok = text_tokenizer(trainer.processing_class)
        mode = "train" if trainer.model.training else "eval"
        split = "train" if mode == "train" else "eval"
        world = _world(trainer)
        eos_ids = set(getattr(trainer, "eos_token_ids", None) or [tok.eos_token_id])
        max_new = trainer.args.max_completion_length
        if "budget" not in state:
            state["budget"] = episode_budget(args, trainer)
            state["template"] = chat_template_kwargs(args, trainer.args)
            state["dummy"] = chat_prompt_ids(tok, DUMMY_USER_MESSAGE, template_kwargs=state["template"])
            log.info("episode token budget %d (prompt + all turns), %d tokens per turn", state["budget"], max_new)
        budget = state["budget"]
        n = len(prompts)
        rank = getattr(getattr(trainer, "accelerator", None), "process_index", 0)
        first = (state["calls"] * world + rank) * n
        state["calls"] += 1
        sessions = [EnvSession(doors, t, split, token=env_token, timeout_s=args.env_timeout_s,
                               retries=args.env_retries, backoff_s=args.env_retry_backoff_s, first_door=first + i)
                    for i, t in enumerate(prompts)]
        pool = ThreadPoolExecutor(max_workers=max(1, min(n, args.env_concurrency or n)))
        try:
            obs = list(pool.map(lambda s: s.reset(), sessions))
            prompt_ids = [chat_prompt_ids(tok, o.problem, template_kwargs=state["template"]) for o in obs]
            comp, mask, lps = [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)]
            eps = [{"task_id": t, "split": split, "mode": mode, "step": trainer.state.global_step,
                    "turns": [], "codes": [], "completions": [], "ended": "done",
                    "prompt_tokens": len(prompt_ids[i])} for i, t in enumerate(prompts)]
            have_lp, live = True, []
            for i in range(n):
                if len(prompt_ids[i]) + max_new <= budget:
                    live.append(i)
                    continue
                log.warning("%s: prompt of %d tokens + %d for an answer exceeds the episode budget %d: "
                            "no turn, no gradient (raise --max_episode_tokens or lower --max_completion_length)",
                            prompts[i], len(prompt_ids[i]), max_new, budget)
                eps[i]["ended"] = "prompt_over_budget"
                comp[i], mask[i], lps[i] = [tok.eos_token_id], [0], [0.0]
            while _global_max(trainer, len(live)) > 0:
                # lockstep: with several ranks every row takes part in every call (dummy prompt if finished)
                rows = list(range(n)) if world > 1 else list(live)
                alive = set(live)
                inputs = [prompt_ids[i] + comp[i] if i in alive else state["dummy"] for i in rows]
                new_ids, new_lps = generate_single_turn(trainer, inputs)
                have_lp &= new_lps is not None  # HF generate gives none; vLLM does
                picked = [(j, i) for j, i in enumerate(rows) if i in alive]
                ids_live = [list(new_ids[j]) for j, _ in picked]
                texts = tok.batch_decode(ids_live, skip_special_tokens=True)
                codes = [extract_code(t) for t in texts]
                results = list(pool.map(lambda i, c: sessions[i].step(c), [i for _, i in picked], codes))
                still = []
                for k, ((j, i), r) in enumerate(zip(picked, results)):
                    ids = ids_live[k]
                    comp[i] += ids
                    mask[i] += [1] * len(ids)
                    if have_lp:
                        lps[i] += list(new_lps[j])
                    truncated = not ids or ids[-1] not in eos_ids
                    eps[i]["codes"].append(codes[k])
                    eps[i]["completions"].append(texts[k])
                    eps[i]["turns"].append(turn_record(r, code=codes[k], truncated=truncated,
                                                       completion_tokens=len(ids)))
                    if r.done:
                        continue
                    # close a truncated turn ourselves so the template stays well-formed
                    extra = ([] if not truncated else [tok.eos_token_id]) + feedback_ids(
                        tok, feedback_message(r.observation, truncated), template_kwargs=state["template"])
                    if len(prompt_ids[i]) + len(comp[i]) + len(extra) + max_new > budget:
                        eps[i]["ended"] = "budget"  # the next whole answer would not fit: stop here
                        continue
                    comp[i] += extra
                    mask[i] += [0] * len(extra)
                    if have_lp:
                        lps[i] += [0.0] * len(extra)
                    still.append(i)
                live = still
            states = list(pool.map(lambda s: s.state() if s.codes else None, sessions))
            for ep, s, st, i in zip(eps, sessions, states, range(n)):
                ep.update(episode_id=s.episode_id, history=st.history if st else [], env_reconnects=s.reconnects,
                          env_url=s.base_url, episode_tokens=len(prompt_ids[i]) + len(comp[i]))
        finally:
            # A failed pool.map leaves the other episodes' calls running in the pool, and a session is
            # not thread-safe: closed from here mid-call, its client stops the loop the call waits on,
            # and the call waits forever. Each call is bounded by the env timeout and its retries.
            pool.shutdown(wait=True, cancel_futures=True)
            for s in sessions:
                s.close()
        returns = [episode_return([t["reward"] for t in ep["turns"]], args.return_mode, args.gamma) for ep in eps]
        for ep, ret in zip(eps, returns):
            ep["return"] = ret
        if len(doors) > 1:
            log.info("%s rollout at step %d: %d episodes by front door (where each ended): %s", mode,
                     trainer.state.global_step, n, episodes_per_door(eps, doors))
        # every episode, per rank, for report.py and for reading what the policy is learning
        with open(os.path.join(out_dir, f"rollouts-rank{rank}.jsonl"), "a") as f:
            for ep in eps:
                f.write(json.dumps(ep) + "\n")
        metrics = log_episodes(trainer, mode, eps, os.path.join(out_dir, "suspicious.jsonl"))
        # kernel_metrics (not a list) reaches the reward function for every row; env_return logs it
        return {"prompt_ids": prompt_ids, "completion_ids": comp, "logprobs": lps if have_lp else None,
                "env_mask": mask, "episode_return": returns, "kernel_metrics": metrics}
    return rollout_func


def log_episodes(trainer, mode: str, eps: list, suspicious_path: str) -> dict:
    """kernel/* metrics over all ranks' episodes (returned; every rank gets the same numbers); flagged
    turns (with code) to suspicious.jsonl."""
    if _world(trainer) > 1:
        from accelerate.utils import gather_object
        eps = gather_object(eps)
    metrics = kernel_metrics(eps)
    # the env flags speedups over its threshold (possible reward hack) and times under the roofline
    # floor: keep the code for manual review
    if not trainer.accelerator.is_main_process:
        return metrics
    for ep in eps:
        for h in flagged_turns(ep):
            log.warning("suspicious %sx speedup on %s turn %d", h.get("speedup"), ep["task_id"], h["turn"])
            with open(suspicious_path, "a") as f:
                f.write(json.dumps({**h, "step": trainer.state.global_step, "mode": mode}) + "\n")
    return metrics


def env_return(prompts, completions, episode_return, kernel_metrics=None, log_metric=None, **kwargs):
    """The reward: the rollout's episode returns. Also logs the rollout's kernel/* metrics through
    TRL's public `log_metric` (averaged per logging step; `eval_` prefixed in eval), so they reach
    the trainer's log history and every --report_to tracker."""
    if log_metric is not None and kernel_metrics:
        for name, value in kernel_metrics[0].items():  # the same dict on every row
            log_metric(name, value)
    return episode_return


def setup_tracking(cfg: GRPOConfig) -> None:
    """Local-first experiment tracking. trackio logs to a SQLite file per project in $TRACKIO_DIR
    (default ~/.cache/huggingface/trackio; TRL imports trackio with itself, so the variable must be set
    before the script starts), in project `kernel-rl` unless `--project` names one; no Space unless
    --trackio_space_id (or TRACKIO_SPACE_ID) asks for one, so it needs no network or Hub login.
    tensorboard: event files in OUTPUT_DIR/runs/DATE_HOST (or $TENSORBOARD_LOGGING_DIR). Both:
    `--report_to tensorboard,trackio`."""
    trackers = cfg.report_to if isinstance(cfg.report_to, list) else [cfg.report_to]
    # several trackers from one CLI value: TRL's parser takes one string
    cfg.report_to = trackers = [t.strip() for entry in trackers for t in (entry or "").split(",") if t.strip()]
    if "trackio" in trackers or "all" in trackers:
        import trackio.utils
        if cfg.project == "huggingface":  # transformers' placeholder default
            cfg.project = "kernel-rl"
        where = f"Space {cfg.trackio_space_id}" if cfg.trackio_space_id else "local only; view: trackio show"
        log.info("trackio: project %s in %s (%s)", cfg.project, trackio.utils.TRACKIO_DIR, where)


def start_env(args: KernelArgs, out_dir: str):
    """([front door URLs], token, server or None). `local`: rank 0 starts a server; its URL goes to
    every rank. A bad `--env_url` list stops here, before the model loads."""
    token = args.env_token or os.environ.get("KERNEL_ENV_TOKEN") or None
    try:
        urls = parse_env_urls(args.env_url)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if urls != ["local"]:
        if int(os.environ.get("RANK", "0")) == 0:
            log.info("env: %s", describe_doors(urls))
        return urls, token, None
    from accelerate import PartialState
    st = PartialState()
    if st.num_processes > 1 and int(os.environ.get("LOCAL_WORLD_SIZE", st.num_processes)) != st.num_processes:
        raise SystemExit("--env_url local serves one node: start `kernel-env serve` somewhere and pass its URL")
    server, info = None, [None]
    if st.is_main_process:
        server = LocalEnvServer(args.local_env_device, args.local_env_args.split(),
                                os.path.join(out_dir, "env_server.log"), args.kernelbench_dir).start()
        info = [(server.url, server.token)]
    if st.num_processes > 1:
        from accelerate.utils import broadcast_object_list
        broadcast_object_list(info, from_process=0)
    return [info[0][0]], info[0][1], server


def model_init_kwargs(cfg: GRPOConfig, model_args: ModelConfig) -> dict:
    kw = {**(cfg.model_init_kwargs or {}), "dtype": model_args.dtype or "auto"}
    if model_args.model_revision and model_args.model_revision != "main":
        kw.setdefault("revision", model_args.model_revision)
    if model_args.attn_implementation:
        kw.setdefault("attn_implementation", model_args.attn_implementation)
    if model_args.load_in_4bit or model_args.load_in_8bit:
        from trl import get_quantization_config
        kw.setdefault("quantization_config", get_quantization_config(model_args))
        try:
            from trl import get_kbit_device_map
            kw.setdefault("device_map", get_kbit_device_map())
        except ImportError:
            pass
    return kw


def main(argv=None):
    args, cfg, model_args = TrlParser((KernelArgs, GRPOConfig, ModelConfig)).parse_args_and_config(args=argv)
    if not model_args.model_name_or_path:
        raise SystemExit("--model_name_or_path is required (a hub id or a local folder, e.g. from "
                         "scripts/make_tiny_model.py)")
    if args.return_mode not in ("discounted", "best"):
        raise SystemExit("--return_mode: discounted or best")
    cfg.model_init_kwargs = model_init_kwargs(cfg, model_args)
    cfg.chat_template_kwargs = chat_template_kwargs(args, cfg)  # TRL's own template calls see it too
    train_ids = split_task_ids("train", args.levels, args.kernelbench_dir)
    eval_ids = split_task_ids("eval", args.levels, args.kernelbench_dir)
    if args.task_file:
        with open(args.task_file) as f:
            chosen = json.load(f)
        leaked = set(chosen) - set(train_ids)  # never train on held-out (or unknown) tasks
        if leaked:
            raise ValueError(f"task_file has tasks outside the train split: {sorted(leaked)[:5]}")
        train_ids = chosen
    eval_ids = eval_ids[: args.max_eval_tasks] if args.max_eval_tasks else eval_ids
    log.info("%d train / %d eval tasks", len(train_ids), len(eval_ids))
    if not train_ids:
        raise SystemExit("no training tasks (check --levels / --kernelbench_dir / --task_file)")
    os.makedirs(cfg.output_dir, exist_ok=True)
    setup_tracking(cfg)
    exit_on_sigterm()
    env_urls, env_token, server = start_env(args, cfg.output_dir)
    try:
        trainer = GRPOTrainer(
            model=model_args.model_name_or_path,
            reward_funcs=env_return,
            args=cfg,
            train_dataset=Dataset.from_dict({"prompt": train_ids}),
            eval_dataset=Dataset.from_dict({"prompt": eval_ids}) if cfg.eval_strategy != "no" and eval_ids else None,
            peft_config=get_peft_config(model_args),
            rollout_func=make_rollout_func(args, cfg.output_dir, env_urls, env_token),
        )
        # resume after a crash or a Modal retry: newest checkpoint-* in output_dir, if any
        last = None if args.no_resume else (cfg.resume_from_checkpoint or get_last_checkpoint(cfg.output_dir))
        if last:
            log.info("resuming from %s", last)
        trainer.train(resume_from_checkpoint=last)
        trainer.save_model(cfg.output_dir)
        trainer.save_state()  # OUTPUT_DIR/trainer_state.json: the whole log history, for report.py
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    main()
