"""Numbers from the phases' raw results, and the side-by-side table (project vs plain harness).

Definitions (one harness, its load phase unless said otherwise):
- evaluations per GPU-minute: load evaluations that returned inside the window / load wall minutes /
  devices (the load wall ends when the last load evaluation returns, or at the window's end);
  "second half": the same over the second half of the load wall (builds have ramped up by then);
  "with the spread probes": the probe evaluations taken under load counted too (their builds are cached).
- device slot held %: seconds some evaluation held a device's exclusive slot / (window x devices):
  the judge's device_busy_frac from /stats (two reads), or the plain harness's one lock (the
  evaluation holding it at a read included).
- still running at the end: load evaluations in flight when the window closed (killed, not counted).
- GPU util %: nvidia-smi's utilization.gpu, mean of 0.5 s samples over the window. "of it hold
  kernels": the candidate timings' hold kernels (ordered timing, kernel_env/ordered_timing.py: one
  thread waiting for the host to queue a call), summed from the run phases / window: nvidia-smi counts
  them as busy. The reference's holds (its timings are cached; rare under load) are not in it.
- CPU busy %: all CPUs' busy share over the window (/proc/stat, bench/cpu_monitor.py); in brackets the
  share of processes at a positive niceness (the env's candidate builds; the plain harness has none);
  "by kind": each kind of process's share of all CPUs, from /proc/PID/stat every second (approximate).
- build: the evaluation's build seconds (env: history timings build_s; plain: import of the
  submission, where load_inline compiles). latency: the client's wait for one step()
  (plain: from submission to result, its wait for the queue included).
- overhead per turn: latency - build - device queue wait - measurement (env: prepare + run +
  reference, the device-slot work; plain: correctness trials + timing). Both builds count from the
  candidate process's start (interpreter, imports, compile), so what is left is: env: waiting for a
  build slot, the reference worker's start, the server and the WebSocket; plain: building the models,
  the process's exit. "alone": warm + spread-alone evaluations. The goal (README.md) counts the queue
  as overhead too: add the queue row.
- timing spread: max/min of the speedups of the same kernel (correct evaluations only); under load:
  the probes that started while load evaluations were in flight. One pair of rows per probe kernel
  (--probe), the first one's unlabelled.
- slot free between slots: the load's seconds between one slot's end and the next one's start (one
  device; a slot is the last measure_s of its step, its tail included, so the next one's start may
  come before it ends: no gap then), and in brackets those where the next evaluation was still
  waiting for its run process (its ready_s at least as long as the gap).
- timings retimed: correct load evaluations whose first measurement's calls spread more than the
  judge's timing_retime_spread ((p90 - p10) / median), so it measured again; in brackets the median
  spread of first measurements.
- check of the trials: the reference worker checks the trials' outputs between the trials and the
  timing (the candidate waits; wrong outputs are never timed): the judge's seconds for that request.
- mean waiting for build slot / device: the judge's waiting_build / waiting_device from /stats every
  2 s of the load (env only).
- compile process CPU s per call: what the judge's compile processes and ninja steps reported (the
  last 500 calls in its /stats): a compile process's start (Python, torch imported, while idle; on its
  first call only, since it serves the next ones too), its own work on the call, and the compilers and
  linker of the call's ninja steps (their children's getrusage).
- run process CPU s per evaluation: the run processes' share of all CPUs (cpu_monitor.py) over the
  load window, per evaluation that finished (pooled starts included); by stage, each correct
  evaluation's own getrusage at its stages (start: interpreter and imports; warm: CUDA context and
  our kernels; plan: the task's import; trials; timing); by thread name, the mean per evaluation.
"""
from __future__ import annotations

import os


def pct(xs: list, p: float):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _overhead(r: dict):
    if r.get("latency_s") is None or r.get("measure_s") is None:
        return None
    return r["latency_s"] - (r.get("build_s") or 0.0) - (r.get("queue_s") or 0.0) - r["measure_s"]


def _spread(rs: list[dict]):
    sp = [r["speedup"] for r in rs if r.get("correct") and r.get("speedup")]
    return {"max_over_min": max(sp) / min(sp) if sp else None, "n": len(sp), "speedups": sp}


def _slot_gaps(rs: list[dict]):
    """Seconds the device slot stood free between consecutive slots (one device; a slot ends when its
    step returned and lasted measure_s), and the part of them in which the next evaluation was still
    waiting for its run process (its ready_s at least the gap). None without the judge's timings."""
    slots = sorted((r["t_start"] + r["latency_s"] - r["measure_s"], r["t_start"] + r["latency_s"],
                    (r.get("timings") or {}).get("ready_s"))
                   for r in rs if r.get("measure_s") and r.get("t_start") is not None and r.get("timings"))
    if len(slots) < 2:
        return None
    total = ready = 0.0
    for (_, end, _), (start, _, rd) in zip(slots, slots[1:]):
        gap = start - end
        if gap > 0:
            total += gap
            ready += gap if rd is not None and rd >= gap else 0.0
    return total, ready


def summarize(res: dict, gpu_mon=None, gpus=None, cpu_mon=None) -> dict:
    """One harness's summary from its phases' results (see run_all.py)."""
    out: dict = {}
    cw, sp, ld = res.get("cold_warm"), res.get("spread"), res.get("load")
    if cw:
        out["cold_latency_s"], out["cold_build_s"] = cw["cold"].get("latency_s"), cw["cold"].get("build_s")
        out["warm_latency_s"], out["cold_stage"] = cw["warm"].get("latency_s"), cw["cold"].get("stage")
    alone = ([cw["warm"]] if cw else []) + (sp["evals"] if sp else [])
    out["overhead_alone_p50_s"] = pct([_overhead(r) for r in alone], 50)
    if any(r.get("judge_s") is not None for r in alone):
        out["server_overhead_alone_p50_s"] = pct([r["latency_s"] - r["judge_s"] for r in alone
                                                  if r.get("judge_s") is not None], 50)
    if sp:
        out["spread_alone"] = _spread(sp["evals"])
    main_probe = (ld or {}).get("probe_kernel")

    def under_load(kernel):  # a probe kernel's evaluations that started while the load ran
        return _spread([r for r in ld["probes"] if r.get("in_flight_at_start")
                        and r.get("probe", main_probe) == kernel])  # older runs: one kernel, unnamed

    # the other probe kernels: their spreads alone and under load, by kernel
    more = {m["kernel"]: {"alone": _spread(m["evals"])} for m in res.get("spread_more") or []}
    if ld:
        errors = [r for r in ld["evals"] if r.get("stage") == "error"]  # the client failed: no evaluation
        ev = [r for r in ld["evals"] if r.get("stage") != "error"]
        out["load_client_errors"] = len(errors)
        wall, ndev = max(ld["load_wall_s"], 1e-9), ld["n_devices"]
        half = [r for r in ev if r["t_done"] >= wall / 2]
        out.update({
            "sessions": ld["sessions"], "load_evaluations": len(ev), "load_unfinished": ld.get("unfinished"),
            "load_correct": sum(1 for r in ev if r.get("correct")),
            "load_stages": {s: sum(1 for r in ev if r.get("stage") == s) for s in {r.get("stage") for r in ev}},
            "load_wall_s": wall, "window_s": ld["window_s"], "devices": ndev,
            "evals_per_gpu_min": len(ev) / (wall / 60) / ndev,
            "evals_per_gpu_min_2nd_half": len(half) / (wall / 120) / ndev,
            # the spread probes under load are evaluations too (cached builds): with them the slot's
            # work compares across runs that took different numbers of probes
            "evals_and_probes_per_gpu_min": (len(ev) + sum(1 for r in ld["probes"] if r.get("stage") != "error"
                                                           and r.get("t_done", wall) <= wall)) / (wall / 60) / ndev,
            "device_slot_held_pct": 100 * ld["busy_s"] / (ld["window_s"] * ndev),
            "build_p50_s": pct([r.get("build_s") for r in ev], 50),
            "build_p95_s": pct([r.get("build_s") for r in ev], 95),
            "build_compiled_p50_s": pct([r.get("build_s") for r in ev if r.get("lang") != "triton"], 50),
            "build_compiled_p95_s": pct([r.get("build_s") for r in ev if r.get("lang") != "triton"], 95),
            "build_triton_p50_s": pct([r.get("build_s") for r in ev if r.get("lang") == "triton"], 50),
            "build_triton_p95_s": pct([r.get("build_s") for r in ev if r.get("lang") == "triton"], 95),
            "latency_p50_s": pct([r.get("latency_s") for r in ev], 50),
            "latency_p95_s": pct([r.get("latency_s") for r in ev], 95),
            "queue_p50_s": pct([r.get("queue_s") for r in ev], 50),
            "queue_p95_s": pct([r.get("queue_s") for r in ev], 95),
            "build_wait_p50_s": pct([r.get("build_wait_s") for r in ev], 50),
            "build_wait_p95_s": pct([r.get("build_wait_s") for r in ev], 95),
            "overhead_load_p50_s": pct([_overhead(r) for r in ev], 50),
            "overhead_load_p95_s": pct([_overhead(r) for r in ev], 95),
            "spread_under_load": under_load(main_probe),
            "probes_done": len(ld["probes"]),
            "measure_p50_s": pct([r.get("measure_s") for r in ev], 50),
        })
        # where a device slot goes (env only: the judge's timings and the run process's phases)
        tm = [r.get("timings") or {} for r in ev if r.get("correct")]
        ph = [r.get("run_phases") or {} for r in ev if r.get("correct")]
        if any(tm):
            # the judge's clock from the slot's start to its release (service.py timings; run_stage.drive's clock)
            out["slot_p50_s"] = {k: pct([t.get(k) for t in tm], 50) for k in
                                 ("prepare_s", "run_s", "reference_s", "outputs_s", "timed_s", "done_s", "close_s", "slot_s",
                                  "tail_s")}
            out["slot_p50_s"].update({k: pct([p.get(k) for p in ph], 50) for k in
                                      ("import_s", "trials_s", "timing_s", "warmup_s", "profile_s")})
            # the reference worker's share of its requests (check: before the timing; compare: after it)
            for req, keys in (("check", ("inputs_s", "forward_s", "compare_s", "free_s")),
                              ("compare", ("inputs_s", "forward_s", "compare_s", "give_back_s"))):
                out["slot_p50_s"].update({f"{req}_{k}": pct([((r.get("ref_phases") or {}).get(req) or {}).get(k)
                                                             for r in ev if r.get("correct")], 50) for k in keys})
            # the reference worker's check of the trials, between them and the timing
            out["slot_p50_s"]["check_s"] = pct([((r.get("ref_phases") or {}).get("check") or {}).get("s")
                                                for r in ev if r.get("correct")], 50)
        # where a run process's CPU goes, by stage (its own claim: getrusage at each stage) and by thread
        cpu_st = [p["cpu_s"] for p in ph if isinstance(p.get("cpu_s"), dict) and "done" in p["cpu_s"]]
        if cpu_st:
            stages = (("start", None, "imported"), ("warm", "imported", "warmed"), ("plan", "warmed", "ready"),
                      ("trials", "ready", "outputs"), ("timing", "outputs", "done"), ("total", None, "done"))
            out["run_cpu_p50_s"] = {name: pct([c.get(b, 0) - (c.get(a, 0) if a else 0) for c in cpu_st if b in c], 50)
                                    for name, a, b in stages}
            threads: dict = {}
            for p in ph:
                for k, v in (p.get("thread_cpu_s") or {}).items():
                    threads[k] = threads.get(k, 0.0) + v / len(cpu_st)
            out["run_cpu_threads_mean_s"] = dict(sorted(threads.items(), key=lambda kv: -kv[1])[:5])
        # measurements taken again: their calls spread wider than timing_retime_spread (disturbed)
        first = [p["timing_spreads"] for p in ph if p.get("timing_spreads")]
        if first:
            out["retimed_pct"] = 100 * sum(len(x) > 1 for x in first) / len(first)
            out["first_spread_p50"] = pct([x[0] for x in first], 50)
        gaps = _slot_gaps(ev + list(ld.get("probes") or [])) if ndev == 1 else None
        if gaps:
            out["slot_gaps_s"], out["slot_gaps_ready_s"] = gaps
        qs = ld.get("queues") or []
        if qs:
            out["waiting_build_mean"] = sum(q["waiting_build"] or 0 for q in qs) / len(qs)
            out["waiting_device_mean"] = sum(q["waiting_device"] or 0 for q in qs) / len(qs)
        if gpu_mon is not None:
            out["gpu_util_pct"] = gpu_mon.mean(ld["t0"], ld["t1"], gpus)
        cpu = cpu_mon.usage(ld["t0"], ld["t1"]) if cpu_mon is not None else None
        if cpu:
            out["cpu_busy_pct"], out["cpu_niced_pct"], out["cpu_by_kind_pct"] = cpu["busy_pct"], cpu["niced_pct"], cpu["by_kind"]
            if ev:  # all run processes' CPU (pooled starts included) over the evaluations that finished
                out["run_cpu_per_eval_s"] = (cpu["by_kind"].get("run processes", 0.0) / 100 * (os.cpu_count() or 1)
                                             * ld["window_s"] / len(ev))
        # the slot by task and kind of kernel: the tasks' inputs differ by thousands of times in size
        by: dict = {}
        for r in ev:
            if r.get("correct") and (r.get("timings") or {}).get("slot_s") is not None:
                by.setdefault(f"{r.get('task')} {r.get('lang')}", []).append(r["timings"]["slot_s"])
        if by:
            out["slot_p50_by_task_s"] = {k: {"n": len(v), "p50": pct(v, 50)} for k, v in sorted(by.items())}
        holds = [p.get("hold_us") for p in ph]
        if any(x is not None for x in holds):
            out["hold_us_p50"] = pct(holds, 50)
        # the run processes' warm-up steps (the judge's stats: s on its clock, p50 of each step) and
        # how many of them were stopped because a timing began while they were under way
        judge = (ld.get("server_stats_end") or {}).get("judge") or {}
        if judge.get("warm_steps_s"):
            out["warm_steps_p50_s"] = [v["p50"] for _, v in sorted(judge["warm_steps_s"].items(), key=lambda kv: int(kv[0]))]
            out["warm_steps_stopped"] = judge.get("warm_steps_stopped")
        if judge.get("compile_cpu_s"):
            out["compile_cpu_s"] = judge["compile_cpu_s"]
        # ordered timing's hold kernels keep the GPU "busy" to nvidia-smi while it waits for the host
        held = [(r.get("run_phases") or {}).get("hold_s") for r in ev + list(ld.get("probes") or [])]
        if any(x is not None for x in held):
            out["hold_pct"] = 100 * sum(x or 0.0 for x in held) / (ld["window_s"] * ndev)
        for k in more:
            more[k]["under_load"] = under_load(k)
    if more:
        out["probe_spreads"] = more
    return out


def _f(x, nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}"


def _pair(a, b, nd=2):
    return f"{_f(a, nd)} / {_f(b, nd)}"


def rows(s: dict) -> list[tuple[str, str]]:
    sa, su = s.get("spread_alone") or {}, s.get("spread_under_load") or {}
    return [
        ("load: sessions, evaluations (correct)",
         f"{s.get('sessions', 'n/a')}, {s.get('load_evaluations', 'n/a')} ({s.get('load_correct', 'n/a')})"
         + (f", {s['load_client_errors']} client errors" if s.get("load_client_errors") else "")),
        ("  still running at the end (not counted)",
         "n/a" if s.get("load_unfinished") is None else str(s["load_unfinished"])),
        ("load wall s", _f(s.get("load_wall_s"), 1)),
        ("evaluations per GPU-minute", _f(s.get("evals_per_gpu_min"))),
        ("  second half of the load", _f(s.get("evals_per_gpu_min_2nd_half"))),
        ("  with the spread probes under load", _f(s.get("evals_and_probes_per_gpu_min"))),
        ("device slot held %", _f(s.get("device_slot_held_pct"), 1)),
        ("GPU util % (nvidia-smi)", _f(s.get("gpu_util_pct"), 1)),
        ("  of it hold kernels of the timing %", _f(s.get("hold_pct"), 1)),
        ("CPU busy % (of it niced processes: builds)", f"{_f(s.get('cpu_busy_pct'), 1)} ({_f(s.get('cpu_niced_pct'), 1)})"),
        ("  by kind of process %", ", ".join(f"{k} {v:.1f}" for k, v in (s.get("cpu_by_kind_pct") or {}).items()
                                             if v >= 0.5) or "n/a"),
        ("build s p50 / p95, load_inline", _pair(s.get("build_compiled_p50_s"), s.get("build_compiled_p95_s"))),
        ("build s p50 / p95, Triton (import)", _pair(s.get("build_triton_p50_s"), s.get("build_triton_p95_s"))),
        ("latency s p50 / p95", _pair(s.get("latency_p50_s"), s.get("latency_p95_s"))),
        ("device queue wait s p50 / p95", _pair(s.get("queue_p50_s"), s.get("queue_p95_s"))),
        ("build slot wait s p50 / p95", _pair(s.get("build_wait_p50_s"), s.get("build_wait_p95_s"))),
        ("run process ready s p50 / p95", _pair(s.get("ready_p50_s"), s.get("ready_p95_s"))),
        ("timings retimed % (first calls' spread p50)", f"{_f(s.get('retimed_pct'), 1)} ({_f(s.get('first_spread_p50'), 3)})"),
        ("slot free between slots s (next run process not ready)",
         f"{_f(s.get('slot_gaps_s'), 1)} ({_f(s.get('slot_gaps_ready_s'), 1)})"),
        ("mean waiting for build slot / device", _pair(s.get("waiting_build_mean"), s.get("waiting_device_mean"), 1)),
        ("measurement (device slot) s p50", _f(s.get("measure_p50_s"))),
        ("  prepare / run / reference s p50", " / ".join(_f((s.get("slot_p50_s") or {}).get(k))
                                                          for k in ("prepare_s", "run_s", "reference_s"))),
        ("  run: import / trials / check of the trials / timing s p50",
         " / ".join(_f((s.get("slot_p50_s") or {}).get(k)) for k in ("import_s", "trials_s", "check_s", "timing_s"))),
        ("  judge's clock: go-outputs / check / time-timed / timed-done / slot; its tail: end of process / compare / tail s p50",
         " / ".join(_f((s.get("slot_p50_s") or {}).get(k)) for k in ("outputs_s", "check_s", "timed_s", "done_s", "slot_s"))
         + "; " + " / ".join(_f((s.get("slot_p50_s") or {}).get(k)) for k in ("close_s", "reference_s", "tail_s"))),
        ("  timing's warm-up / kernel share s p50",
         " / ".join(_f((s.get("slot_p50_s") or {}).get(k)) for k in ("warmup_s", "profile_s"))),
        ("  hold before each timed call us p50", _f(s.get("hold_us_p50"), 0)),
    ] + [(f"  slot s p50, {k} (n)", f"{_f(v['p50'])} ({v['n']})") for k, v in (s.get("slot_p50_by_task_s") or {}).items()] + [
        ("  check: inputs / forward / compare / free; compare: inputs / forward / compare / give back s p50",
         " / ".join(_f((s.get("slot_p50_s") or {}).get(f"check_{k}")) for k in ("inputs_s", "forward_s", "compare_s", "free_s"))
         + "; " + " / ".join(_f((s.get("slot_p50_s") or {}).get(f"compare_{k}"))
                             for k in ("inputs_s", "forward_s", "compare_s", "give_back_s"))),
        ("run process CPU s per evaluation (all run processes)", _f(s.get("run_cpu_per_eval_s"))),
        ("  p50 start / warm / plan / trials / timing (total)",
         " / ".join(_f((s.get("run_cpu_p50_s") or {}).get(k)) for k in ("start", "warm", "plan", "trials", "timing"))
         + f" ({_f((s.get('run_cpu_p50_s') or {}).get('total'))})"),
        ("  by thread, mean s", ", ".join(f"{k} {v:.2f}" for k, v in (s.get("run_cpu_threads_mean_s") or {}).items())
         or "n/a"),
        ("run processes' warm-up steps s p50 (steps stopped for a timing)",
         (" / ".join(_f(x, 3) for x in s["warm_steps_p50_s"]) + f" ({s.get('warm_steps_stopped')})")
         if s.get("warm_steps_p50_s") else "n/a"),
        ("compile process CPU s per call, mean: start / own work / compilers and linker (n)",
         (" / ".join(_f(s["compile_cpu_s"][k]["mean"]) for k in ("start", "python", "compilers"))
          + f" ({s['compile_cpu_s']['n']})") if s.get("compile_cpu_s") else "n/a"),
        ("cold eval latency s (its build s)", f"{_f(s.get('cold_latency_s'))} ({_f(s.get('cold_build_s'))})"),
        ("warm eval latency s", _f(s.get("warm_latency_s"))),
        ("overhead/turn s alone p50", _f(s.get("overhead_alone_p50_s"))),
        ("overhead/turn s under load p50 / p95", _pair(s.get("overhead_load_p50_s"), s.get("overhead_load_p95_s"))),
        ("timing spread max/min alone (n)", f"{_f(sa.get('max_over_min'), 4)} ({sa.get('n', 0)})"),
        ("timing spread max/min under load (n)", f"{_f(su.get('max_over_min'), 4)} ({su.get('n', 0)})"),
    ] + [(f"  {k.split('=')[0]}: alone / under load (n)",
          f"{_f(v['alone']['max_over_min'], 4)} ({v['alone']['n']}) / "
          f"{_f((v.get('under_load') or {}).get('max_over_min'), 4)} ({(v.get('under_load') or {}).get('n', 0)})")
         for k, v in (s.get("probe_spreads") or {}).items()]


def table(summaries: dict[str, dict]) -> str:
    names = {"env": "env (this project)", "env_ray": "env on Ray (--ray local)", "plain": "plain harness"}
    cols = list(summaries)
    body = {c: dict(rows(summaries[c])) for c in cols}
    labels = list(dict.fromkeys(label for c in cols for label, _ in rows(summaries[c])))
    w0 = max(len(x) for x in labels)
    ws = [max(len(names.get(c, c)), *(len(v) for v in body[c].values())) for c in cols]
    line = lambda cells: "  ".join(x.ljust(w) for x, w in zip(cells, [w0, *ws])).rstrip()  # noqa: E731
    out = [line(["metric", *(names.get(c, c) for c in cols)]), line(["-" * w0, *("-" * w for w in ws)])]
    out += [line([label, *(body[c].get(label, "n/a") for c in cols)]) for label in labels]
    return "\n".join(out)


def ray_against_local(local: dict, on_ray: dict) -> str:
    """The Ray-backed server against the local one, same workload: throughput ratio, and whether the
    same kernels got the same verdicts (the spread phase: the same probe sources on both)."""
    a, b = local["summary"], on_ray["summary"]
    ratio = (b["evals_per_gpu_min"] / a["evals_per_gpu_min"]
             if a.get("evals_per_gpu_min") and b.get("evals_per_gpu_min") is not None else None)
    runs = lambda res: [(r.get("stage"), r.get("correct")) for sp in [res.get("spread") or {},  # noqa: E731
                                                                     *res.get("spread_more", [])]
                        for r in sp.get("evals", [])]
    va, vb = runs(local), runs(on_ray)
    same = sum(x == y for x, y in zip(va, vb))
    load = lambda x: f"{x.get('load_correct')}/{x.get('load_evaluations')}"  # noqa: E731
    return (f"on Ray / local: evaluations per GPU-minute {_f(ratio, 3)}x; spread-phase verdicts (stage, correct) "
            f"the same for {same} of {max(len(va), len(vb))}; load correct/evaluated {load(a)} local, "
            f"{load(b)} on Ray")
