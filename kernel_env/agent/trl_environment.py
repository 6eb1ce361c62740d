"""kernel_env as an environment for TRL's own multi-turn tool loop (GRPOTrainer's `environment_factory`).

TRL's contract (trl 1.15-1.16, experimental there): `environment_factory()` returns an instance; its
public methods other than `reset` and `get_reward` are the tools the model may call (name, type hints
and Google-style docstring become the tool schema); per rollout TRL calls `reset(**row)` with the
dataset row and appends the returned string to the row's last user message; the model's tool calls
run `submit_kernel(code=...)` one rollout at a time and the returned string becomes the tool message;
`get_reward()` is called once per finished rollout and is a reward column named after the class
(weight 1). Instances are pooled and reused across batches (one per rollout of a batch).

    from functools import partial
    from kernel_env.agent.trl_environment import KernelToolEnv, log_kernel_metrics, tool_dataset
    trainer = GRPOTrainer(model=..., args=GRPOConfig(max_tool_calling_iterations=4, ...),
                          train_dataset=tool_dataset(task_ids),
                          environment_factory=partial(KernelToolEnv, env_url, token=token),
                          reward_funcs=[log_kernel_metrics])

The model needs a chat template that renders tool calls and that TRL can parse (e.g. Qwen2.5/Qwen3's).
examples/trl_tool_loop.py runs it; docs/training.md compares it with grpo_kernel.py's rollout_func.
"""
from __future__ import annotations

import logging
from typing import Optional, Sequence, Union

from .metrics import FAST_P, episode_return, fast_key, summarize
from .session import EnvSession
from .turns import feedback_message, turn_record

log = logging.getLogger("kernel_env.agent")

TOOL_INSTRUCTION = (
    "Submit each attempt by calling the `submit_kernel` tool with the complete Python module (imports, "
    "kernel source, `class ModelNew`) as `code`; its result is the judge's verdict. Keep improving until "
    "no attempts are left.\n\n")
EPISODE_OVER = "The episode is over: no attempts are left, so this submission was not judged."


def tool_dataset(task_ids: Sequence[str], split: str = "train", instruction: str = TOOL_INSTRUCTION):
    """The dataset TRL's loop wants: a conversational `prompt` (the instruction; reset() appends the
    task's problem to it), and the `task_id` and env `split` that reset() opens."""
    from datasets import Dataset
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": instruction}] for _ in task_ids],
                              "task_id": list(task_ids), "split": [split] * len(task_ids)})


class KernelToolEnv:
    """One kernel_env episode per rollout, driven by TRL's tool loop through `submit_kernel`.

    `env_url`: a server URL or a list of front doors of one judge cluster (kernel_env.agent.session's
    EnvSession: failed calls are retried on a fresh session that replays the episode, then raise
    EnvFailure). TRL turns an exception in a tool into an `{"error": ...}` tool message and counts a
    tool failure, so an infrastructure failure in submit_kernel is re-raised as such rather than
    turned into feedback; reset() failures stop the step. `split`: the env split of the tasks when
    the row has no `split` column ("train"; held-out tasks need "eval"). Reward: `episode_return` of the judged turns' rewards.
    """

    def __init__(self, env_url: Union[str, Sequence[str]], *, token: Optional[str] = None, split: str = "train",
                 return_mode: str = "discounted", gamma: float = 0.9, timeout_s: float = 900.0,
                 retries: int = 3, backoff_s: float = 5.0):
        if return_mode not in ("discounted", "best"):
            raise ValueError(f"return_mode {return_mode!r}: use discounted or best")
        self._url, self._token, self._split = env_url, token, split
        self._return_mode, self._gamma = return_mode, gamma
        self._session_kw = dict(timeout_s=timeout_s, retries=retries, backoff_s=backoff_s)
        self._session: Optional[EnvSession] = None
        self._episodes = 0
        self.episode: dict = {}

    def reset(self, task_id: Optional[str] = None, split: Optional[str] = None, **row) -> str:
        """Open a session on the row's task (closing the previous episode's) and return its problem."""
        if not task_id:
            raise ValueError(f"KernelToolEnv.reset needs the row's task_id (got columns {sorted(row)})")
        split = split or self._split
        self._close()
        self._session = EnvSession(self._url, task_id, split, token=self._token,
                                   first_door=self._episodes, **self._session_kw)
        self._episodes += 1
        obs = self._session.reset()
        self.episode = {"task_id": task_id, "split": split, "turns": [], "codes": [], "done": False,
                        "episode_id": self._session.episode_id}
        return obs.problem

    def submit_kernel(self, code: str) -> str:
        """Submit a complete kernel module to the judge; it builds, checks and times it.

        Args:
            code: The complete Python module: imports, the kernel source (load_inline or Triton) and `class ModelNew`.

        Returns:
            The judge's verdict for this attempt, with its feedback and how many attempts are left.
        """
        if self._session is None:
            raise RuntimeError("submit_kernel before reset")
        if self.episode["done"]:
            return EPISODE_OVER
        result = self._session.step(code)
        self.episode["codes"].append(code)
        self.episode["turns"].append(turn_record(result, code=code, truncated=False, completion_tokens=None))
        self.episode["done"] = bool(result.done)
        return feedback_message(result.observation, truncated=False)

    def get_reward(self) -> float:
        """The episode's return over its judged turns (0 when the model never submitted)."""
        rewards = [t["reward"] for t in self.episode.get("turns", [])]
        return episode_return(rewards, self._return_mode, self._gamma)

    def _close(self) -> None:
        session, self._session = getattr(self, "_session", None), None  # also after a failed __init__
        if session is not None:
            session.close()

    def __del__(self):
        self._close()


def kernel_metrics(eps: list) -> dict:
    """The kernel/* metrics of a batch of episodes, as both training loops log them: {name: float}, names
    without a value left out. Episode records as kernel_env.agent.metrics reads them; `ended` and
    `episode_tokens` where the loop records them."""
    s = summarize(eps)
    passes = tuple(k for k in s if k.startswith("pass@"))  # pass@1, and pass@k with several samples a task
    out = {}
    for k in ("compile_pct", "correct_pct", "correct_turn1_pct", "faster_than_ref_pct", "mean_speedup",
              "median_roofline_frac", "suspicious", "mean_turns", *map(fast_key, FAST_P), "geomean_speedup",
              "mean_kernel_share", *passes):
        if s[k] is not None:
            out[f"kernel/{k}"] = float(s[k])
    if eps:
        out["kernel/turns"] = float(s["mean_turns"])  # the seed's name
        if all("ended" in ep for ep in eps):
            out["kernel/budget_ended_pct"] = 100.0 * sum(ep["ended"] != "done" for ep in eps) / len(eps)
        if all("episode_tokens" in ep for ep in eps):
            out["kernel/episode_tokens"] = sum(ep["episode_tokens"] for ep in eps) / len(eps)
    return out


def log_kernel_metrics(prompts, completions, environments=None, log_metric=None, **kwargs):
    """A reward function that scores nothing (None for every rollout: KernelToolEnv.get_reward is the
    reward) and logs the batch's kernel/* metrics through TRL's public `log_metric`, as grpo_kernel.py
    does for its own loop."""
    if environments and log_metric is not None:
        eps = [e.episode for e in environments if isinstance(e, KernelToolEnv) and e.episode]
        for name, value in kernel_metrics(eps).items():
            log_metric(name, value)
    return [None] * len(prompts)
