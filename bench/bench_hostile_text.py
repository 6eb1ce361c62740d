"""The judge's own work on text a submission controls, built to make it slow, side by side with honest text.

    python -m bench.bench_hostile_text [--repeat 3] [--bytes 262144]

The screen runs in a worker thread, the feedback in the server's event loop (where what it takes on
one submission is time every session waits); both cost the judge's CPU:
- the screen (kernel_env/judge/intake.py: the parse and the static checks), on one short line
  repeated up to the judge's size limit (`--bytes`, JudgeConfig.max_code_bytes by default) after a
  real kernel: thousands of jitted functions, long attribute chains, many calls, names, classes, C++
  strings and comments;
- the feedback (kernel_env/judge/feedback.py) on what a candidate process prints or sends as an
  error message (a protocol line may be 4 MiB): lines that look like the start of a compiler error,
  paths, kernel names with unclosed template brackets.
Prints the best of `--repeat` per case and its ratio to the honest case.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernel_env.judge import feedback as fb  # noqa: E402
from kernel_env.judge.config import JudgeConfig  # noqa: E402
from kernel_env.judge.intake import screen  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HONEST = ROOT / "kernel_env" / "data" / "demo_corpus"
TASK = "level2/2_Small_Scale_Add_Clamp"  # the honest kernel's (the screen reads only the source)

LINES = {  # one line each, repeated
    "jitted functions": "@jit\ndef f():\n    pass\n",
    "attribute chains (300)": "y = x" + ".a" * 300 + "\n",
    "attribute chains (2900)": "y = x" + ".a" * 2900 + "\n",
    "calls": "f(1)\n",
    "getattr": "getattr(x, 'a')\n",
    "names": "a\n",
    "classes": "class A(B, C, D): pass\n",
    "attribute assignments": "a.b = 1\n",
    "C++ strings": "s = '#include <cuda.h> __global__ void f(){}'\n",
    "unclosed C++ comments": None,  # one string: '#include ' and '/* ' up to the limit
}
MIB = 1 << 20
HONEST_ERROR = ("Error building extension 'ext': [1/2] c++ -c main.cpp -o main.o\n"
                "main.cpp:12:5: error: 'y' was not declared in this scope\n   12 |     y[i] = x[i];\n"
                "ninja: build stopped: subcommand failed.\n")


def feedback_cases(message_bytes: int) -> dict:
    """name -> (function, its arguments); the hostile ones `message_bytes` long."""
    n = message_bytes
    return {
        "build failure: honest": (fb.build_failure, (HONEST_ERROR, "", 2000)),
        "build failure: ' error aaaa...'": (fb.build_failure, (" error " + "a" * n, " error " + "a" * min(n, 32000), 2000)),
        "traceback: paths '/-/-/...'": (fb.runtime_failure, ("ModelNew raised:", "/" + "-/" * (n // 2), "", 2000)),
        "kernel name '<<<<...'": (fb.kernel_share_line, ({"share": 0.5, "total_us": 2.0, "top": [["<" * n, 1.0, False]]},
                                                          "cuda")),
    }


def honest_source() -> str:
    """A correct kernel of the demo corpus: the screen passes it, as it passes most real answers."""
    for path in sorted(HONEST.rglob("*.py")):
        text = path.read_text()
        if "load_inline" in text and "class ModelNew" in text:
            return text
    raise SystemExit(f"no load_inline submission under {HONEST}")


def best_of(code: str, cfg: JudgeConfig, repeat: int) -> tuple[float, str]:
    times, verdict = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        verdict = screen(TASK, code, cfg)
        times.append(time.perf_counter() - t0)
    return min(times), ("passes" if verdict is None else f"{verdict.stage}/{verdict.error_kind}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bytes", type=int, default=JudgeConfig().max_code_bytes)
    ap.add_argument("--message-bytes", type=int, default=4 * MIB, help="a protocol line may be 4 MiB")
    args = ap.parse_args(argv)
    cfg = JudgeConfig(device="cpu", max_code_bytes=args.bytes)
    head = honest_source()
    base, what = best_of(head, cfg, args.repeat)
    print(f"{'submission':28s} {'bytes':>8s} {'screen s':>9s} {'x honest':>9s}  verdict")
    print(f"{'honest kernel':28s} {len(head):8d} {base:9.4f} {1:9.0f}  {what}")
    room = max(0, args.bytes - len(head.encode()) - 100)
    for name, line in LINES.items():
        if line is None:
            code = head + "s = '#include " + "/* " * (room // 3) + "'\n"
        else:
            code = head + line * (room // len(line))
        t, what = best_of(code, cfg, args.repeat)
        print(f"{name:28s} {len(code):8d} {t:9.4f} {t / base:9.0f}  {what}")
    print(f"\n{'feedback on':36s} {'s':>9s} {'x honest':>9s}")
    base = None
    for name, (fn, fargs) in feedback_cases(args.message_bytes).items():
        t = min(_timed(fn, fargs) for _ in range(args.repeat))
        base = base or t
        print(f"{name:36s} {t:9.4f} {t / base:9.0f}")


def _timed(fn, fargs) -> float:
    t0 = time.perf_counter()
    fn(*fargs)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
