"""One multi-turn episode of a policy against the env: the trainer's loop, with chat messages
instead of token ids (the held-out evaluation of `baseline_eval.py`)."""
from __future__ import annotations

import logging
import time
from typing import Optional

from .metrics import episode_return
from .policies import ContextFull, NoMoreTurns, Policy
from .session import EnvSession
from .turns import extract_code, feedback_message, turn_record

log = logging.getLogger("kernel_env.agent")


def run_episode(policy: Policy, env_url: str, task_id: str, split: str, *, token: Optional[str] = None,
                env_timeout_s: float = 900.0, env_retries: int = 3, return_mode: str = "discounted",
                gamma: float = 0.9, sample: int = 0) -> dict:
    """One multi-turn episode (the trainer's loop, with chat messages instead of token ids)."""
    sess = EnvSession(env_url, task_id, split, token=token, timeout_s=env_timeout_s, retries=env_retries)
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
        ep.update(episode_id=sess.episode_id, history=st.history if st else [], env_reconnects=sess.reconnects)
    finally:
        sess.close()
    ep["return"] = episode_return([t["reward"] for t in ep["turns"]], return_mode, gamma)
    ep["seconds"] = round(time.monotonic() - t0, 2)
    return ep

