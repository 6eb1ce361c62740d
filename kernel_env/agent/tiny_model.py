"""A tiny random chat model for CPU smoke runs and tests (no model hub needed); its CLI is
scripts/make_tiny_model.py.

`build(OUT_DIR)` writes a `Qwen2ForCausalLM` (random weights: hidden 64, 2 layers by default) and a byte-level BPE
tokenizer trained here with `tokenizers` on this repository's own text (the task sources, the
prompts, the submissions), so KernelBench prompts tokenize to a sane length. Special tokens:
`<|endoftext|>` (pad), `<|im_start|>`, `<|im_end|>` (EOS); a ChatML chat template. The folder
loads with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` and works as
`--model_name_or_path` for grpo_kernel.py and baseline_eval.py. Same seed, same model.
"""
from __future__ import annotations

from pathlib import Path

# the checkout (or the folder the package is installed in: then only the package's own text is found)
REPO = Path(__file__).resolve().parents[2]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def corpus_files() -> list[Path]:
    """Text the tokenizer learns from: the repo's Python (tasks, prompts, test kernels) and docs."""
    files = sorted((REPO / "kernel_env").rglob("*.py")) + sorted((REPO / "tests" / "submissions").glob("*.py"))
    files += sorted(REPO.glob("*.md")) + sorted((REPO / "docs").glob("*.md"))
    return [f for f in files if f.is_file()]


def build_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [f.read_text(errors="replace") for f in corpus_files()]
    from kernel_env.server.prompts import build_problem  # the prompt's own wording, too
    from kernel_env.tasks import TaskSet
    for task in TaskSet().tasks.values():
        texts.append(build_problem(task.task_id, task.source, None, "cpu", 4))
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"], model_max_length=1 << 30)
    fast.chat_template = CHATML
    return fast


def build(out_dir: str | Path, vocab_size: int = 2048, hidden: int = 64, layers: int = 2,
          max_positions: int = 8192, seed: int = 0, heads: int = 4, kv_heads: int = 2,
          intermediate: int = 0) -> Path:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vocab_size)
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate or 2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=max_positions, tie_word_embeddings=True,
                      bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=pad)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out
