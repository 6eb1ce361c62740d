"""A turn of an episode: the submission in a model answer (`extract_code`), the record of its
verdict (`turn_record`), and the feedback that becomes the next user turn (`feedback_message`)."""
from __future__ import annotations

import re
from typing import Optional

from ..models import TurnResult

_FENCE = re.compile(r"^[ \t]{0,3}(`{3,})[ \t]*([^`\s]*)[^`]*$")
_PYTHON_TAGS = ("python", "py", "python3", "py3")


def _fenced_blocks(text: str) -> list[tuple[str, str, bool]]:
    """(language tag, body, closed) of each fenced block, in order. Line-based, CommonMark-like:
    a fence opens with a line of >= 3 backticks and an optional tag, and closes with a line of
    only backticks at least as long. An unclosed last block runs to the end of the text."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag = m.group(1), m.group(2).lower()
        body, j = [], i + 1
        while j < len(lines):
            s = lines[j].strip()
            if len(s) >= len(fence) and set(s) == {"`"}:
                break
            body.append(lines[j])
            j += 1
        closed = j < len(lines)
        if not closed and body and body[-1].rstrip().endswith("```"):  # "...code```" at the very end
            body[-1] = body[-1].rstrip()[:-3]
        blocks.append((tag, "\n".join(body), closed))
        i = j + 1
    return blocks


def extract_code(text: str) -> str:
    """The submission in a model answer: the body of one fenced Python code block.

    - Blocks are fenced with ``` (or longer) lines; the tag after the opening fence names the language.
    - Candidates are blocks tagged python/py/python3 or untagged; blocks in other languages (a C++ or
      CUDA listing shown for explanation) are never the submission.
    - Of several candidates, the last one that defines `class ModelNew` wins (models often show a
      snippet first and the full module last); failing that the last python-tagged block, then the
      last untagged one.
    - An unterminated fence (an answer cut off at the length limit) counts as a block that runs to the
      end of the text, so a truncated answer still yields its (probably incomplete) code.
    - No candidate block -> "" (the env answers that with a format failure).
    The result has no trailing whitespace and ends with a newline when non-empty.
    """
    if not text:
        return ""
    cands = [(tag, body) for tag, body, _ in _fenced_blocks(text) if tag in _PYTHON_TAGS or tag == ""]
    if not cands:
        return ""
    with_model = [b for _, b in cands if re.search(r"^\s*class\s+ModelNew\b", b, re.M)]
    tagged = [b for t, b in cands if t in _PYTHON_TAGS]
    pick = (with_model or tagged or [b for _, b in cands])[-1]
    pick = pick.strip("\n").rstrip()
    return pick + "\n" if pick.strip() else ""


def feedback_message(obs, truncated: bool) -> str:
    """The next user turn after a judged attempt: what happened and what to do now.

    `obs` is the KernelObservation the step returned (stage, correct, speedup, roofline_frac,
    feedback, metadata turn/max_turns); `truncated` says the model's answer hit the length limit
    (no end-of-turn token): the message then says so first, since the code may be missing its end.
    The env's own feedback text (build errors, mismatch numbers, timings) is included as is.
    """
    meta = getattr(obs, "metadata", None) or {}
    turn, max_turns = meta.get("turn"), meta.get("max_turns")
    parts = []
    if truncated:
        parts.append("Your previous answer was cut off at the length limit before it ended, so the code block "
                     "may be incomplete. Keep the next answer shorter: little prose, one code block.")
    head = f"Attempt {turn} of {max_turns}" if turn and max_turns else "Your attempt"
    if obs.correct:
        sp = f", {obs.speedup:.3g}x the reference's speed" if obs.speedup else ""
        head += f": correct{sp}."
    else:
        head += f": not accepted (failed at the {obs.stage or 'format'} stage)."
    parts.append(head)
    if (obs.feedback or "").strip():
        parts.append(obs.feedback.strip())
    left = (max_turns - turn) if turn and max_turns else None
    ask = ("Make it faster while keeping it correct." if obs.correct
           else "Fix the problem.")
    if left is not None:
        ask += f" You have {left} attempt{'s' if left != 1 else ''} left."
    parts.append(ask + " Reply with the complete module (imports, kernel source, `class ModelNew`) in exactly "
                       "one ```python code block.")
    return "\n\n".join(parts)



def turn_record(result, *, code: str, truncated: bool, completion_tokens: Optional[int]) -> dict:
    """One judged turn as episode records store it (the trainer's rollouts and baseline_eval.py's
    episodes alike): the env's TurnResult from the step `result`, with the answer's side."""
    return TurnResult.from_observation(result.observation, result.reward, truncated=bool(truncated),
                                       completion_tokens=completion_tokens, code_chars=len(code)).model_dump()
