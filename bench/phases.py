"""The benchmark's phases, the same code for every harness (this project's server, the plain harness).

A harness has `name`, `session()` (an object with `evaluate(task_id, code) -> dict` and `close()`),
`device_busy() -> (seconds a device slot was held, summed over devices; number of devices)` and
`abort()` (end the load: kill what is in flight). evaluate() returns at least: task, stage, correct,
speedup, latency_s, build_s, measure_s, queue_s (None where unknown).

1. cold/warm: a fresh build of one kernel (cold), then the same source again (warm).
2. spread alone: one kernel, not made unique (its build is cached), once to warm up, then n times.
3. load: `sessions` threads, each with its own session, take jobs from the pool in order (every job
   a unique build) until `n_evals` are taken or `load_s` has passed; meanwhile n probe evaluations of
   each spread kernel start, taking turns, spaced out over the first half, each in its own session. The window ends
   when every probe has returned and either `load_s` has passed or every load evaluation has returned
   (at most 1.5 x load_s + 30 s); what is still running then is killed and not counted.
"""
from __future__ import annotations

import threading
import time

from .workload import Sub, unique


def _fmt(r: dict) -> str:
    sp = f"speedup {r['speedup']:.3f}" if r.get("speedup") else f"stage {r.get('stage')}"
    b = f", build {r['build_s']:.1f} s" if r.get("build_s") is not None else ""
    return f"{r['task']}: {sp}, latency {r.get('latency_s', 0):.1f} s{b}"


def cold_warm(h, sub: Sub, tag: str, log) -> dict:
    s = h.session()
    try:
        code = unique(sub.code, tag)
        cold = s.evaluate(sub.task, code)
        log(f"[{h.name} cold] {_fmt(cold)}")
        warm = s.evaluate(sub.task, code)
        log(f"[{h.name} warm] {_fmt(warm)}")
    finally:
        s.close()
    return {"kernel": sub.label, "cold": cold, "warm": warm}


def spread_alone(h, probe: Sub, n: int, log) -> dict:
    s = h.session()
    try:
        first = s.evaluate(probe.task, probe.code)
        log(f"[{h.name} spread] warm-up: {_fmt(first)}")
        evals = []
        for i in range(n):
            evals.append(s.evaluate(probe.task, probe.code))
            log(f"[{h.name} spread alone {i + 1}/{n}] {_fmt(evals[-1])}")
    finally:
        s.close()
    return {"kernel": probe.label, "warmup": first, "evals": evals}


def load(h, pool: list[Sub], sessions: int, n_evals: int, load_s: float, probes_of: list[Sub], n_probes: int,
         tag: str, log, progress_s: float = 10.0) -> dict:
    """`n_probes` evaluations of each kernel of `probes_of`; each probe result names its kernel ("probe")."""
    lock = threading.Lock()
    stop = threading.Event()
    results: list[dict] = []
    probes: list[dict] = []
    counters = {"taken": 0, "in_flight": 0}
    t0 = time.monotonic()
    busy0 = h.device_busy()

    def take() -> int | None:
        with lock:
            if stop.is_set() or counters["taken"] >= n_evals or time.monotonic() - t0 >= load_s:
                return None
            counters["taken"] += 1
            counters["in_flight"] += 1
            return counters["taken"] - 1

    def worker() -> None:
        sess = None
        while (j := take()) is not None:
            sub = pool[j % len(pool)]
            try:
                sess = sess or h.session()
                r = sess.evaluate(sub.task, unique(sub.code, f"{tag}-job{j}"))
            except Exception as e:  # server gone, connection lost: a fresh session for the next job
                r = {"task": sub.task, "stage": "error", "correct": False, "error": f"{type(e).__name__}: {e}"[:300]}
                if sess is not None:
                    sess.close()
                sess = None
            with lock:
                counters["in_flight"] -= 1
                if not stop.is_set():  # finished inside the window
                    results.append({**r, "lang": sub.lang, "job": j, "t_done": time.monotonic() - t0})
        if sess is not None:
            sess.close()

    n_all = n_probes * len(probes_of)
    start_at = min(10.0, 0.1 * load_s)
    every = 0.5 * load_s / max(1, n_all)

    def prober(k: int) -> None:
        probe = probes_of[k % len(probes_of)]  # the kernels take turns
        if stop.wait(start_at + k * every):
            return
        sess = None
        try:
            sess = h.session()
            busy = counters["in_flight"]
            r = sess.evaluate(probe.task, probe.code)
            r.update(in_flight_at_start=busy, in_flight_at_end=counters["in_flight"], t_done=time.monotonic() - t0)
        except Exception as e:
            r = {"task": probe.task, "stage": "error", "correct": False, "error": f"{type(e).__name__}: {e}"[:300]}
        finally:
            if sess is not None:
                sess.close()
        if not stop.is_set():
            probes.append({**r, "probe": probe.label})

    workers = [threading.Thread(target=worker, daemon=True) for _ in range(sessions)]
    probers = [threading.Thread(target=prober, args=(k,), daemon=True) for k in range(n_all)]
    for t in workers + probers:
        t.start()
    last = t0
    load_over_at = None
    queues: list[dict] = []  # the judge's queues every 2 s (harnesses that have them)
    while True:
        time.sleep(0.5)
        now = time.monotonic()
        if hasattr(h, "queue_sample") and (not queues or now - t0 - queues[-1]["t"] >= 2):
            try:
                queues.append({"t": now - t0, **h.queue_sample()})
            except Exception:  # a missed sample is no reason to stop the load
                pass
        load_over = not any(t.is_alive() for t in workers)
        if load_over and load_over_at is None:
            load_over_at = now
        probes_over = not any(t.is_alive() for t in probers)
        if ((load_over or now - t0 >= load_s) and probes_over) or now - t0 >= 1.5 * load_s + 30:
            break
        if now - last >= progress_s:
            last = now
            log(f"[{h.name} load] {len(results)}/{n_evals} evaluations done ({counters['in_flight']} in flight), "
                f"probes {len(probes)}/{n_all}, {now - t0:.0f} s")
    t1 = time.monotonic()
    unfinished = counters["in_flight"]  # still running at the window's end: killed, not counted
    busy1 = h.device_busy()
    end_stats = h.stats() if hasattr(h, "stats") else None
    stop.set()
    h.abort()
    deadline = time.monotonic() + 30
    for t in workers + probers:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    log(f"[{h.name} load] over: {len(results)} evaluations, {len(probes)} probes in {t1 - t0:.0f} s")
    return {"sessions": sessions, "n_evals": n_evals, "load_s": load_s, "window_s": t1 - t0,
            "load_wall_s": (load_over_at or t1) - t0,  # till the last load evaluation returned
            "t0": t0, "t1": t1, "busy_s": busy1[0] - busy0[0], "n_devices": busy1[1],
            "unfinished": unfinished, "evals": results, "probes": probes, "probe_kernel": probes_of[0].label,
            "probe_kernels": [p.label for p in probes_of], "queues": queues,
            "server_stats_end": end_stats}
