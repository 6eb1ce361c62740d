"""report.py: renders a self-contained HTML page from a run folder (synthetic here; the real files
of a trainer run and a replay baseline are rendered in test_grpo.py)."""
from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["level1/1_Small_ReLU", "level1/2_Small_Matmul", "level1/3_Small_Softmax", "level1/6_Small_Tanh"]
EVAL_TASKS = ["level1/4_Small_LayerNorm", "level2/2_Small_Scale_Add_Clamp"]


def _turn(k, rng, skill):
    r = rng.random()
    if r > skill + 0.3:
        return {"turn": k, "stage": "build", "correct": False, "speedup": None, "reward": 0.0,
                "roofline_frac": None, "suspicious": False, "roofline_violation": False, "feedback": "Build failed"}
    if r > skill:
        return {"turn": k, "stage": "correctness", "correct": False, "speedup": None, "reward": 0.0,
                "roofline_frac": None, "suspicious": False, "roofline_violation": False, "feedback": "mismatch"}
    sp = round(0.3 + 2 * rng.random() * skill, 3)
    return {"turn": k, "stage": "timed", "correct": True, "speedup": sp, "reward": 0.3 + 0.2 * sp,
            "roofline_frac": round(0.05 + 0.4 * skill * rng.random(), 3), "suspicious": False,
            "roofline_violation": False, "feedback": f"Correct. {sp}x", "policy": "strict",
            "kernel_share": round(0.5 + 0.5 * skill, 3)}


def make_run(run: Path, steps: int = 10, eval_every: int = 5, seed: int = 0) -> Path:
    """A fake run folder: rollouts (2 ranks), trainer_state.json, suspicious.jsonl."""
    rng = random.Random(seed)
    run.mkdir(parents=True, exist_ok=True)
    hist = []
    files = [open(run / f"rollouts-rank{r}.jsonl", "w") for r in range(2)]
    for step in range(steps):
        skill = 0.1 + 0.6 * step / steps
        rewards = []
        for j in range(8):
            task = TASKS[(step * 2 + j // 4) % len(TASKS)]
            turns = []
            for k in range(1, 4):
                turns.append(_turn(k, rng, min(0.9, skill + 0.1 * k)))
                if turns[-1]["correct"] and rng.random() < 0.5:
                    break
            ret = sum(0.9 ** i * t["reward"] for i, t in enumerate(turns))
            rewards.append(ret)
            ep = {"task_id": task, "mode": "train", "step": step, "turns": turns, "codes": ["x"] * len(turns),
                  "return": ret, "ended": "done"}
            files[j % 2].write(json.dumps(ep) + "\n")
        hist.append({"step": step + 1, "loss": 0.01 * rng.random(), "reward": sum(rewards) / len(rewards)})
        if (step + 1) % eval_every == 0:
            for task in EVAL_TASKS:
                turns = [_turn(k, rng, skill) for k in range(1, 4)]
                ep = {"task_id": task, "mode": "eval", "step": step + 1, "turns": turns, "codes": ["y"] * 3,
                      "return": sum(t["reward"] for t in turns), "ended": "done"}
                files[0].write(json.dumps(ep) + "\n")
            hist.append({"step": step + 1, "eval_reward": 0.2 + skill})
    for f in files:
        f.close()
    (run / "trainer_state.json").write_text(json.dumps({"global_step": steps, "log_history": hist}))
    flagged = {"task_id": TASKS[0], "mode": "train", "step": 7, "turn": 2, "stage": "timed", "correct": True,
               "speedup": 480.0, "roofline_frac": 1.7, "suspicious": True, "roofline_violation": True,
               "feedback": "below the speed-of-light floor",
               "code": "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x  # <script>alert(1)</script>\n"}
    (run / "suspicious.jsonl").write_text(json.dumps(flagged) + "\n")
    return run


def make_baseline(folder: Path, seed: int = 1) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    eps = []
    for task in EVAL_TASKS * 2:
        turns = [_turn(k, rng, 0.15) for k in range(1, 4)]
        eps.append({"task_id": task, "mode": "eval", "turns": turns, "codes": [""] * 3})
    (folder / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
    from kernel_env.agent.metrics import summarize
    (folder / "summary.json").write_text(json.dumps(summarize(eps)))
    return folder


def _images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_report_renders_every_section(tmp_path):
    run = make_run(tmp_path / "run")
    base = make_baseline(tmp_path / "baseline")
    out = tmp_path / "page.html"
    r = subprocess.run([sys.executable, str(ROOT / "report.py"), str(run), "--baseline", str(base / "summary.json"),
                        "--out", str(out)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    for heading in ("Summary", "Training and eval curves", "Improvement over turns", "Per task",
                    "Baseline vs trained", "Flagged kernels"):
        assert f"<h2>{heading}</h2>" in page, heading
    imgs = _images(page)
    assert len(imgs) == 4 and all(i.startswith(b"\x89PNG") and len(i) > 10_000 for i in imgs)
    assert "http://" not in page and "https://" not in page and "<script" not in page  # self-contained, escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the flagged kernel's code, escaped
    assert "level1/2_Small_Matmul" in page and "baseline" in page
    assert "eval (step 10)" in page and "eval (step 5)" in page
    # the field's metrics: fast_1.2 and the geometric mean in the table, kernel share when recorded
    table = page[page.index("<h2>Summary</h2>"):page.index("<h2>Training and eval curves</h2>")]
    for col in ("<th>fast_1.2</th>", "<th>geomean speedup</th>", "<th>kernel share</th>"):
        assert col in table, col


def test_report_baseline_as_episodes_and_sparse_runs(tmp_path):
    import report
    run = make_run(tmp_path / "run", steps=2, eval_every=100)  # no eval episodes
    (run / "suspicious.jsonl").unlink()
    base = make_baseline(tmp_path / "baseline")
    page = report.render(run, str(base / "episodes.jsonl"))
    assert "No kernel was flagged" in page and "Needs a baseline" in page
    assert len(_images(page)) == 4  # the comparison still shows the baseline alone
    # only TRL's log (no rollouts): curves come from the logged kernel/* metrics
    only_log = tmp_path / "only_log"
    (only_log / "checkpoint-3").mkdir(parents=True)
    (only_log / "checkpoint-3" / "trainer_state.json").write_text(json.dumps({"log_history": [
        {"step": 1, "reward": 0.0, "kernel/compile_pct": 10.0, "kernel/correct_pct": 0.0},
        {"step": 2, "reward": 0.1, "kernel/compile_pct": 30.0, "kernel/correct_pct": 10.0, "kernel/mean_speedup": 0.8},
        {"step": 2, "eval_reward": 0.1, "eval_kernel/compile_pct": 20.0}]}))
    page = report.render(only_log)
    assert "eval (step 2)" in page  # the logged eval_kernel/* metrics
    assert len(_images(page)) >= 3
    assert "<th>fast_1.2</th>" in page and "<th>kernel share</th>" not in page  # a log from before: shown missing
    # a log with the new keys: they reach the table (its rows are the eval steps)
    (only_log / "checkpoint-3" / "trainer_state.json").write_text(json.dumps({"log_history": [
        {"step": 1, "reward": 0.1, "kernel/correct_pct": 50.0, "kernel/fast_1.2_pct": 25.0},
        {"step": 1, "eval_kernel/correct_pct": 50.0, "eval_kernel/fast_1.2_pct": 25.0, "eval_kernel/mean_speedup": 1.5,
         "eval_kernel/geomean_speedup": 1.25, "eval_kernel/mean_kernel_share": 0.75, "eval_kernel/pass@1": 50.0}]}))
    page = report.render(only_log)
    assert "<th>kernel share</th>" in page and "<td>25.0%</td>" in page and "<td>1.25</td>" in page
    assert "<td>0.75</td>" in page
    # an old baseline summary.json (the seed's keys only) next to new episodes
    old = tmp_path / "old_baseline.json"
    old.write_text(json.dumps({k: v for k, v in json.loads((base / "summary.json").read_text()).items()
                               if k in ("compile_pct", "correct_pct", "correct_turn1_pct", "faster_than_ref_pct",
                                        "mean_speedup", "median_roofline_frac", "suspicious", "episodes")}))
    page = report.render(make_run(tmp_path / "run2", steps=4, eval_every=2), str(old))
    assert "baseline" in page and len(_images(page)) == 4
    with pytest.raises(SystemExit):
        report.render(tmp_path / "baseline")  # no run files at all


def test_report_many_tasks_shows_the_best_bars(tmp_path):
    import report
    run = tmp_path / "many"
    run.mkdir()
    eps = [{"task_id": f"level1/{k}_T", "mode": "train", "step": 0, "ended": "done",
            "turns": [_turn(1, random.Random(k), 0.9)]} for k in range(45)]
    (run / "rollouts-rank0.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
    page = report.render(run)
    assert all(f"level1/{k}_T" in page for k in range(45))  # every task in the table
    assert len(_images(page)) == 3  # no eval, no baseline: no comparison figure
