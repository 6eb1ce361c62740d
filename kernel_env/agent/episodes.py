"""One multi-turn episode of a policy against the env: the trainer's loop, with chat messages
instead of token ids (the held-out evaluation of `baseline_eval.py`)."""
from __future__ import annotations

import logging
import time
from typing import Optional, Sequence, Union

from .metrics import episode_return
from .policies import ContextFull, NoMoreTurns, Policy
from .session import EnvSession
from .turns import extract_code, feedback_message, turn_record

log = logging.getLogger("kernel_env.agent")


def run_episode(policy: Policy, env_url: Union[str, Sequence[str]], task_id: str, split: str, *,
                token: Optional[str] = None, env_timeout_s: float = 900.0, env_retries: int = 3,
                return_mode: str = "discounted", gamma: float = 0.9, sample: int = 0, first_door: int = 0) -> dict:
    """One multi-turn episode (the trainer's loop, with chat messages instead of token ids).

    `env_url` is one server or a list of front doors: the episode starts at door `first_door` (mod
    their number; a caller spreads episodes by passing each one's index) and moves to the next door
    if its door fails (EnvSession). The record's `env_url` is the door it ended on.
    """
    sess = EnvSession(env_url, task_id, split, token=token, timeout_s=env_timeout_s, retries=env_retries,
                      first_door=first_door)
    t0 = time.monotonic()
    ep = {"task_id": task_id, "split": split, "mode": "eval", "step": None, "sample": sample, "policy": policy.name,
          "turns": [], "codes": [], "completions": [], "ended": "done"}
    try:
        obs = sess.reset()
        messages = [{"role": "user", "content": obs.problem}]
        turn = 0
        while True:
            turn += 1
            try:
                text, truncated, ntok = policy.answer(messages, task_id, turn)
            except ContextFull as e:
                log.info("%s: turn %d does not fit the context (%s): episode ends", task_id, turn, e)
                ep["ended"] = "budget"
                break
            except NoMoreTurns:
                ep["ended"] = "no_more_solutions"
                break
            code = extract_code(text)
            r = sess.step(code)
            ep["turns"].append(turn_record(r, code=code, truncated=truncated, completion_tokens=ntok))
            ep["codes"].append(code)
            ep["completions"].append(text)
            if r.done:
                break
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": feedback_message(r.observation, truncated)}]
        st = sess.state() if ep["turns"] else None
        ep.update(episode_id=sess.episode_id, history=st.history if st else [], env_reconnects=sess.reconnects,
                  env_url=sess.base_url)
    finally:
        sess.close()
    ep["return"] = episode_return([t["reward"] for t in ep["turns"]], return_mode, gamma)
    ep["seconds"] = round(time.monotonic() - t0, 2)
    return ep


def episodes_per_door(episodes: list[dict], doors: Sequence[str]) -> str:
    """`URL n, URL n, ...` by each episode record's `env_url`, doors in their given order: shows how
    evenly a run spread, and a door that failed (its episodes ended on the next one)."""
    ended = [ep.get("env_url") for ep in episodes]
    return ", ".join(f"{door} {ended.count(door)}" for door in doors)
