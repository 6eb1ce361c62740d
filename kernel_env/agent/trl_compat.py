"""Every use of TRL's private API by this project, in one place, checked against the TRL versions it was
read from.

grpo_kernel.py's rollout_func generates each turn of a multi-turn episode itself (TRL's public
`rollout_func` contract hands over prompts and expects finished completions), so it needs the trainer's
own generation backend (HF generate or vLLM, with the weights of the current step). TRL exposes that
only as the private `GRPOTrainer._generate_single_turn`. Nothing else private is used: metrics go through
the public `log_metric` argument that GRPOTrainer passes to reward functions, and chat-template options
through the public `GRPOConfig.chat_template_kwargs`.

`TRL_VERIFIED` is the range the signature below was checked against: read in the 1.15.0 and 1.16.0
sources, run on 1.16.0. On 1.10-1.14 the same call means something else (the 4th positional
argument was `has_tool_images`, and vLLM server mode then dedupes prompts by `num_generations`,
which silently gives wrong multi-turn contexts), so a version outside the range is an error, not a
warning. `KERNEL_RL_TRL_UNVERIFIED=1` skips the check for someone porting to a newer TRL.
"""
from __future__ import annotations

import inspect
import os

from packaging.version import Version

TRL_VERIFIED = (Version("1.15"), Version("1.17"))  # [low, high)
SKIP_CHECK_ENV = "KERNEL_RL_TRL_UNVERIFIED"
_EXPECTED_PARAMS = ["prompt_ids", "images", "multimodal_fields", "num_generations"]


def check_trl_version(version: str | None = None) -> str:
    """Raise ImportError unless TRL `version` (default: the installed one) is in TRL_VERIFIED."""
    if version is None:
        import trl
        version = trl.__version__
    low, high = TRL_VERIFIED
    if not (low <= Version(version) < high) and os.environ.get(SKIP_CHECK_ENV) != "1":
        raise ImportError(
            f"kernel_env's GRPO trainer was verified against trl >={low},<{high}; found trl {version}. It calls "
            f"the private GRPOTrainer._generate_single_turn, whose signature changes between releases. Install "
            f"a verified version (pip install 'trl>={low},<{high}'), or check the call in "
            f"kernel_env/agent/trl_compat.py against your version and set {SKIP_CHECK_ENV}=1.")
    return version


def generate_single_turn(trainer, prompt_ids: list) -> tuple[list, list | None]:
    """One model turn for each token-id prompt: (completion ids per prompt, sampled-token logprobs per
    prompt or None). HF generate gives no logprobs; vLLM does. Each prompt is generated once (the
    rows already are the GRPO group's repeats), and text-only (no images)."""
    fn = trainer._generate_single_turn
    params = list(inspect.signature(fn).parameters)
    if params[:len(_EXPECTED_PARAMS)] != _EXPECTED_PARAMS:  # a release that moved the arguments
        raise TypeError(f"{type(trainer).__name__}._generate_single_turn{inspect.signature(fn)} does not match "
                        f"the verified ({', '.join(_EXPECTED_PARAMS)}, ...): see kernel_env/agent/trl_compat.py")
    return fn(prompt_ids, None, {}, 1)
