"""Build a tiny random chat model for CPU smoke runs and tests (no model hub needed).

    python scripts/make_tiny_model.py OUT_DIR [--vocab-size 2048] [--hidden 64] [--layers 2] [--seed 0]
    python scripts/make_tiny_model.py OUT_DIR --hidden 896 --layers 24 --heads 14 --kv-heads 2 \
        --intermediate 4864      # Qwen2.5-0.5B's shape (random weights): realistic generation timings

What it writes: kernel_env/agent/tiny_model.py.
"""
from __future__ import annotations

import argparse

from kernel_env.agent.tiny_model import build


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--vocab-size", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--max-positions", type=int, default=8192)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=0, help="MLP width (0 = 2 x hidden)")
    p.add_argument("--line-tokens", action="store_true",
                   help="a tokenizer whose merges may span whole lines (the demo: short sequences on CPU)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="with --line-tokens: the env device whose demo corpus and prompts get whole-line tokens")
    a = p.parse_args(argv)
    out = build(a.out_dir, a.vocab_size, a.hidden, a.layers, a.max_positions, a.seed, a.heads, a.kv_heads,
                a.intermediate, a.line_tokens, a.device)
    print(f"tiny model written to {out}")


if __name__ == "__main__":
    main()
