"""GRPO against the real env moves a policy: the demo's recipe (scripts/demo.sh), shortened to one task.

A tiny model built here is warm-started (TRL's SFTTrainer) on the demo corpus's three answers to one
task (fast, correct but slow, wrong), then trained for a few GRPO steps by grpo_kernel.py against an
embedded env server on the CPU device: every reward is the real judge's (a real C++ build, real
timings). Seeded; the verdicts (fast, slow, wrong) are ~10x apart.
"""
import json
import subprocess
import sys

import pytest

from conftest import ROOT, sharing_the_precompiled_header
from kernel_env.server.reward import RewardConfig

TASK = "level2/4_Small_Scale_Shift_ReLU"
STEPS = 4


@pytest.mark.slow
def test_grpo_moves_a_warm_started_model_towards_the_fast_answer(tmp_path):
    from kernel_env.agent.tiny_model import build
    from kernel_env.agent.warm_start import variant_shares, warm_start

    warm = tmp_path / "warm"
    warm_start(build(tmp_path / "tiny", vocab_size=4096, line_tokens=True), warm, tasks=[TASK])  # as scripts/demo.sh
    before = variant_shares(warm, TASK)
    # the warm start answers with all three: something for GRPO to choose between
    assert all(share > 0.1 for share in before.values()), before

    (tmp_path / "tasks.json").write_text(json.dumps([TASK]))
    out = tmp_path / "grpo"
    env_args = ("--max-turns 1 --stats-interval-s 0 --timing-budget-s 0.3 --l2-flush-bytes 4194304 "
                "--quiet-warmup-s 0.2 --quiet-min-wall-s 0.1 --timing-attempts 2 --roofline-violation-factor 0.25")  # as scripts/demo.sh
    r = subprocess.run(
        [sys.executable, str(ROOT / "grpo_kernel.py"), "--model_name_or_path", str(warm), "--env_url", "local",
         "--local_env_args", env_args, "--levels", "2", "--task_file", str(tmp_path / "tasks.json"),
         "--output_dir", str(out), "--max_steps", str(STEPS), "--num_generations", "8",
         "--per_device_train_batch_size", "8", "--max_completion_length", "256", "--temperature", "0.7",
         "--learning_rate", "1e-3", "--beta", "0.04", "--lr_scheduler_type", "constant", "--logging_steps", "1",
         "--save_strategy", "no", "--report_to", "none", "--use_cpu", "--dtype", "float32", "--bf16", "false",
         "--gradient_checkpointing", "false", "--seed", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]

    episodes = [json.loads(x) for x in (out / "rollouts-rank0.jsonl").read_text().splitlines()]
    assert sorted({e["step"] for e in episodes}) == list(range(STEPS)) and len(episodes) == 8 * STEPS
    # what the real judge paid for each kind of answer in this run: fast > correct but slow > wrong
    verdicts = [e["turns"][0] for e in episodes]
    paid = {"fast": [v["reward"] for v in verdicts if v["correct"] and v["speedup"] > 1],
            "slow": [v["reward"] for v in verdicts if v["correct"] and v["speedup"] <= 1],
            "wrong": [v["reward"] for v in verdicts if v["stage"] == "correctness"]}
    assert paid["fast"] and paid["wrong"], {k: len(v) for k, v in paid.items()}
    reward = {k: sum(v) / len(v) if v else RewardConfig().base for k, v in paid.items()}
    assert reward["fast"] > reward["slow"] > reward["wrong"] == 0.0, reward

    # the policy's expected reward over the three answers, from its exact (teacher-forced) shares: a
    # handful of samples per step is too few to compare the sampled means stably. In four steps most of
    # what moves is the wrong answer's share (paid 0) going to the two correct ones
    after = variant_shares(out, TASK)
    expected = {name: sum(shares[k] * reward[k] for k in reward) for name, shares in (("before", before), ("after", after))}
    assert expected["after"] > expected["before"] + 0.05 and after["wrong"] < before["wrong"] - 0.1, (before, after, reward)


def _split_answer(code: str) -> tuple[str, str, str]:
    """(plan line, kernel source, the Python after the load_inline call) of a corpus answer."""
    plan, rest = code.split("\n", 1)
    kernel, after = rest.split("\next = load_inline(", 1)
    return plan, kernel, after.split("\n\n", 1)[1]


def test_the_cuda_corpus_is_the_cpu_corpus_with_a_cuda_kernel():
    from kernel_env.agent.warm_start import corpus_dir_for, load_corpus

    cpu, cuda = load_corpus(corpus_dir_for("cpu")), load_corpus(corpus_dir_for("cuda"))
    assert [(s.task_id, s.variant) for s in cpu] == [(s.task_id, s.variant) for s in cuda]
    assert {s.variant for s in cpu} == {"fast", "slow", "wrong"}
    for device, subs in (("cpu", cpu), ("cuda", cuda)):
        # one kernel source per corpus: the judge builds it once for a whole demo
        assert len({_split_answer(s.code)[1] for s in subs}) == 1, device
    assert "__global__" in _split_answer(cuda[0].code)[1] and "__global__" not in _split_answer(cpu[0].code)[1]
    for a, b in zip(cpu, cuda):  # what GRPO chooses between (the plan line) and the Python: the same
        pa, _, tail_a = _split_answer(a.code)
        pb, _, tail_b = _split_answer(b.code)
        assert (pa, tail_a) == (pb, tail_b), (a.task_id, a.variant)


def test_the_warm_start_prompts_are_the_env_devices():
    from kernel_env.agent.warm_start import corpus_dir_for, load_corpus, prompt, sft_rows

    task = "level2/2_Small_Scale_Add_Clamp"
    assert "GPU kernels" in prompt(task, 1, device="cuda") and "CUDA" in prompt(task, 1, device="cuda")
    assert "CPU kernels" in prompt(task, 1) and "__global__" not in prompt(task, 1)
    subs = load_corpus(corpus_dir_for("cuda"), [task])
    rows = sft_rows(subs, 1, prompts_per_answer=2, device="cuda")
    assert len(rows) == 6 and all("GPU kernels" in r["prompt"][0]["content"] for r in rows)
    assert all("__global__" in r["completion"][0]["content"] for r in rows)
    with pytest.raises(ValueError, match="no demo corpus for device"):
        corpus_dir_for("tpu")


def test_the_demo_tokenizer_learns_only_the_tasks_and_the_corpus(monkeypatch):
    """A token a line (blank lines go with the line before) for the demo's answers and prompts, learnt
    from them alone: the repo's docs and code are not read, so editing them does not change the demo's
    model."""
    from kernel_env.agent import tiny_model
    from kernel_env.agent.warm_start import corpus_dir_for, load_corpus, prompt

    monkeypatch.setattr(tiny_model, "corpus_files", lambda: pytest.fail("the demo's tokenizer read the repo's files"))
    for device, vocab_size in (("cpu", 4096), ("cuda", 4096)):  # scripts/demo.sh's vocabularies
        tok = tiny_model.build_tokenizer(vocab_size, line_tokens=True, device=device)
        for s in load_corpus(corpus_dir_for(device)):
            for text in (s.answer, prompt(s.task_id, 1, device=device)):
                assert len(tok(text).input_ids) == len([line for line in text.splitlines() if line]), (device, s.task_id)


def test_the_warm_start_gives_every_answer_the_same_prompts():
    """Nothing in a prompt (its made-up timings) may tell which of the task's answers goes with it: the
    warm start must learn the mix, not a mapping from timing numbers to answers that the env's real
    numbers would then pick from at random."""
    from kernel_env.agent.warm_start import corpus_dir_for, load_corpus, sft_rows

    subs = load_corpus(corpus_dir_for("cpu"))
    rows = sft_rows(subs, 1, prompts_per_answer=4, seed=3)
    assert len(rows) == 4 * len(subs)
    prompts = {}
    for s, i in zip(subs, range(0, len(rows), 4)):
        prompts.setdefault(s.task_id, []).append([r["prompt"][0]["content"] for r in rows[i:i + 4]])
        assert all(r["completion"][0]["content"] == s.answer for r in rows[i:i + 4])
    for task, per_answer in prompts.items():
        assert len(per_answer) == 3 and all(p == per_answer[0] for p in per_answer), task
        assert len(set(per_answer[0])) == 4, task  # four different prompts (one without timings)



@pytest.mark.slow
def test_the_gpu_recipes_warm_start_answers_a_real_gpus_prompt(tmp_path):
    """The env's real prompt names its GPU and gives times in microseconds. The warm start's made-up
    profiles must cover such sections (real and made-up GPU names, 1 us to 30 ms): a section unlike
    all it trained on can throw the model's copying of the task's own lines off (on the GPU boxes every
    sample came out garbled: docs/log/demo-cuda-2026-12-05.md). The GPU recipe also trains on the env's
    own prompt; this checks the made-up ones alone: the demo's model, warm-started here on the CPU
    without the real prompt, answers the prompts of two GPUs with answers of the corpus."""
    import collections

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kernel_env.agent import tiny_model
    from kernel_env.agent.warm_start import corpus_dir_for, load_corpus, prompt, warm_start

    tiny_model.build(tmp_path / "tiny", vocab_size=4096, line_tokens=True, device="cuda")  # scripts/demo.sh's model
    warm_start(tmp_path / "tiny", tmp_path / "warm", device="cuda", log=lambda *_: None)
    tok = AutoTokenizer.from_pretrained(tmp_path / "warm")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "warm").eval()
    subs = load_corpus(corpus_dir_for("cuda"))

    def code(text):  # what the judge runs: comment lines (the answer's plan) aside
        return "\n".join(line for line in text.strip().splitlines() if not line.lstrip().startswith("#"))

    torch.manual_seed(0)
    for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
        profile = {"device_name": name, "t_ref_ms": 0.01107, "t_min_ms": 0.0007007, "flops": 786432.0,
                   "bytes": 2101248.0, "bound": "memory", "ref_roofline_frac": 0.0633}
        for task in dict.fromkeys(s.task_id for s in subs):
            answers = {code(s.answer): s.variant for s in subs if s.task_id == task}
            ids = tok.apply_chat_template([{"role": "user", "content": prompt(task, 1, profile, device="cuda")}],
                                          add_generation_prompt=True, return_tensors="pt", return_dict=True)
            with torch.no_grad():
                out = model.generate(**ids, do_sample=True, temperature=0.7, top_k=0, top_p=1.0, max_new_tokens=256,
                                     num_return_sequences=8)
            got = collections.Counter(answers.get(code(tok.decode(o[ids["input_ids"].shape[1]:], skip_special_tokens=True)),
                                                  "other") for o in out)
            assert got["other"] <= 2, (name, task, dict(got))


@pytest.mark.slow
def test_the_warm_start_can_train_on_the_prompt_the_env_server_sends(tmp_path, monkeypatch):
    """The GPU recipe's warm start trains on the env's real first message too (its device's name and
    times): an env server started later with the same judge cache and flags must send that very text."""
    from kernel_env.agent.local_server import LocalEnvServer
    from kernel_env.agent.session import EnvSession
    from kernel_env.agent.warm_start import corpus_dir_for, fetch_env_prompts, load_corpus, prompt, sft_rows

    monkeypatch.setenv("KERNEL_ENV_CACHE", str(sharing_the_precompiled_header(tmp_path / "cache")))
    args = ["--max-turns", "1", "--stats-interval-s", "0", "--timing-budget-s", "0.3"]
    task = "level2/2_Small_Scale_Add_Clamp"
    got = fetch_env_prompts([task], "cpu", args, tmp_path / "env_server.log")
    assert set(got) == {task} and "It will be timed on" in got[task] and "Reference (the PyTorch" in got[task]
    assert got[task] != prompt(task, 1)  # the timing section: the made-up prompts do not have it
    with LocalEnvServer("cpu", args, tmp_path / "env_server_2.log") as server:
        session = EnvSession(server.url, task, "eval", token=server.token)
        try:
            assert session.reset().problem == got[task]
        finally:
            session.close()
    subs = load_corpus(corpus_dir_for("cpu"), [task])
    rows = sft_rows(subs, 1, prompts_per_answer=3, env_prompts=got)
    assert [r["prompt"][0]["content"] for r in rows[1::3]] == [got[task]] * len(subs)
    assert sum(r["prompt"][0]["content"] == got[task] for r in rows) == len(subs)  # once for each answer
