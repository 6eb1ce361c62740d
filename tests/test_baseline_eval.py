"""baseline_eval.py: the helpers the trainer imports (unit tests), env sessions that survive
infrastructure failures, and the evaluation CLI against a real server (replay of the shared CPU
test kernels, a fake OpenAI-compatible endpoint, local transformers generate with a tiny model)."""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import baseline_eval  # noqa: E402  (the script under test: its CLI and the seed's imports)
from kernel_env.agent import episodes, local_server, metrics, policies, session, turns  # noqa: E402
from conftest import submission  # noqa: E402

slow = pytest.mark.slow


# -- extract_code -------------------------------------------------------------------------------

def test_extract_code_single_block():
    assert turns.extract_code("Here:\n```python\nimport torch\nclass ModelNew: pass\n```\nDone.") == \
        "import torch\nclass ModelNew: pass\n"


def test_extract_code_prefers_last_block_with_model_new():
    text = ("First a helper:\n```python\ndef helper(): pass\n```\nThe module:\n```python\nclass ModelNew:\n"
            "    pass\n```\nAnd usage:\n```python\nm = ModelNew()\n```\n")
    assert turns.extract_code(text) == "class ModelNew:\n    pass\n"


def test_extract_code_ignores_other_languages_and_prefers_python_tag():
    text = "```cpp\nint main() {}\n```\n```\nplain = 1\n```\n```py\nx = 2\n```\n```bash\nls\n```"
    assert turns.extract_code(text) == "x = 2\n"
    assert turns.extract_code("```cuda\n__global__ void k() {}\n```") == ""
    assert turns.extract_code("```\nuntagged = 1\n```") == "untagged = 1\n"


def test_extract_code_unterminated_and_edge_cases():
    assert turns.extract_code("Sure.\n```python\nimport torch\nclass ModelNew(nn.Module):\n    def f(") == \
        "import torch\nclass ModelNew(nn.Module):\n    def f(\n"
    assert turns.extract_code("```python\nx = 1```") == "x = 1\n"  # closing fence glued to the last line
    assert turns.extract_code("no code here") == ""
    assert turns.extract_code("") == ""
    assert turns.extract_code("```python\n\n```") == ""
    # a longer fence may hold ``` lines inside
    assert turns.extract_code("````python\ns = '''\n```\n'''\n````") == "s = '''\n```\n'''\n"
    assert turns.extract_code("```Python\nclass ModelNew: pass\n```") == "class ModelNew: pass\n"


# -- feedback_message ---------------------------------------------------------------------------

def _obs(**kw):
    base = dict(stage="build", correct=False, speedup=None, roofline_frac=None, feedback="Build failed: x",
                metadata={"turn": 1, "max_turns": 4})
    return SimpleNamespace(**{**base, **kw})


def test_feedback_message():
    m = turns.feedback_message(_obs(), truncated=False)
    assert "Attempt 1 of 4" in m and "build stage" in m and "Build failed: x" in m and "3 attempts left" in m
    assert "cut off" not in m and "```python" in m
    t = turns.feedback_message(_obs(metadata={"turn": 3, "max_turns": 4}), truncated=True)
    assert t.startswith("Your previous answer was cut off") and "1 attempt left" in t
    c = turns.feedback_message(_obs(stage="timed", correct=True, speedup=2.5, feedback="Correct. 2.50x faster"), False)
    assert "correct, 2.5x" in c and "faster" in c
    assert "Your attempt" in turns.feedback_message(_obs(metadata={}), False)


def test_split_task_ids_is_the_envs_split():
    from kernel_env.tasks import split_task_ids
    for split in ("train", "eval"):
        assert baseline_eval.split_task_ids(split, [1, 2, 3]) == split_task_ids(split, [1, 2, 3])
    train, held = set(baseline_eval.split_task_ids("train", [1, 2, 3])), set(baseline_eval.split_task_ids("eval", [1, 2, 3]))
    assert train and held and not train & held


# -- summarize ----------------------------------------------------------------------------------

def _t(stage, correct=False, speedup=None, frac=None, **kw):
    return {"stage": stage, "correct": correct, "speedup": speedup, "roofline_frac": frac, **kw}


def test_summarize_definitions():
    eps = [
        {"turns": [_t("build"), _t("timed", True, 2.0, 0.5), _t("timed", True, 3.0, 0.4)], "return": 1.0},
        {"turns": [_t("timed", True, 0.5, 0.1)], "return": 0.3},                       # correct, slower
        {"turns": [_t("correctness"), _t("format")], "return": 0.0},                  # compiled only
        {"turns": [_t("timed", True, 90.0, 2.0, roofline_violation=True, suspicious=True)]},  # not trusted
        {"turns": [_t("format")]},
    ]
    s = metrics.summarize(eps)
    assert s["episodes"] == 5 and s["turns"] == 8 and s["mean_turns"] == pytest.approx(1.6)
    assert s["compile_pct"] == pytest.approx(80.0)        # all but the last
    assert s["correct_pct"] == pytest.approx(40.0)        # the violation does not count
    assert s["correct_turn1_pct"] == pytest.approx(20.0)
    assert s["faster_than_ref_pct"] == pytest.approx(20.0)
    assert s["mean_speedup"] == pytest.approx((3.0 + 0.5) / 2)  # each episode's best
    assert s["median_roofline_frac"] == pytest.approx((0.5 + 0.1) / 2)
    assert s["suspicious"] == 1
    assert s["mean_return"] == pytest.approx(1.3 / 3)
    assert s["correct_by_turn"] == pytest.approx([20.0, 40.0, 40.0])
    empty = metrics.summarize([])
    assert all(empty[k] is None for k in metrics.SUMMARY_KEYS if k != "suspicious") and empty["suspicious"] == 0
    none_ok = metrics.summarize([{"turns": [_t("format")]}])
    assert none_ok["correct_pct"] == 0.0 and none_ok["mean_speedup"] is None and none_ok["median_roofline_frac"] is None
    assert metrics.summarize([{"history": [_t("timed", True, 1.5, 0.3)]}])["correct_pct"] == 100.0  # env history works too


def test_episode_return():
    assert metrics.episode_return([0.0, 0.5, 1.0], "discounted", 0.5) == pytest.approx(0.5 * 0.5 + 0.25 * 1.0)
    assert metrics.episode_return([0.0, 0.5, 0.2], "best") == 0.5
    assert metrics.episode_return([], "best") == 0.0
    with pytest.raises(ValueError):
        metrics.episode_return([1.0], "sum")


# -- EnvSession retries (fake env: no server) -----------------------------------------------------

class _FakeEnv:
    """Scripted env: `plan` is a list of per-step behaviours ('ok', 'internal', 'drop', 'refuse')."""

    opened = 0

    def __init__(self, plan):
        self.plan, self.turn = plan, 0
        _FakeEnv.opened += 1

    def reset(self, task_id, split, episode_id=None):
        self.turn = 0
        return SimpleNamespace(observation=SimpleNamespace(problem="P", metadata={"episode_id": episode_id or "e1"}))

    def step(self, action):
        what = self.plan.pop(0) if self.plan else "ok"
        if what == "drop":
            raise ConnectionError("socket closed")
        if what == "refuse":
            raise RuntimeError("Server error: unknown task (code: EXECUTION_ERROR)")
        self.turn += 1
        kind = "internal" if what == "internal" else "none"
        return SimpleNamespace(observation=SimpleNamespace(metadata={"turn": self.turn, "error_kind": kind},
                                                           feedback="f"), reward=0.0, done=False)

    def close(self):
        pass


def _session(monkeypatch, plan, retries=2):
    _FakeEnv.opened = 0
    envs = []

    def opener(self):
        envs.append(_FakeEnv(plan))
        return envs[-1]
    monkeypatch.setattr(session.EnvSession, "_open", opener)
    monkeypatch.setattr(session.time, "sleep", lambda s: None)
    return session.EnvSession("http://x", "level1/1_Small_ReLU", "train", retries=retries), envs


def test_env_session_replays_after_a_failure(monkeypatch):
    # turn 1 ok; turn 2: the socket drops, then the judge fails internally, then it works
    sess, envs = _session(monkeypatch, ["ok", "drop", "ok", "internal", "ok", "ok"])
    assert sess.reset().problem == "P"
    assert sess.step("code1").observation.metadata["turn"] == 1
    r = sess.step("code2")
    # each fresh session replayed turn 1 first, so the env's turn count is right
    assert r.observation.metadata["turn"] == 2 and sess.codes == ["code1", "code2"]
    assert len(envs) == 3 and sess.reconnects == 2 and sess.episode_id == "e1"


def test_env_session_fails_loudly(monkeypatch):
    sess, envs = _session(monkeypatch, ["drop"] * 10, retries=2)
    sess.reset()
    with pytest.raises(session.EnvFailure, match="failed 3 times"):
        sess.step("c")
    sess, envs = _session(monkeypatch, ["refuse"], retries=5)
    sess.reset()
    with pytest.raises(session.EnvFailure, match="refused"):  # not retried: retrying cannot fix it
        sess.step("c")
    assert len(envs) == 1


def test_env_session_unreachable_server_is_an_error_not_a_reward():
    sess = session.EnvSession("http://127.0.0.1:9", "level1/1_Small_ReLU", "train", timeout_s=5, retries=1,
                         backoff_s=0.05)
    with pytest.raises(session.EnvFailure, match="failed 2 times"):
        sess.reset()


def test_an_env_failure_stops_the_run_without_the_episodes_not_begun(tmp_path, monkeypatch):
    sol = tmp_path / "solutions"
    sol.mkdir()
    (sol / "level1__1_Small_ReLU.py").write_text(submission("relu_ok.py"))
    started = []
    real = baseline_eval.run_episode

    def counted(*a, **kw):
        started.append(a[2])
        return real(*a, **kw)

    monkeypatch.setattr(baseline_eval, "run_episode", counted)
    with pytest.raises(session.EnvFailure, match="failed 1 times"):
        baseline_eval.main(["--env_url", "http://127.0.0.1:9", "--policy", "replay", "--solutions", str(sol),
                            "--split", "train", "--tasks", "level1/1_Small_ReLU", "--samples", "20",
                            "--concurrency", "1", "--env_retries", "0", "--out", str(tmp_path / "out"),
                            "--no_progress"])
    assert 1 <= len(started) <= 2  # not the 20 a pool left to run would take


# -- against a real server ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("baseline_eval_server")
    srv = local_server.LocalEnvServer("cpu", ["--max-turns", "3", "--stats-interval-s", "0"], root / "server.log").start()
    yield srv
    srv.stop()
    assert srv.proc.poll() is not None


@slow
def test_replay_correct_and_wrong_kernels(server, tmp_path, capsys):
    sol = tmp_path / "solutions"
    sol.mkdir()
    # the files as the judge gets them (tests/cases.py): one shared build for all three
    (sol / "level1__1_Small_ReLU.py").write_text(submission("relu_wrong.py"))      # turn 1: wrong
    (sol / "level1__1_Small_ReLU.turn2.py").write_text(submission("relu_ok.py"))   # turn 2: fixed
    (sol / "level1__6_Small_Tanh.py").write_text(submission("tanh_ok.py"))
    out = tmp_path / "out"
    res = baseline_eval.main(["--env_url", server.url, "--env_token", server.token, "--policy", "replay", "--solutions",
                   str(sol), "--split", "train", "--tasks", "level1/1_Small_ReLU", "level1/6_Small_Tanh",
                   "level1/3_Small_Softmax", "--out", str(out), "--no_progress"])
    eps = {e["task_id"]: e for e in map(json.loads, (out / "episodes.jsonl").read_text().splitlines())}
    relu, tanh, softmax = eps["level1/1_Small_ReLU"], eps["level1/6_Small_Tanh"], eps["level1/3_Small_Softmax"]
    assert [(t["stage"], t["correct"]) for t in relu["turns"]] == [("correctness", False), ("timed", True)]
    assert relu["turns"][0]["error_kind"] == "output_mismatch" and relu["ended"] == "no_more_solutions"
    assert relu["turns"][1]["speedup"] > 0 and relu["turns"][1]["reward"] > 0 and relu["return"] > 0
    assert [(t["stage"], t["correct"]) for t in tanh["turns"]] == [("timed", True)]
    assert [t["error_kind"] for t in softmax["turns"]] == ["empty_code"]  # no file: empty submission
    assert len(relu["history"]) == 2 and relu["episode_id"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(json.dumps(res))
    assert summary["episodes"] == 3
    assert summary["compile_pct"] == pytest.approx(200 / 3) and summary["correct_pct"] == pytest.approx(200 / 3)
    assert summary["correct_turn1_pct"] == pytest.approx(100 / 3)
    assert summary["correct_by_turn"] == pytest.approx([100 / 3, 200 / 3])
    assert summary["suspicious"] == 0 and summary["mean_speedup"] > 0 and 0 < summary["median_roofline_frac"]
    assert summary["tasks"]["level1/1_Small_ReLU"]["correct_turn1_pct"] == 0.0
    assert summary["tasks"]["level1/6_Small_Tanh"]["correct_pct"] == 100.0
    table = capsys.readouterr().out
    assert "level1/1_Small_ReLU" in table and "ALL" in table and "66.7%" in table
    # without --tasks: only the tasks that have a solution file
    out2 = tmp_path / "out2"
    (sol / "level1__1_Small_ReLU.turn2.py").unlink()
    (sol / "level1__6_Small_Tanh.py").unlink()
    res2 = baseline_eval.main(["--env_url", server.url, "--env_token", server.token, "--policy", "replay", "--solutions",
                    str(sol), "--split", "train", "--out", str(out2), "--no_progress"])
    assert res2["episodes"] == 1 and res2["correct_pct"] == 0.0 and res2["compile_pct"] == 100.0


class _FakeOpenAI(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/chat/completions that answers from a script and records requests."""

    script: list = []
    seen: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        status, payload = type(self).script.pop(0)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def _completion(text, finish="stop"):
    return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}}


@slow
@pytest.mark.parametrize("use_sdk", [True, False], ids=["openai-sdk", "urllib"])
def test_openai_policy_against_fake_endpoint(server, use_sdk):
    if use_sdk:
        pytest.importorskip("openai")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        _FakeOpenAI.seen = []
        _FakeOpenAI.script = [
            _completion("Sure:\n```python\nimport torch\n", finish="length"),   # cut off: truncated
            _completion("```python\nx = 1\n```"),                                # no ModelNew
            (400, {"error": {"message": "This model's maximum context length is 4096 tokens", "type": "invalid"}}),
        ]
        pol = policies.OpenAIPolicy(f"http://127.0.0.1:{httpd.server_port}/v1", "my-model", api_key="k", max_tokens=64,
                              temperature=0.5, use_sdk=use_sdk)
        ep = episodes.run_episode(pol, server.url, "level1/4_Small_LayerNorm", "eval", token=server.token)
    finally:
        httpd.shutdown()
    assert [t["error_kind"] for t in ep["turns"]] == ["no_model_new", "no_model_new"]
    assert [t["truncated"] for t in ep["turns"]] == [True, False] and ep["ended"] == "budget"
    assert ep["codes"] == ["import torch\n", "x = 1\n"] and ep["turns"][0]["completion_tokens"] == 7
    first, second, third = _FakeOpenAI.seen
    assert first["path"] == "/v1/chat/completions" and first["model"] == "my-model" and first["max_tokens"] == 64
    assert first["auth"] == "Bearer k" and first["temperature"] == 0.5
    assert [m["role"] for m in first["messages"]] == ["user"] and "ModelNew" in first["messages"][0]["content"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][2]["content"].startswith("Your previous answer was cut off")
    assert "Attempt 1 of 3" in second["messages"][2]["content"]
    assert len(third["messages"]) == 5 and "cut off" not in third["messages"][4]["content"]


@slow
def test_transformers_policy_cli(server, tmp_path, tiny_model):
    out = tmp_path / "hf"
    res = baseline_eval.main(["--env_url", server.url, "--env_token", server.token, "--policy", "transformers", "--model",
                   str(tiny_model), "--device", "cpu", "--dtype", "float32", "--max_tokens", "8", "--samples", "2",
                   "--max_tasks", "1", "--out", str(out), "--no_progress"])
    eps = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(eps) == 2 and res["episodes"] == 2 and {e["sample"] for e in eps} == {0, 1}
    assert all(len(e["turns"]) == 3 and e["ended"] == "done" for e in eps)  # the server's 3 turns
    assert all(t["completion_tokens"] <= 8 for e in eps for t in e["turns"])
    assert res["correct_pct"] == 0.0 and res["policy"] == "transformers"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from kernel_env.agent.tiny_model import build
    return build(tmp_path_factory.mktemp("tiny_model"))
