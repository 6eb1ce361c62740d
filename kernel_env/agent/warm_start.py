"""Warm start for the demo: supervised fine-tuning (TRL's SFTTrainer) of a small model on the
demo corpus, so that it answers a corpus task with one of the corpus's submissions; its CLI is
scripts/warm_start.py.

The corpus (kernel_env/data/demo_corpus, README.md there) holds, for a few of the shipped small
tasks, three real submissions each in the judge's format (C++ through load_inline for the CPU device;
kernel_env/data/demo_corpus_cuda the same answers with a CUDA kernel, for the GPU device):
`fast` (correct, faster than the PyTorch reference), `slow` (correct, slower) and `wrong` (builds and
runs, wrong outputs). Each starts with a `# Plan:` line that names its approach in words shared by
all tasks, so which variant an answer is comes from its first tokens. Trained on all three with
equal weight, the model samples a mix of them: GRPO then has something to choose between, and the
choice it learns on the train tasks carries to the held-out ones, whose answers start the same way.

Prompts are the env's own first message (kernel_env/server/prompts.py) for the task, once without
and a few times with a made-up timing profile: the real one carries measured times that differ from
machine to machine, and the answer must not depend on them. With `env_prompts` (the text an env
server on this machine sends, `fetch_env_prompts`) one of them is the real one: a small model copies
the task's own lines from the prompt into its answer, and a timing section unlike all it was trained
on can throw that copying off (measured: the same model, trained from the same weights on the same
rows, derailed on one task's real GPU prompt when trained under one torch build and not another).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from ..compute_policy import for_level
from ..server.prompts import build_problem
from ..tasks import TaskSet

CORPUS_DIR = Path(__file__).resolve().parents[1] / "data" / "demo_corpus"
CORPORA = {"cpu": CORPUS_DIR, "cuda": CORPUS_DIR.with_name("demo_corpus_cuda")}  # by the env server's device
VARIANTS = ("fast", "slow", "wrong")


@dataclass(frozen=True)
class Submission:
    task_id: str
    variant: str
    code: str

    @property
    def answer(self) -> str:
        """The assistant's whole reply: the module in one python code block (what extract_code takes)."""
        return f"```python\n{self.code.rstrip()}\n```"


def corpus_dir_for(device: str) -> Path:
    if device not in CORPORA:
        raise ValueError(f"no demo corpus for device {device!r}: use one of {sorted(CORPORA)}")
    return CORPORA[device]


def load_corpus(corpus_dir: str | Path = CORPUS_DIR, tasks=None) -> list[Submission]:
    """The corpus's submissions, `<level>__<task stem>.<variant>.py`, in task then variant order."""
    out = []
    for p in sorted(Path(corpus_dir).glob("*.py")):
        stem, _, variant = p.name[: -len(".py")].rpartition(".")
        if variant not in VARIANTS or "__" not in stem:
            raise ValueError(f"demo corpus: bad file name {p.name} (expected LEVEL__TASK.VARIANT.py)")
        task_id = stem.replace("__", "/", 1)
        if tasks is None or task_id in tasks:
            out.append(Submission(task_id, variant, p.read_text()))
    return out


def corpus_tasks(corpus_dir: str | Path = CORPUS_DIR) -> list[str]:
    return sorted({s.task_id for s in load_corpus(corpus_dir)})


# GPUs whose names the made-up profiles use (with made-up names besides): a real server's name must be
# a line the model has seen vary, or its pieces (tokens no prompt of the warm start had) derail it
GPU_NAMES = ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA L4",
             "NVIDIA GeForce RTX 4090", "NVIDIA B200", "NVIDIA A10G", "NVIDIA H100 PCIe", "Tesla T4")


def fake_profile(rng: random.Random, device: str = "cpu") -> dict:
    """A timing section shaped like the judge's task profile, with made-up numbers (and, for a GPU, a
    GPU's name: a real one or a made-up one)."""
    if device == "cpu":
        t_ref = rng.uniform(0.05, 30.0)
        t_min = t_ref * rng.uniform(0.02, 0.5)
    else:  # GPU tasks take microseconds to milliseconds: the real numbers' digits must not be new to it
        t_ref = 10 ** rng.uniform(-3, 1.5)
        t_min = t_ref * 10 ** rng.uniform(-2, -0.3)
    profile = {"device_name": "cpu", "t_ref_ms": t_ref, "t_min_ms": t_min, "flops": rng.uniform(1e5, 1e9),
               "bytes": rng.uniform(1e5, 1e8), "bound": rng.choice(["memory", "compute"]), "ref_roofline_frac": t_min / t_ref}
    if device != "cpu":
        profile["device_name"] = _gpu_name(rng)
    return profile


def _gpu_name(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(GPU_NAMES)
    return (f"NVIDIA {rng.choice(['H', 'A', 'B', 'L', 'GB', 'GH', 'RTX ', 'GeForce RTX '])}{rng.randint(2, 9999)}"
            + rng.choice(["", " PCIe", " SXM", " 80GB HBM3", "-SXM4-40GB", " Ti"]))


def prompt(task_id: str, max_turns: int, profile: dict | None = None, kernelbench_dir: str = "",
           device: str = "cpu") -> str:
    """The env's first user message for `task_id` on `device` ("cpu" or "cuda"), as a reset would send it."""
    task = TaskSet(kernelbench_dir or None).get(task_id)
    return build_problem(task_id, task.source, profile, device, max_turns, for_level(None, task.level))


def fetch_env_prompts(task_ids, device: str, env_args=(), log_path=None) -> dict[str, str]:
    """{task: the first message an env server on this machine sends for it}, from an embedded server
    started with `env_args` (kernel-env serve's flags). Its judge profiles each task on `device` and
    keeps the profile in the judge cache (KERNEL_ENV_CACHE), so later servers with the same cache and
    flags send the same text."""
    from .local_server import LocalEnvServer
    from .session import EnvSession
    tasks, out = TaskSet(), {}
    with LocalEnvServer(device, list(env_args), log_path) as server:
        for t in task_ids:
            session = EnvSession(server.url, t, tasks.get(t).split, token=server.token)
            try:
                out[t] = session.reset().problem
            finally:
                session.close()
    return out


def sft_rows(subs: list[Submission], max_turns: int, prompts_per_answer: int = 6, seed: int = 0,
             device: str = "cpu", env_prompts: dict | None = None) -> list[dict]:
    """Conversational prompt-completion rows (SFTTrainer trains on the completion only). A task's
    answers share its prompts: each prompt comes with every answer, so nothing in it (the made-up
    timings) can tell the model which answer to write, and it learns the mix of them. A task's
    prompt in `env_prompts` stands in for its second prompt (the first has no timing section)."""
    rng = random.Random(seed)
    prompts = {t: [prompt(t, max_turns, None if k == 0 else fake_profile(rng, device), device=device)
                   for k in range(prompts_per_answer)] for t in dict.fromkeys(s.task_id for s in subs)}
    for t, text in (env_prompts or {}).items():
        if t in prompts and prompts_per_answer > 1:
            prompts[t][1] = text
    return [{"prompt": [{"role": "user", "content": text}], "completion": [{"role": "assistant", "content": s.answer}]}
            for s in subs for text in prompts[s.task_id]]


def warm_start(model_dir: str | Path, out_dir: str | Path, *, epochs: float = 40, learning_rate: float = 5e-3,
               max_turns: int = 1, prompts_per_answer: int = 6, batch_size: int = 4, seed: int = 0,
               tasks=None, device: str = "cpu", env_prompts: dict | None = None, log=print) -> dict:
    """Fine-tune the model in `model_dir` on `device`'s corpus, with that device's prompts (and the
    env's own, `env_prompts`: sft_rows), training on that device; save it (and its tokenizer) to `out_dir`.
    Returns {"loss": final train loss, "rows": dataset rows, "seconds": ...}."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    corpus_dir = corpus_dir_for(device)
    subs = load_corpus(corpus_dir, tasks)
    if not subs:
        raise ValueError(f"no corpus submissions in {corpus_dir} for tasks {tasks}")
    rows = sft_rows(subs, max_turns, prompts_per_answer, seed, device, env_prompts)
    tok = AutoTokenizer.from_pretrained(model_dir)
    longest = max(len(tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=True, return_dict=False))
                  for r in rows)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    cfg = SFTConfig(output_dir=str(out_dir), num_train_epochs=epochs, learning_rate=learning_rate,
                    lr_scheduler_type="cosine", warmup_steps=0.05, per_device_train_batch_size=batch_size,
                    max_length=longest, seed=seed, data_seed=seed, use_cpu=device == "cpu", report_to="none",
                    save_strategy="no", disable_tqdm=True, weight_decay=0.0,
                    logging_steps=max(1, round(epochs * -(-len(rows) // batch_size) / 8)),  # ~8 loss lines
                    # TRL's defaults for GPUs: bf16 autocast on a CPU without bf16 units made each step
                    # ~5x slower; recomputing activations buys memory a model this small does not need
                    bf16=False, gradient_checkpointing=False)
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=Dataset.from_list(rows), processing_class=tok)
    log(f"warm start: {len(subs)} corpus answers x {prompts_per_answer} prompts = {len(rows)} rows "
        f"(longest {longest} tokens), {epochs:g} epochs")
    result = trainer.train()
    trainer.save_model(str(out_dir))
    tok.save_pretrained(str(out_dir))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"loss": losses[-1] if losses else result.training_loss, "rows": len(rows),
            "seconds": result.metrics.get("train_runtime")}


def variant_shares(model_dir: str | Path, task_id: str, max_turns: int = 1, device: str = "cpu",
                   model=None, tok=None) -> dict:
    """How the model in `model_dir` splits its answers to `task_id` between the corpus's variants:
    each variant's whole answer scored by the model (teacher-forced, the env's prompt without timing
    numbers, `device`'s corpus), normalised over the variants. Exact, no sampling: an unchanged model gives
    the same shares. Scored on the CPU (a few forward passes)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = tok or AutoTokenizer.from_pretrained(model_dir)
    model = model or AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    msgs = [{"role": "user", "content": prompt(task_id, max_turns, device=device)}]
    head = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)
    logp = {}
    for s in load_corpus(corpus_dir_for(device), [task_id]):
        ids = tok.apply_chat_template(msgs + [{"role": "assistant", "content": s.answer}], tokenize=True,
                                      return_dict=False)
        with torch.no_grad():
            out = model(torch.tensor([ids])).logits[0, :-1].log_softmax(-1)
        tgt = torch.tensor(ids[1:])
        logp[s.variant] = out[len(head) - 1:].gather(1, tgt[len(head) - 1:, None]).sum().item()
    top = max(logp.values())
    z = sum(torch.exp(torch.tensor(v - top)).item() for v in logp.values())
    return {v: torch.exp(torch.tensor(lp - top)).item() / z for v, lp in logp.items()}
