"""The env server under load, driven by the real client (a GPU check; also runs on the CPU).

Starts `kernel-env serve` on loopback, measures one kernel alone (a probe session), then again while
N other sessions submit unique kernels (a comment with the session id in the kernel source forces
a real build per session), and prints the probe's speedups alone and under load, the evaluations done
and the server's /stats.

    PYTHONPATH=$PWD python3 scripts/server_load_check.py --device cuda --kernelbench-dir KB \
        --probe level1/23_Softmax=examples/submissions/23_Softmax_cuda.py --sessions 16 \
        --load level1/19_ReLU=examples/submissions/19_ReLU_cuda.py ... --out result.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernel_env.agent.local_server import LocalEnvServer  # noqa: E402
from bench.workload import unique  # noqa: E402  (a comment in the kernel source: a build of its own)
from kernel_env import KernelAction, KernelEnv  # noqa: E402
from kernel_env.tasks import split_of  # noqa: E402


def episode(server: LocalEnvServer, task: str, code: str, turns: int, timeout: float, tag: str) -> list:
    env = KernelEnv(base_url=server.url, token=server.token, message_timeout_s=timeout).sync()
    out = []
    try:
        obs = env.reset(task_id=task, split=split_of(task)).observation
        assert obs.problem
        for t in range(turns):
            r = env.step(KernelAction(code=unique(code, f"{tag}-turn{t}") if tag else code))
            o = r.observation
            out.append({"task": task, "tag": tag, "turn": t + 1, "stage": o.stage, "correct": o.correct,
                        "speedup": o.speedup, "t_new_ms": o.t_new_ms, "t_ref_ms": o.t_ref_ms, "reward": r.reward,
                        "feedback": (o.feedback or "")[:200], "t": time.time()})
            if r.done:
                break
    finally:
        env.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--kernelbench-dir", default="")
    ap.add_argument("--probe", required=True, help="TASK=FILE measured alone and under load")
    ap.add_argument("--probe-turns", type=int, default=3)
    ap.add_argument("--load", nargs="+", required=True, help="TASK=FILE pairs the load sessions cycle over")
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default="")
    ap.add_argument("--server-log", default="server.log")
    args = ap.parse_args()

    server = LocalEnvServer(args.device, ["--max-turns", str(max(args.turns, args.probe_turns)),
                                          "--stats-interval-s", "15"], args.server_log, args.kernelbench_dir).start()
    try:
        probe_task, probe_file = args.probe.split("=", 1)
        probe_code = Path(probe_file).read_text()
        t0 = time.time()
        alone = episode(server, probe_task, probe_code, args.probe_turns, args.timeout, "")
        print(f"alone: {[round(r['speedup'] or 0, 4) for r in alone]} ({time.time() - t0:.1f} s)", flush=True)

        loads = [(p.split("=", 1)[0], Path(p.split("=", 1)[1]).read_text()) for p in args.load]
        done = []
        lock = threading.Lock()

        def load_session(i):
            task, code = loads[i % len(loads)]
            res = episode(server, task, code, args.turns, args.timeout, f"session{i}-{time.time_ns()}")
            with lock:
                done.extend(res)
            return res

        t1 = time.time()
        with ThreadPoolExecutor(args.sessions + 1) as pool:
            futs = [pool.submit(load_session, i) for i in range(args.sessions)]
            time.sleep(5)  # let the load sessions start building before the probe asks for the GPU
            under = episode(server, probe_task, probe_code, args.probe_turns, args.timeout, "")
            for f in futs:
                f.result()
        wall = time.time() - t1
        req = urllib.request.Request(server.url + "/stats", headers={"Authorization": f"Bearer {server.token}"})
        stats = json.loads(urllib.request.urlopen(req, timeout=5).read())
        a = [r["speedup"] for r in alone if r["speedup"]]
        u = [r["speedup"] for r in under if r["speedup"]]
        ok = sum(1 for r in done if r["correct"])
        summary = {
            "alone": a, "under_load": u,
            "alone_median": statistics.median(a) if a else None, "under_load_median": statistics.median(u) if u else None,
            "rel_diff": (abs(statistics.median(u) / statistics.median(a) - 1) if a and u else None),
            "load_evaluations": len(done), "load_correct": ok, "load_wall_s": wall,
            "stages": {s: sum(1 for r in done if r["stage"] == s) for s in {r["stage"] for r in done}},
            "server_stats": stats,
        }
        print(json.dumps({k: v for k, v in summary.items() if k != "server_stats"}, indent=1))
        print("server stats:", json.dumps(stats))
        bad = [r for r in done if not r["correct"]]
        for r in bad[:5]:
            print("not correct:", r["task"], r["stage"], r["feedback"])
        if args.out:
            Path(args.out).write_text(json.dumps({"summary": summary, "alone": alone, "under": under, "load": done}, indent=1))
    finally:
        server.stop(30)


if __name__ == "__main__":
    main()
