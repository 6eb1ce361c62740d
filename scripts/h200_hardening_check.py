"""The hardening check through a real env server: faults and reward hacks, each in a session of
its own, and after every fault the honest kernel in a fresh session (the device keeps giving correct
verdicts); then one round of 4 faults and 4 honest sessions at once; then, once the server has stopped, no
candidate process left and the GPU memory back where it was. First, what the judge's two candidate processes can reach, as
the judge wraps them: the build process must not reach the GPU (cuInit through the driver, with
CUDA_VISIBLE_DEVICES set: only its hidden device files stand in the way), the run process must.

    PYTHONPATH=$PWD python3 scripts/h200_hardening_check.py --device cuda --kernelbench-dir KB --out DIR
    python scripts/h200_hardening_check.py --device cpu --out DIR    # the CPU small tasks: keeps it from rotting

Cases on cuda: tests/faults_cuda/*.py and the gpu_*.py files of tests/hacks and tests/honest, honest
kernel examples/submissions/19_ReLU_cuda.py. On cpu: the CPU faults of tests/submissions and two hacks,
honest kernel tests/submissions/relu_ok.py. A file's task and expected verdict come from its docstring
("Task: level1/19_ReLU ... Expected: stage run, run_timeout, "Timed out"." or "Expected: timed"), the
same lines tests/test_hacks.py checks against its table. The server gets a task folder of its own: the
small tasks plus the KernelBench tasks the cases name. Extensions are built first, in parallel (each
file only up to its load_inline call). Writes table.md, results.json and server.log to --out; exits 1
when a verdict differs from its expectation, an honest run is not correct, a candidate process is
left, or the device memory in use grew by more than 1 GiB.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from kernel_env.agent.local_server import LocalEnvServer  # noqa: E402
from kernel_env import KernelAction, KernelEnv  # noqa: E402
from kernel_env.judge.config import default_cache_dir  # noqa: E402
from kernel_env.judge.builds import build_key  # noqa: E402
from kernel_env.tasks import split_of, task_folder  # noqa: E402
from bench.workload import submission  # noqa: E402  (a test file as the judge gets it: tests/cases.py)

HONEST = {"cuda": ("level1/19_ReLU", ROOT / "examples/submissions/19_ReLU_cuda.py"),
          "cpu": ("level1/1_Small_ReLU", ROOT / "tests/submissions/relu_ok.py")}
# CPU faults whose docstrings name the fault but not the verdict (tests/submissions/README.md)
CPU_TABLE = {"relu_segfault.py": ("level1/1_Small_ReLU", "run", "crash", "SIGSEGV"),
             "relu_hang.py": ("level1/1_Small_ReLU", "run", "run_timeout", "Timed out"),
             "relu_wrong.py": ("level1/1_Small_ReLU", "correctness", "output_mismatch", "outside tolerance")}
CPU_FILES = ["tests/submissions/relu_segfault.py", "tests/submissions/relu_hang.py", "tests/submissions/relu_wrong.py",
             "tests/hacks/cpp_forge_protocol.py", "tests/hacks/tensor_method_relu.py"]
# wrong, or timed no faster than its honest twin (tests/test_hacks.py GPU_NO_GAIN)
NO_GAIN = {"gpu_side_stream_no_wait.py": "gpu_side_stream_wait.py"}
MEM_SLACK = 1 << 30


def expected_from_doc(path: Path) -> dict:
    """task, stage, kind and a feedback phrase from a case file's docstring (stage None: not stated)."""
    doc = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
    task = re.search(r"Task: (level\d+/[\w.\-]*\w)", doc)
    exp = re.search(r'Expected: (?:stage (\w+), (\w+)|(timed))(?:,? "([^"]+)")?', doc)
    stage, kind = (exp.group(1), exp.group(2)) if exp and exp.group(1) else ("timed", "none") if exp else (None, None)
    return {"task": task.group(1) if task else None, "stage": stage, "kind": kind,
            "says": exp.group(4) if exp else None}


def load_cases(device: str) -> list[dict]:
    if device == "cuda":
        files = sorted((ROOT / "tests/faults_cuda").glob("*.py")) + sorted((ROOT / "tests/hacks").glob("gpu_*.py")) \
            + sorted((ROOT / "tests/honest").glob("gpu_*.py"))
    else:
        files = [ROOT / f for f in CPU_FILES]
    cases = []
    for p in files:
        c = {"name": p.name, "path": p, **expected_from_doc(p)}
        if p.name in CPU_TABLE:
            c.update(zip(("task", "stage", "kind", "says"), CPU_TABLE[p.name]))
        if c["task"] is None or (c["stage"] is None and p.name not in NO_GAIN):
            raise SystemExit(f"{p}: no 'Task:' or 'Expected:' line in its docstring")
        c["expected"] = (f"wrong, or not faster than {NO_GAIN[p.name]}" if p.name in NO_GAIN
                         else f"{c['stage']}/{c['kind']}")
        c["fault"] = c["stage"] != "timed"
        cases.append(c)
    return cases


# ---------------------------------------------------------------- setup
def through_load_inline(source: str) -> str | None:
    """The module up to its last load_inline statement: builds the extension, runs nothing else
    (oom_at_import.py would take the GPU's memory)."""
    tree = ast.parse(source)
    calls = [n for n in tree.body if any(isinstance(c, ast.Call) and "load_inline" in ast.unparse(c.func)
                                         for c in ast.walk(n))]
    return "\n".join(source.splitlines()[: calls[-1].end_lineno]) if calls else None


def prebuild_extensions(paths: list[Path], cache_dir: Path, device: str, fast_build: str = "shim") -> dict:
    """One build per distinct build folder (judge.service.build_key), all at once, where the judge looks."""
    todo = {}
    for p in paths:
        src = submission(p)
        code = through_load_inline(src)
        if code:
            todo.setdefault(build_key(src), (p, code))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    # built the way the judge's candidates build (candidate/fast_build.py), or the judge would build again
    from kernel_env.judge import prebuild as pch
    pch_dir = pch.known(cache_dir, device == "cuda")
    env["KERNEL_ENV_CUDA_PRELUDE"] = fast_build
    if pch_dir:
        env["KERNEL_ENV_PCH_DIR"] = str(pch_dir)
    todo = {k: (p, "from kernel_env.candidate import fast_build\nfast_build.install()\n" + code)
            for k, (p, code) in todo.items()}
    t0, procs = time.time(), {}
    for key, (p, code) in todo.items():
        d = cache_dir / "torch_extensions" / key
        d.mkdir(parents=True, exist_ok=True)
        procs[p.name] = subprocess.Popen([sys.executable, "-c", code], env={**env, "TORCH_EXTENSIONS_DIR": str(d)},
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    failed = {name: pr.communicate()[1][-500:] for name, pr in procs.items() if pr.wait() != 0}
    return {"extensions": sorted(procs), "failed": failed, "wall_s": round(time.time() - t0, 1)}


def start_server(args, tasks_dir: Path, cache_dir: Path, log_path: Path) -> LocalEnvServer:
    return LocalEnvServer(args.device, ["--cache-dir", str(cache_dir), "--max-turns", "1", "--run-timeout-s",
                                        str(args.run_timeout_s), "--timing-budget-s", str(args.timing_budget_s),
                                        "--fast-build", args.fast_build, "--policy", args.policy],
                          log_path, str(tasks_dir), ready_timeout_s=300).start()


# ---------------------------------------------------------------- running
def judge_once(server: LocalEnvServer, task: str, path: Path, timeout: float) -> dict:
    """One session: reset on the task, one step with the file's code."""
    t0 = time.time()
    try:
        env = KernelEnv(base_url=server.url, token=server.token, message_timeout_s=timeout).sync()
        try:
            env.reset(task_id=task, split=split_of(task))
            r = env.step(KernelAction(code=submission(path)))
            hist = env.state().history
        finally:
            env.close()
    except Exception as e:  # the server or the connection failed: a result, not a crash of this script
        return {"stage": "client_error", "error_kind": None, "correct": False, "reward": None, "speedup": None,
                "t_new_ms": None, "feedback": f"{type(e).__name__}: {e}", "wall_s": round(time.time() - t0, 1)}
    o = r.observation
    return {"stage": o.stage, "error_kind": (o.metadata or {}).get("error_kind"), "correct": bool(o.correct),
            "reward": r.reward, "speedup": o.speedup, "t_new_ms": o.t_new_ms, "feedback": o.feedback or "",
            "wall_s": round(time.time() - t0, 1), "timings": hist[-1].get("timings") if hist else None,
            "run_phases": hist[-1].get("run_phases") if hist else None}


def honest_ok(res: dict) -> bool:
    return res["stage"] == "timed" and res["correct"] and (res["reward"] or 0) > 0


def matches(case: dict, res: dict, results: dict) -> bool:
    if case["name"] in NO_GAIN:
        twin = results.get(NO_GAIN[case["name"]], {})
        return res["stage"] == "correctness" or (res["stage"] == "timed" and bool(twin.get("t_new_ms"))
                                                 and res["t_new_ms"] > 0.5 * twin["t_new_ms"])
    if (res["stage"], res["error_kind"]) != (case["stage"], case["kind"]):
        return False
    if case["says"] and case["says"] not in res["feedback"]:
        return False
    return honest_ok(res) if case["stage"] == "timed" else not res["correct"] and not res["reward"]


# what a candidate process sees: the driver (not torch, whose CUDA_VISIBLE_DEVICES a native kernel could
# ignore), its capabilities, its network, and which folders it can write (its own only)
_VIEW = r"""
import ctypes, json, os, socket, sys
def writes(d):
    try:
        open(os.path.join(d, "kernel_env_view_probe"), "w").close()
        return True
    except OSError:
        return False
try:
    cuda = ctypes.CDLL("libcuda.so.1")
    rc = cuda.cuInit(0)
    n = ctypes.c_int(0)
    count = n.value if rc == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 else 0
except OSError as e:
    rc, count = f"no driver ({e})", 0
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
print(json.dumps({"cuInit": rc, "devices": count, "cap_eff": caps, "net": [n for _, n in socket.if_nameindex()],
                  "writes": {d: writes(d) for d in sys.argv[1:]}}))
"""


def sandbox_view(device: str, cache_dir: Path) -> list[dict]:
    """The build and the run process of the judge, wrapped as the judge wraps them, report what they reach
    (the GPU: build no, run yes) and which folders they can write (their own, not the project's code, the
    judge's cache or the folder holding theirs)."""
    from kernel_env.judge.sandbox import child_env, gpu_device_nodes, isolation, wrap
    mode = isolation("auto")
    rows = []
    for proc, hide in (("build", gpu_device_nodes()), ("run", [])):
        d = Path(tempfile.mkdtemp(prefix="view-"))
        (d / "w").mkdir()
        env = child_env(d / "w", {"CUDA_VISIBLE_DEVICES": "0" if device == "cuda" else ""})
        folders = [d / "w", d, ROOT / "kernel_env", cache_dir]
        r = subprocess.run(wrap(mode, [sys.executable, "-c", _VIEW, *map(str, folders)], d / "w", [], hide=hide),
                           env=env, capture_output=True, text=True, timeout=120)
        planted = [str(f) for f in folders[1:] if (f / "kernel_env_view_probe").exists()]  # landed outside
        shutil.rmtree(d, ignore_errors=True)
        for f in planted:
            Path(f, "kernel_env_view_probe").unlink(missing_ok=True)
        try:
            seen = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            seen = {"error": (r.stdout + r.stderr)[-300:]}
        reaches = seen.get("cuInit") == 0 and seen.get("devices", 0) > 0
        ok = (not reaches) if proc == "build" else (reaches or device != "cuda")
        # its own folder written; nothing outside it on disk (bwrap's cover of the folder holding it is
        # a tmpfs of its own, writable and gone with it)
        ok = ok and seen.get("writes", {}).get(str(folders[0])) is True and (mode == "none" or not planted)
        rows.append({"case": f"sandbox ({mode}): {proc} process", "task": "-",
                     "expected": "no GPU" if proc == "build" else "the GPU", "stage": "GPU" if reaches else "no GPU",
                     "error_kind": None, "reward": None, "ok": ok, "honest_after": None,
                     "feedback": json.dumps({**seen, "landed_outside": planted}), "hidden_files": len(hide)})
    return rows


def candidate_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line.strip()[:160] for line in out.splitlines() if "kernel_env.candidate.runner" in line]


def device_memory_used(device: str) -> int | None:
    """Bytes in use on the device (all processes; this probe's own context included, the same each time)."""
    if device != "cuda":
        return None
    r = subprocess.run([sys.executable, "-c", "import torch; f, t = torch.cuda.mem_get_info(); print(t - f)"],
                       capture_output=True, text=True)
    return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip().isdigit() else None


def cell(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--kernelbench-dir", default=os.environ.get("KERNELBENCH_DIR", ""))
    ap.add_argument("--out", required=True, help="folder for table.md, results.json and server.log")
    ap.add_argument("--cache-dir", default=None, help="judge cache (default $KERNEL_ENV_CACHE or ~/.cache/kernel_env)")
    ap.add_argument("--run-timeout-s", type=float, default=None, help="the judge's run timeout (default 20 cuda, 15 cpu)")
    ap.add_argument("--timing-budget-s", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=900, help="client timeout per step")
    ap.add_argument("--fast-build", default="shim", choices=("core", "shim", "aten"), help="the server's --fast-build")
    ap.add_argument("--only", nargs="*", default=None, help="case file names to run (default: all)")
    ap.add_argument("--policy", default="auto", help="the server's --policy (the cases' expectations hold under both)")
    ap.add_argument("--concurrent", type=int, default=4, help="faults (and as many honest sessions) at once; 0: skip")
    ap.add_argument("--round-only", action="store_true", help="faults only in the round at once, not one by one")
    args = ap.parse_args()
    args.run_timeout_s = args.run_timeout_s or (20.0 if args.device == "cuda" else 15.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    cases = [c for c in load_cases(args.device) if args.only is None or c["name"] in args.only]
    honest_task, honest_path = HONEST[args.device]
    tasks_dir = task_folder({c["task"] for c in cases} | {honest_task}, args.kernelbench_dir)
    build = prebuild_extensions([c["path"] for c in cases] + [honest_path], cache_dir, args.device, args.fast_build)
    print(f"prebuilt {len(build['extensions'])} extension(s) in {build['wall_s']} s; failed: {list(build['failed'])}",
          flush=True)
    mem_before = device_memory_used(args.device)
    server = start_server(args, tasks_dir, cache_dir, out / "server.log")
    results, rows, bad = {}, sandbox_view(args.device, cache_dir), []
    for r in rows:
        print(f"{r['case']}: {r['stage']} {r['feedback']}", flush=True)
    try:
        # a first honest run: the task's reference profile is made here, not inside a fault case
        warm = judge_once(server, honest_task, honest_path, args.timeout)
        rows.append({"case": f"honest ({honest_path.name}, first)", "task": honest_task, "expected": "timed/none",
                     **warm, "ok": honest_ok(warm), "honest_after": None})
        for c in cases:
            if args.round_only and c["fault"] and c["name"] not in NO_GAIN:
                continue
            res = judge_once(server, c["task"], c["path"], args.timeout)
            results[c["name"]] = res
            after = judge_once(server, honest_task, honest_path, args.timeout) if c["fault"] else None
            rows.append({"case": c["name"], "task": c["task"], "expected": c["expected"], **res, "ok": None,
                         "honest_after": None if after is None else honest_ok(after),
                         "honest_after_verdict": after and {k: after[k] for k in ("stage", "error_kind", "feedback")}})
            print(f"{c['name']:34s} {res['stage']}/{res['error_kind']} reward={res['reward']} ({res['wall_s']} s)"
                  + ("" if after is None else f"; honest after: {after['stage']} ({after['wall_s']} s)"), flush=True)
        by_name = {c["name"]: c for c in cases}
        for row in rows:  # after all of them: the no-gain case compares with its twin
            if row["case"] in results:
                row["ok"] = matches(by_name[row["case"]], results[row["case"]], results)

        # one round at once: 4 faults and 4 honest sessions
        faults = [c for c in cases if c["fault"] and c["name"] not in NO_GAIN][:args.concurrent]
        jobs = [(f"at once: {c['name']}", c) for c in faults] + [(f"at once: honest #{i + 1}", None)
                                                                 for i in range(min(4, args.concurrent))]
        t0 = time.time()
        with ThreadPoolExecutor(max(1, len(jobs))) as pool:
            futs = [pool.submit(judge_once, server, c["task"] if c else honest_task, c["path"] if c else honest_path,
                                args.timeout) for _, c in jobs]
            for (label, c), f in zip(jobs, futs):
                res = f.result()
                rows.append({"case": label, "task": c["task"] if c else honest_task,
                             "expected": c["expected"] if c else "timed/none", **res,
                             "ok": matches(c, res, results) if c else honest_ok(res), "honest_after": None})
        print(f"concurrent round: {len(jobs)} sessions in {time.time() - t0:.1f} s", flush=True)
    finally:
        # the judge keeps idle run processes and a reference worker between evaluations: what must be
        # gone is checked once the server has stopped
        server.stop(30)
        shutil.rmtree(tasks_dir, ignore_errors=True)
    leftovers = candidate_processes()
    for _ in range(15):  # processes of the last runs may still be going away
        if not leftovers:
            break
        time.sleep(1)
        leftovers = candidate_processes()
    mem_after = device_memory_used(args.device)

    bad = [r["case"] for r in rows if not r["ok"] or r["honest_after"] is False]
    grew = mem_before is not None and mem_after is not None and mem_after - mem_before > MEM_SLACK
    gib = lambda b: "n/a" if b is None else f"{b / 2**30:.2f} GiB"  # noqa: E731
    lines = [f"# Hardening check ({args.device}, {time.strftime('%Y-%m-%d %H:%M')}, {time.time() - t_start:.0f} s)", "",
             f"- prebuild: {len(build['extensions'])} extension(s) in {build['wall_s']} s, failed: {list(build['failed'])}",
             f"- candidate processes left: {len(leftovers)}" + "".join(f"\n  - `{p}`" for p in leftovers),
             f"- device memory in use: before {gib(mem_before)}, after {gib(mem_after)}" + (" (GREW)" if grew else ""),
             f"- verdicts not as expected: {bad or 'none'}", "",
             "| case | task | expected | stage | error_kind | reward | honest-after ok | feedback excerpt |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        mark = "" if r["ok"] else " **(differs)**"
        reward = "-" if r["reward"] is None else f"{r['reward']:.3f}"
        after = "-" if r["honest_after"] is None else ("yes" if r["honest_after"] else "**no**")
        lines.append(f"| {cell(r['case'])} | {r['task']} | {cell(r['expected'])} | {r['stage']}{mark} | "
                     f"{r['error_kind']} | {reward} | {after} | {cell(r['feedback'][:150])} |")
    table = "\n".join(lines) + "\n"
    print(table)
    (out / "table.md").write_text(table)
    (out / "results.json").write_text(json.dumps(
        {"device": args.device, "prebuild": build, "rows": rows, "leftover_candidates": leftovers,
         "device_memory_before": mem_before, "device_memory_after": mem_after, "not_as_expected": bad,
         "wall_s": round(time.time() - t_start, 1)}, indent=1, default=str))
    return 1 if bad or leftovers or grew else 0


if __name__ == "__main__":
    sys.exit(main())
