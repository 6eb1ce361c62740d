"""Several front doors (env servers) for one run: parsing `--env_url` lists, episodes spread over
the doors (baseline_eval's CLI, the trainer's rollout function), and a door that goes away mid-episode
or before the run: its episodes are replayed on the other door, none is lost.

Two real servers on loopback (CPU device, the built-in small tasks, one token for both). Every
submission fails the judge's format stage (empty code, no ModelNew), which is answered without a
build: the tests are about routing, not judging.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import baseline_eval  # noqa: E402
from kernel_env.agent.session import EnvFailure, EnvSession, parse_env_urls  # noqa: E402
from test_server import TOKEN, Server, _free_port  # noqa: E402

slow = pytest.mark.slow
TASK = "level1/1_Small_ReLU"  # one task: a door profiles each task on its first reset (~10 s on a CPU)
NO_MODEL_NEW = "import torch\nx = 1\n"  # the format stage answers it in milliseconds
MAX_TURNS = 2


# -- parsing --------------------------------------------------------------------------------------

def test_parse_env_urls_good_lists():
    assert parse_env_urls("local") == ["local"]
    assert parse_env_urls("http://a:8000") == ["http://a:8000"]
    assert parse_env_urls(" http://a:8000 , https://b.example/ ,ws://10.0.0.3:9000,wss://c") == \
        ["http://a:8000", "https://b.example/", "ws://10.0.0.3:9000", "wss://c"]


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("  ", "empty"),
    ("http://a:8000,", "entry 2 is empty"),
    ("http://a:8000,,http://b:8000", "entry 2 is empty"),
    ("local,http://a:8000", "cannot be mixed"),
    ("a:8000", "not a server URL"),
    ("ftp://a:8000", "not a server URL"),
    ("http://", "not a server URL"),
    ("http://a:port", "not a URL"),
    ("http://a:8000,http://a:8000/", "twice"),
])
def test_parse_env_urls_bad_lists(text, message):
    with pytest.raises(ValueError, match=message):
        parse_env_urls(text)


def test_bad_list_stops_the_cli_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit):
        baseline_eval.main(["--env_url", "http://a:8000,local", "--policy", "replay", "--solutions", str(tmp_path),
                            "--out", str(tmp_path / "out")])
    assert "cannot be mixed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_every_door_down_fails_loudly_and_backs_off_only_on_a_tried_door():
    doors = [f"http://127.0.0.1:{_free_port()}", f"http://127.0.0.1:{_free_port()}"]  # nothing listens
    sess = EnvSession(doors, TASK, "train", token=TOKEN, timeout_s=5, retries=2, backoff_s=1.0, first_door=1)
    t0 = time.monotonic()
    with pytest.raises(EnvFailure, match="failed 3 times") as e:
        sess.reset()
    took = time.monotonic() - t0
    # door 1, then door 0 at once (not tried yet), then one wait of backoff_s before door 1 again
    assert sess.doors_tried == [doors[1], doors[0]] and doors[0] in str(e.value) and doors[1] in str(e.value)
    assert 1.0 <= took < 4.0


# -- two real front doors -------------------------------------------------------------------------

def counts(door: Server) -> tuple[int, int]:
    """(episodes reset, steps judged) on this door so far."""
    env = door.stats()["env"]
    return env["episodes"], env["steps"]


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    root = tmp_path_factory.mktemp("front_doors")
    # both start at once, sharing the test session's judge cache as the doors of one cluster would
    pair = [Server(root / name, "--max-turns", str(MAX_TURNS), cache=Path(os.environ["KERNEL_ENV_CACHE"]))
            for name in ("a", "b")]
    try:
        for d in pair:
            d.wait_ready()
        # a door's first reset waits for the judge's bytecode cache and the task's profile: not in
        # the timed tests (both doors at once)
        def first_reset(door):
            s = EnvSession(door.url, TASK, "train", token=TOKEN, timeout_s=120)
            s.reset()
            s.close()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(first_reset, pair))
        yield pair
    finally:
        for d in pair:
            d.stop()


def _cli(doors_arg: str, out: Path, samples: int) -> list[dict]:
    """baseline_eval of TASK with replay and no solution file: one empty submission an episode."""
    sol = out.parent / "no_solutions"
    sol.mkdir(exist_ok=True)
    baseline_eval.main(["--env_url", doors_arg, "--env_token", TOKEN, "--policy", "replay", "--solutions", str(sol),
                        "--tasks", TASK, "--split", "train", "--samples", str(samples),
                        "--concurrency", "4", "--env_timeout_s", "60", "--env_retries", "2", "--out", str(out),
                        "--no_progress"])
    return [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]


@slow
def test_cli_spreads_episodes_over_both_doors(doors, tmp_path):
    a, b = doors
    before = [counts(d) for d in doors]
    eps = _cli(f"{a.url},{b.url}", tmp_path / "run", samples=6)
    assert len(eps) == 6
    assert all(len(e["turns"]) == 1 and e["turns"][0]["error_kind"] == "empty_code" for e in eps)
    assert sorted(e["env_url"] for e in eps) == sorted([a.url, b.url] * 3)
    assert all(e["env_reconnects"] == 0 for e in eps)
    # each door judged its half, as its own counters say
    after = [counts(d) for d in doors]
    assert [(x[0] - y[0], x[1] - y[1]) for x, y in zip(after, before)] == [(3, 3)] * 2


@slow
def test_rollout_spreads_over_doors_and_rotates_across_calls(doors, tmp_path):
    import grpo_kernel
    from kernel_env.agent.tiny_model import build_tokenizer
    from test_grpo import FakeTrainer, _kargs, _script

    a, b = doors
    tok = build_tokenizer(512)
    script, _, _ = _script(tok)
    trainer = FakeTrainer(tok, script)
    rollout = grpo_kernel.make_rollout_func(_kargs(), str(tmp_path), [a.url, b.url], TOKEN)
    for _ in range(2):
        out = rollout([TASK] * 3, trainer)
        assert out["episode_return"] == [0.0] * 3
    eps = [json.loads(x) for x in (tmp_path / "rollouts-rank0.jsonl").read_text().splitlines()]
    # three episodes a call: the second call starts where the first one ended
    assert [e["env_url"] for e in eps] == [a.url, b.url, a.url, b.url, a.url, b.url]
    assert all(len(e["turns"]) == MAX_TURNS and len(e["history"]) == MAX_TURNS for e in eps)


@slow
def test_a_door_lost_mid_episode_or_before_the_run_costs_replays_not_episodes(doors, tmp_path):
    a, b = doors
    n = 6
    a_before = counts(a)
    turn1_done = threading.Barrier(n + 1, timeout=60)
    go = threading.Event()
    results: list = [None] * n

    def episode(i: int):
        # a long backoff: moving to a door not tried yet must not wait for it
        sess = EnvSession([a.url, b.url], TASK, "train", token=TOKEN, timeout_s=60, retries=2,
                          backoff_s=60.0, first_door=i)
        try:
            sess.reset()
            sess.step(NO_MODEL_NEW)
            started_at, minted = sess.base_url, sess.episode_id
            turn1_done.wait()
            go.wait(60)
            last = sess.step(NO_MODEL_NEW)
            results[i] = dict(started_at=started_at, minted=minted, ended_at=sess.base_url, last=last,
                              state=sess.state(), reconnects=sess.reconnects, tried=list(sess.doors_tried))
        except BaseException as e:  # reported by the main thread
            results[i] = e
        finally:
            sess.close()

    threads = [threading.Thread(target=episode, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    turn1_done.wait()  # every episode has its turn 1 judged, half of them on door b
    b.stop()  # door b goes away with three episodes open on it
    t0 = time.monotonic()
    go.set()
    for t in threads:
        t.join(90)
    assert time.monotonic() - t0 < 30
    assert not [r for r in results if not isinstance(r, dict)], results

    assert [r["started_at"] for r in results] == [a.url, b.url] * (n // 2)
    for r in results:
        moved = r["started_at"] == b.url
        assert r["ended_at"] == a.url and r["reconnects"] == int(moved)
        assert r["tried"] == ([b.url, a.url] if moved else [a.url])
        # door a took the episode id door b minted and rebuilt its history from the replayed turn
        assert r["state"].episode_id == r["minted"] and [h["turn"] for h in r["state"].history] == [1, 2]
        assert r["last"].done and r["last"].observation.metadata["turn"] == MAX_TURNS
    # door a: its own three episodes and the three replayed ones, two turns each (turn 1 judged again)
    a_after = counts(a)
    assert (a_after[0] - a_before[0], a_after[1] - a_before[1]) == (n, 2 * n)

    # the door stays down: a new run over both doors loses nothing, and the other door takes it all
    t0 = time.monotonic()
    eps = _cli(f"{a.url},{b.url}", tmp_path / "run_after", samples=6)
    assert len(eps) == 6 and all(e["env_url"] == a.url and len(e["turns"]) == 1 for e in eps)
    assert sorted(e["env_reconnects"] for e in eps) == [0] * 3 + [1] * 3
    assert time.monotonic() - t0 < 30  # moving to the live door costs no backoff (5 s by default)
