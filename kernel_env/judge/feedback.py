"""TRUSTED: short, actionable feedback for the model's next turn."""
from __future__ import annotations

import re

# gcc / clang / nvcc / ptxas diagnostics. Written so that no two parts can match the same characters:
# the text is the candidate's, and an ambiguous `\w+-?\w*` costs a line's length squared
_ERR = re.compile(r"(^|[\s:(])(fatal )?error( #?\w+(?:-\w*)?)?:")
_ABS_PATH = re.compile(r"(?<![\w.])(?:/[\w.\-+]+)+/([\w.\-+]*)")
_COMMAND_LINE = re.compile(r"^\s*(\[\d+/\d+\]\s*)?(c\+\+|g\+\+|gcc|nvcc|clang\+\+|\S*/nvcc|FAILED:)\s")


def scrub_paths(text: str) -> str:
    """Hide the server's folders (any absolute path keeps only its last part) and compiler command lines."""
    text = "\n".join(line for line in text.splitlines()
                     if not _COMMAND_LINE.match(line) and "-isystem" not in line and "-DTORCH_EXTENSION_NAME" not in line)
    return _ABS_PATH.sub(lambda m: m.group(1), text)


def clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 40] + "\n[... cut ...]\n" + text[-30:]


def compiler_errors(output: str, max_errors: int = 3, context: int = 2) -> str:
    """The first compiler errors with the lines around them (nvcc / g++ / ninja / Python)."""
    lines = output.splitlines()
    picked, seen = [], set()
    for i, line in enumerate(lines):
        if _ERR.search(line) and "ninja: build stopped" not in line and "-isystem" not in line and i not in seen:
            lo, hi = max(0, i - 1), min(len(lines), i + context + 1)
            picked.append("\n".join(lines[lo:hi]))
            seen.update(range(lo, hi))
            if len(picked) >= max_errors:
                break
    return "\n...\n".join(picked)


# of a message from a candidate process (a protocol line may be megabytes), the part feedback looks at
MESSAGE_CHARS = 64 * 1024


def bounded(text: str, chars: int = MESSAGE_CHARS) -> str:
    """At most `chars` of `text`: its head, where a compiler's first errors are, and its tail, where a
    traceback's exception is."""
    return text if len(text) <= chars else text[: chars * 3 // 4] + "\n[...]\n" + text[-(chars // 4):]


def build_failure(message: str, output: str, limit: int) -> str:
    message = bounded(message)
    errs = compiler_errors(output + "\n" + message)
    if not errs:
        errs = "\n".join(message.strip().splitlines()[-12:])
    return clip(scrub_paths("Build failed (importing the submission / compiling the kernel):\n" + errs), limit)


def runtime_failure(what: str, message: str, output: str, limit: int) -> str:
    """`what` and the end of the traceback or output, where the exception itself is."""
    tail = scrub_paths("\n".join((message or output)[-MESSAGE_CHARS:].strip().splitlines()[-15:]))
    room = max(limit - len(what) - 20, 100)
    if len(tail) > room:
        tail = "[...]\n" + tail[-room:]
    return f"{what}\n{tail}"


def timed_summary(speedup: float, t_new: float, t_ref: float, roofline_frac: float | None, bound: str | None,
                  suspicious: bool, violation: bool) -> str:
    rel = f"{speedup:.2f}x faster than" if speedup >= 1 else f"{1 / speedup:.2f}x slower than"
    parts = [f"Correct. {rel} the reference ({t_new:.3f} ms vs {t_ref:.3f} ms)"]
    if roofline_frac is not None:
        parts.append(f"{100 * roofline_frac:.0f}% of roofline, {bound}-bound")
    text = ", ".join(parts) + "."
    if violation:
        text += (" The measured time is below the speed-of-light floor for this problem, which is not physically "
                 "possible: the timing is not trusted and earns no reward.")
    elif suspicious:
        text += " This speedup is unusually large and is flagged for review."
    elif roofline_frac is not None and roofline_frac < 0.3:
        text += (" Far from the roofline: look at memory access patterns (coalescing, vector loads) or "
                 "the arithmetic's use of the hardware." if bound == "memory" else
                 " Far from the roofline: use tiling / shared memory and the matrix units.")
    return text


def kernel_share_line(kt: dict, device: str) -> str:
    """"Your kernels ran 7% of the GPU time; aten::convolution 93%." from the measured call."""
    what = "GPU" if device == "cuda" else "CPU"
    total = kt.get("total_us") or 0.0
    others = [(name, us) for name, us, mine in kt.get("top", []) if not mine and total > 0]
    text = f"Your kernels ran {100 * kt['share']:.0f}% of the {what} time"
    if others:
        text += "; " + ", ".join(f"{_short_name(n)} {100 * us / total:.0f}%" for n, us in others[:3])
    return text + "."


def _short_name(name: str) -> str:
    """A kernel's or op's name, readable: no template arguments or parameter lists."""
    name = name[:1000]  # a kernel's name is the candidate's: each unclosed `<` costs a pass over it
    name = re.sub(r"<.*>", "", name)
    name = re.sub(r"\(.*\)", "", name).strip()
    name = name.split()[-1] if name.split() else name
    return name[:60]
