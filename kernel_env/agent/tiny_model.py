"""A tiny random chat model for CPU smoke runs and tests (no model hub needed); its CLI is
scripts/make_tiny_model.py.

`build(OUT_DIR)` writes a `Qwen2ForCausalLM` (random weights: hidden 64, 2 layers by default) and a
byte-level BPE tokenizer trained here with `tokenizers` on this repository's own text (the task
sources, the prompts, the test submissions, the docs), so KernelBench prompts tokenize to a sane
length; with `line_tokens` (the demo's), a Mistral model and a tokenizer of whole lines learnt from the
demo corpus and its prompts alone. Special tokens:
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


def build_tokenizer(vocab_size: int, line_tokens: bool = False, device: str = "cpu"):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    if line_tokens:
        # merges may grow up to whole lines: the prompt's boilerplate and the demo corpus's code become a
        # token a line, so a warm start and GRPO on CPU see sequences ~15x shorter (docs/training.md).
        # Blank lines go with the line before them: a blank line of its own would be one token at many
        # places of an answer, and a model this small loses count of where it is after it
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex("\n+"), behavior="merged_with_previous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), max_token_length=None)
    if line_tokens:
        # the demo's answers and prompts alone, weighted so that each of their lines is merged whole; not the
        # repo's docs or code, so that editing those does not change the demo's model (nor what its run learns).
        # The prompts with a timing section too (made-up numbers, as the warm start's): the env's real
        # prompts have one, and left to bytes it would be two thirds of the prompt's tokens
        import random

        from .warm_start import corpus_dir_for, fake_profile, load_corpus, prompt
        subs = load_corpus(corpus_dir_for(device))
        rng = random.Random(0)
        texts = [s.answer for s in subs] * 8 + [prompt(s.task_id, 1, device=device) for s in subs] * 8
        texts += [prompt(s.task_id, 1, fake_profile(rng, device), device=device) for s in subs for _ in range(8)]
    else:
        from kernel_env.server.prompts import build_problem  # the prompt's own wording, too
        from kernel_env.tasks import TaskSet
        texts = [f.read_text(errors="replace") for f in corpus_files()]
        texts += [build_problem(t.task_id, t.source, None, "cpu", 4) for t in TaskSet().tasks.values()]
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"], model_max_length=1 << 30)
    fast.chat_template = CHATML
    return fast


def build(out_dir: str | Path, vocab_size: int = 2048, hidden: int = 64, layers: int = 2,
          max_positions: int = 8192, seed: int = 0, heads: int = 4, kv_heads: int = 2,
          intermediate: int = 0, line_tokens: bool = False, device: str = "cpu") -> Path:
    """`device` ("cpu" or "cuda"): whose demo corpus and env prompts the line tokens are made for."""
    import torch
    from transformers import GenerationConfig, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(vocab_size, line_tokens, device)
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    # transformers loads a Qwen2 model's tokenizer as Qwen2Tokenizer, which puts back its word-level
    # pre-tokenizer; a Mistral model's loads tokenizer.json as written (the line tokens stay)
    config_class, model_class = (MistralConfig, MistralForCausalLM) if line_tokens else (Qwen2Config, Qwen2ForCausalLM)
    cfg = config_class(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate or 2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=max_positions, tie_word_embeddings=True,
                      bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    torch.manual_seed(seed)
    model = model_class(cfg)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=pad)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def tools_chat_template() -> str:
    """Qwen2.5's chat template, which renders tools, tool calls and tool results, byte for byte as TRL
    ships it: TRL recognises it and parses the model's `<tool_call>` JSON into tool calls (its
    `environment_factory` / `tools` loop needs both). Needs trl (the `train` extra)."""
    from importlib.resources import files
    return (files("trl") / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def build_with_tools(out_dir: str | Path, **build_kwargs) -> Path:
    """`build()` with the tools-aware chat template instead of plain ChatML (opt-in: its default system
    prompt makes every prompt longer). The tokens, EOS and pad are the same; grpo_kernel.py's rollout
    works with either template."""
    from transformers import AutoTokenizer
    out = build(out_dir, **build_kwargs)
    tok = AutoTokenizer.from_pretrained(out)
    tok.chat_template = tools_chat_template()
    tok.save_pretrained(out)
    return out
