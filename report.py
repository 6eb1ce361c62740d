"""The run report: one self-contained HTML page (plots embedded as PNG) from a grpo_kernel.py run.

    python report.py RUN_DIR [--baseline SUMMARY_OR_EPISODES] [--out FILE.html] [--max-flagged 50]

Reads from RUN_DIR (all optional but at least one must be there):
- rollouts-rank*.jsonl  every episode the trainer ran (train and eval), one JSON record per line;
- trainer_state.json    TRL's log_history (RUN_DIR's own, else the newest checkpoint-*'s);
- suspicious.jsonl      turns the judge flagged (speedup over its threshold, time under the roofline floor).
`--baseline` is a baseline_eval.py `summary.json` or its `episodes.jsonl` (or their folder).

Sections: train and eval curves per step (compile / correct / faster-than-reference / fast_1.2 %,
mean and geometric mean best speedup, median roofline fraction and mean kernel share, reward);
improvement over turns (correct and compiled by turn k, best so far); per-task best speedup and
roofline fraction; baseline vs trained (the last eval step); the flagged kernels with their code.
Metric definitions: kernel_env.agent.metrics (docs/metrics.md). Runs and baselines from before a
metric existed show it as missing ("–", "n/a", no line).

A train episode's `step` is the global step when it was generated: the optimizer step it trains is
step + 1, which is where the curves put it (and where TRL logs its metrics). Eval episodes are put at
their own step. Written to RUN_DIR/report.html unless --out.
"""
from __future__ import annotations

import argparse
import base64
import glob
import html
import io
import json
import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernel_env.agent.metrics import summarize, turn_results  # noqa: E402

PCT_KEYS = [("compile_pct", "compiled"), ("correct_pct", "correct (any turn)"),
            ("correct_turn1_pct", "correct at turn 1"), ("faster_than_ref_pct", "faster than reference"),
            ("fast_1.2_pct", "fast_1.2 (> 1.2x)")]
COLORS = {"compile_pct": "#7f7f7f", "correct_pct": "#2ca02c", "correct_turn1_pct": "#98df8a",
          "faster_than_ref_pct": "#1f77b4", "fast_1.2_pct": "#9467bd", "train": "#ff7f0e", "eval": "#1f77b4",
          "baseline": "#7f7f7f"}


# -- loading ------------------------------------------------------------------------------------

def read_jsonl(path) -> list[dict]:
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut by a crash mid-write
    return out


def load_rollouts(run: Path) -> list[dict]:
    eps = []
    for p in sorted(glob.glob(str(run / "rollouts-rank*.jsonl"))):
        eps += read_jsonl(p)
    return eps


def load_log_history(run: Path) -> list[dict]:
    cands = [run / "trainer_state.json"]
    ckpts = sorted(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]) if p.name.split("-")[-1].isdigit() else -1)
    cands += [c / "trainer_state.json" for c in reversed(ckpts)]
    best = []
    for c in cands:  # the longest history (a final save_state, or the newest checkpoint)
        if c.is_file():
            try:
                hist = json.loads(c.read_text()).get("log_history", [])
            except (OSError, json.JSONDecodeError):
                continue
            if len(hist) > len(best):
                best = hist
    return best


def load_baseline(path: str | None) -> tuple[dict | None, list[dict]]:
    """(summary, episodes) from a baseline_eval summary.json, episodes.jsonl, or their folder."""
    if not path:
        return None, []
    p = Path(path)
    if p.is_dir():
        eps = read_jsonl(p / "episodes.jsonl") if (p / "episodes.jsonl").is_file() else []
        summ = json.loads((p / "summary.json").read_text()) if (p / "summary.json").is_file() else None
        return summ or (summarize(eps) if eps else None), eps
    if p.suffix == ".jsonl":
        eps = read_jsonl(p)
        return summarize(eps), eps
    summ = json.loads(p.read_text())
    sib = p.parent / "episodes.jsonl"
    return summ, read_jsonl(sib) if sib.is_file() else []


# -- aggregation --------------------------------------------------------------------------------

def plot_step(ep: dict) -> int:
    s = ep.get("step") or 0
    return s + 1 if ep.get("mode") == "train" else s


def by_step(eps: list[dict], mode: str) -> dict[int, dict]:
    groups = defaultdict(list)
    for ep in eps:
        if ep.get("mode") == mode:
            groups[plot_step(ep)].append(ep)
    return {s: summarize(g) for s, g in sorted(groups.items())}


def by_turn(eps: list[dict]) -> dict[str, list]:
    """% of episodes compiled / correct by turn k (best so far), and mean reward of turn k."""
    n = len(eps)
    kmax = max((len(ep.get("turns") or []) for ep in eps), default=0)
    comp, corr, rew = [0] * kmax, [0] * kmax, [[] for _ in range(kmax)]
    for ep in eps:
        turns = turn_results(ep) if ep.get("turns") else []
        c1 = next((k for k, t in enumerate(turns) if t.compiled), None)
        c2 = next((k for k, t in enumerate(turns) if t.counts_correct), None)
        for k in range(kmax):
            comp[k] += c1 is not None and c1 <= k
            corr[k] += c2 is not None and c2 <= k
        for k, t in enumerate(turns):
            rew[k].append(t.reward)
    return {"compiled": [100 * c / n for c in comp] if n else [], "correct": [100 * c / n for c in corr] if n else [],
            "reward": [sum(r) / len(r) if r else None for r in rew], "episodes_with_turn": [len(r) for r in rew]}


def per_task_best(eps: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for ep in eps:
        d = out.setdefault(ep["task_id"], {"episodes": 0, "correct_eps": 0, "best_speedup": None,
                                            "best_roofline_frac": None, "modes": set()})
        d["episodes"] += 1
        d["modes"].add(ep.get("mode") or "?")
        ok = [t for t in (turn_results(ep) if ep.get("turns") else []) if t.counts_correct]
        d["correct_eps"] += bool(ok)
        for t in ok:
            for key, src in (("best_speedup", "speedup"), ("best_roofline_frac", "roofline_frac")):
                v = getattr(t, src)
                if v is not None and math.isfinite(v) and (d[key] is None or v > d[key]):
                    d[key] = v
    return dict(sorted(out.items()))


# -- plotting -----------------------------------------------------------------------------------

def fig_to_img(fig, alt: str) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


def _no_data(ax, text="no data"):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#888", fontsize=12)


def _series(summ_by_step: dict, key: str):
    xs = [s for s, v in summ_by_step.items() if v.get(key) is not None]
    return xs, [summ_by_step[s][key] for s in xs]


def _log_series(hist: list[dict], key: str):
    pts = [(h["step"], h[key]) for h in hist if key in h and h[key] is not None and "step" in h]
    return [p[0] for p in pts], [p[1] for p in pts]


def curves_figure(train: dict, evals: dict, hist: list[dict]) -> str:
    fig, axes = plt.subplots(3, 2, figsize=(12, 10.5))
    (a_tr, a_ev), (a_sp, a_rf), (a_rw, a_ln) = axes
    for ax, summ, tag in ((a_tr, train, "train"), (a_ev, evals, "held-out eval")):
        drawn = False
        for key, label in PCT_KEYS:
            xs, ys = _series(summ, key)
            if xs:
                drawn = True
                ax.plot(xs, ys, "-", marker="o", ms=4, color=COLORS[key], label=label)
        ax.set(title=f"{tag}: episodes compiled / correct / faster (%)", xlabel="step", ylabel="% of episodes",
               ylim=(-3, 103))
        ax.legend(fontsize=8, loc="best") if drawn else _no_data(ax, "no eval episodes (--eval_strategy steps)"
                                                                   if tag != "train" else "no data")
    # each panel: its key (circles), and a second one (squares) drawn only where the run logged it
    for ax, key, extra, title, ylabel in (
            (a_sp, "mean_speedup", ("geomean_speedup", "geomean"), "Best speedup of correct episodes: mean, geomean",
             "x reference"),
            (a_rf, "median_roofline_frac", ("mean_kernel_share", "kernel share"),
             "Median best roofline fraction (correct episodes)", "t_min / t_new (1 = speed of light)")):
        drawn = extra_drawn = False
        for summ, tag in ((train, "train"), (evals, "eval")):
            xs, ys = _series(summ, key)
            if xs:
                drawn = True
                ax.plot(xs, ys, "-" if tag == "train" else "--", marker="o", ms=4, color=COLORS[tag], label=tag)
            xs, ys = _series(summ, extra[0])
            if xs:
                drawn = extra_drawn = True
                ax.plot(xs, ys, "-" if tag == "train" else "--", marker="s", ms=4, color=COLORS[tag], alpha=0.55,
                        label=f"{tag} {extra[1]}")
        if key == "mean_speedup" and drawn:
            ax.axhline(1.0, color="#aaa", lw=1, ls=":")
        if key == "median_roofline_frac" and extra_drawn:
            title, ylabel = ("Median best roofline fraction; mean kernel share (squares)",
                             "fraction (roofline: t_min / t_new; share of device time)")
        ax.set(title=title, xlabel="step", ylabel=ylabel)
        ax.legend(fontsize=8) if drawn else _no_data(ax, "no correct kernel yet")
    drawn = False
    for key, tag, style in (("reward", "train (TRL log)", "-"), ("eval_reward", "eval (TRL log)", "--")):
        xs, ys = _log_series(hist, key)
        if xs:
            drawn = True
            a_rw.plot(xs, ys, style, marker="o", ms=4, color=COLORS["train" if "train" in tag else "eval"], label=tag)
    if not drawn:  # no TRL log: the episodes' own returns
        for summ, tag in ((train, "train"), (evals, "eval")):
            xs, ys = _series(summ, "mean_return")
            if xs:
                drawn = True
                a_rw.plot(xs, ys, marker="o", ms=4, color=COLORS[tag], label=f"{tag} (episode return)")
    a_rw.set(title="Mean episode reward", xlabel="step", ylabel="reward")
    a_rw.legend(fontsize=8) if drawn else _no_data(a_rw)
    drawn = False
    for summ, tag in ((train, "train"), (evals, "eval")):
        xs, ys = _series(summ, "mean_turns")
        if xs:
            drawn = True
            a_ln.plot(xs, ys, "-" if tag == "train" else "--", marker="o", ms=4, color=COLORS[tag], label=tag)
    a_ln.set(title="Mean judged turns per episode", xlabel="step", ylabel="turns")
    a_ln.legend(fontsize=8) if drawn else _no_data(a_ln)
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    return fig_to_img(fig, "train and eval curves")


def turns_figure(groups: list[tuple[str, list[dict]]]) -> str:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
    drawn = False
    palette = ["#ff7f0e", "#1f77b4", "#7f7f7f", "#2ca02c", "#9467bd"]
    for (name, eps), color in zip(groups, palette):
        if not eps:
            continue
        bt = by_turn(eps)
        ks = list(range(1, len(bt["correct"]) + 1))
        if not ks:
            continue
        drawn = True
        a1.plot(ks, bt["correct"], "-", marker="o", color=color, label=f"{name}: correct")
        a1.plot(ks, bt["compiled"], ":", marker="s", color=color, label=f"{name}: compiled")
        kr = [k for k, r in zip(ks, bt["reward"]) if r is not None]
        a2.plot(kr, [r for r in bt["reward"] if r is not None], marker="o", color=color, label=name)
    a1.set(title="Improvement over turns (best so far, % of episodes)", xlabel="turn", ylabel="%", ylim=(-3, 103))
    a2.set(title="Mean reward of turn k", xlabel="turn", ylabel="reward")
    a2.set_ylim(bottom=min(0.0, a2.get_ylim()[0]), top=max(0.05, a2.get_ylim()[1]))
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=8) if drawn else _no_data(ax)
    fig.tight_layout()
    return fig_to_img(fig, "improvement over turns")


MAX_TASK_BARS = 40


def tasks_figure(tasks: dict[str, dict]) -> str:
    names = list(tasks)
    if len(names) > MAX_TASK_BARS:  # the best ones; the table below lists every task
        names = sorted(names, key=lambda n: (-(tasks[n]["best_speedup"] or 0.0), n))[:MAX_TASK_BARS]
    h = max(3.0, 0.32 * len(names) + 1.2)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, h), sharey=True)
    y = list(range(len(names)))
    sp = [tasks[n]["best_speedup"] or 0.0 for n in names]
    rf = [tasks[n]["best_roofline_frac"] or 0.0 for n in names]
    a1.barh(y, sp, color=["#2ca02c" if v > 1 else "#ff7f0e" if v > 0 else "#ddd" for v in sp])
    a1.axvline(1.0, color="#555", lw=1, ls=":")
    a1.set(title="Best speedup of a correct kernel (x reference)"
           + (f", top {len(names)} of {len(tasks)} tasks" if len(names) < len(tasks) else ""), xlabel="speedup")
    a2.barh(y, rf, color="#1f77b4")
    a2.set(title="Best roofline fraction of a correct kernel", xlabel="t_min / t_new (1 = speed of light)",
           xlim=(0, max(1.0, max(rf, default=0) * 1.05)))
    a1.set_yticks(y, names, fontsize=8)
    a1.invert_yaxis()
    for ax, vals in ((a1, sp), (a2, rf)):
        for yy, v in zip(y, vals):
            ax.text(v, yy, f" {v:.3g}" if v else " none correct", va="center", fontsize=7, color="#333")
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig_to_img(fig, "per-task best speedup and roofline fraction")


def compare_figure(cols: list[tuple[str, dict]]) -> str:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [3, 1.3]})
    width = 0.8 / max(1, len(cols))
    palette = ["#7f7f7f", "#aec7e8", "#1f77b4", "#ff7f0e"]
    for c, ((name, s), color) in enumerate(zip(cols, palette)):
        xs = [k + (c - (len(cols) - 1) / 2) * width for k in range(len(PCT_KEYS))]
        raw = [s.get(k) for k, _ in PCT_KEYS]  # None: not in this summary (an older one) or no episode
        vals = [v or 0.0 for v in raw]
        bars = a1.bar(xs, vals, width, label=name, color=color)
        a1.bar_label(bars, [f"{v:.0f}" if v is not None else "n/a" for v in raw], fontsize=7)
        for dx, key, hatch in ((-0.18, "mean_speedup", None), (0.18, "geomean_speedup", "//")):
            sp = s.get(key)
            b = a2.bar([c + dx], [sp or 0.0], 0.34, color=color, hatch=hatch, edgecolor="#444" if hatch else None,
                       label=name if key == "mean_speedup" else None)
            a2.bar_label(b, [f"{sp:.2f}x" if sp else "n/a"], fontsize=7)
    a1.set_xticks(range(len(PCT_KEYS)), [lbl for _, lbl in PCT_KEYS], fontsize=8)
    a1.set(title="Baseline vs trained (held-out episodes, %)", ylabel="% of episodes", ylim=(0, 108))
    a1.legend(fontsize=8)
    a2.set_xticks(range(len(cols)), [n for n, _ in cols], fontsize=7, rotation=15)
    a2.set(title="Best speedup (correct): mean, geomean (hatched)", ylabel="x reference")
    a2.set_ylim(bottom=0)
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig_to_img(fig, "baseline vs trained")


# -- HTML -----------------------------------------------------------------------------------------

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1250px;color:#222;padding:0 16px}
h1{font-size:24px;margin-bottom:4px} h2{font-size:19px;margin-top:34px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:13px} img{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:13px;margin:8px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4} td:first-child,th:first-child{text-align:left}
pre{background:#f7f7f7;border:1px solid #e2e2e2;padding:8px;overflow-x:auto;font-size:12px;max-height:420px}
details{margin:8px 0} summary{cursor:pointer;font-weight:600} .note{color:#666;font-size:13px}
"""


def _cell(v, pct=False) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.1f}%" if pct else f"{v:.3g}"
    return html.escape(str(v))


def summary_table(rows: list[tuple[str, dict]]) -> str:
    share = any(s.get("mean_kernel_share") is not None for _, s in rows)  # the column only when recorded
    head = (["", "episodes", "compiled", "correct", "correct turn 1", "faster than ref", "fast_1.2", "mean speedup",
             "geomean speedup", "median roofline"] + (["kernel share"] if share else [])
            + ["flagged turns", "mean turns"])
    out = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for name, s in rows:
        out.append("<tr>" + f"<td>{html.escape(name)}</td><td>{_cell(s.get('episodes'))}</td>"
                   + "".join(f"<td>{_cell(s.get(k), True)}</td>" for k, _ in PCT_KEYS)
                   + f"<td>{_cell(s.get('mean_speedup'))}</td><td>{_cell(s.get('geomean_speedup'))}</td>"
                   + f"<td>{_cell(s.get('median_roofline_frac'))}</td>"
                   + (f"<td>{_cell(s.get('mean_kernel_share'))}</td>" if share else "")
                   + f"<td>{_cell(s.get('suspicious'))}</td><td>{_cell(s.get('mean_turns'))}</td></tr>")
    return "\n".join(out) + "</table>"


def tasks_table(tasks: dict[str, dict]) -> str:
    out = ["<table><tr><th>task</th><th>episodes</th><th>correct episodes</th><th>best speedup</th>"
           "<th>best roofline fraction</th><th>seen in</th></tr>"]
    for tid, d in tasks.items():
        out.append(f"<tr><td>{html.escape(tid)}</td><td>{d['episodes']}</td><td>{d['correct_eps']}</td>"
                   f"<td>{_cell(d['best_speedup'])}</td><td>{_cell(d['best_roofline_frac'])}</td>"
                   f"<td>{html.escape(', '.join(sorted(d['modes'])))}</td></tr>")
    return "\n".join(out) + "</table>"


def flagged_section(flagged: list[dict], limit: int) -> str:
    if not flagged:
        return "<p class='note'>No kernel was flagged (suspicious speedup or a time under the roofline floor).</p>"
    parts = [f"<p class='note'>{len(flagged)} flagged turn(s); each kernel's code is below for review"
             f"{f' (the first {limit} shown)' if len(flagged) > limit else ''}. A roofline violation earns no reward; "
             "a suspicious speedup is paid as configured on the server.</p>"]
    for h in flagged[:limit]:
        why = ", ".join(w for w, k in (("roofline violation", "roofline_violation"), ("suspicious", "suspicious"))
                        if h.get(k))
        sp = h.get("speedup")
        title = (f"{h.get('task_id')} — {h.get('mode', '?')} step {h.get('step')}, turn {h.get('turn')}: "
                 f"{why}, speedup {sp if sp is None else f'{sp:.3g}x'}, roofline {_cell(h.get('roofline_frac'))}")
        parts.append(f"<details><summary>{html.escape(title)}</summary>"
                     f"<p class='note'>{html.escape(str(h.get('feedback') or h.get('reward_reason') or ''))}</p>"
                     f"<pre>{html.escape(h.get('code') or '(no code recorded)')}</pre></details>")
    return "\n".join(parts)


def render(run: Path, baseline: str | None = None, max_flagged: int = 50) -> str:
    eps = load_rollouts(run)
    hist = load_log_history(run)
    flagged = read_jsonl(run / "suspicious.jsonl") if (run / "suspicious.jsonl").is_file() else []
    base_summary, base_eps = load_baseline(baseline)
    if not eps and not hist:
        raise SystemExit(f"{run}: no rollouts-rank*.jsonl and no trainer_state.json: nothing to report")
    train, evals = by_step(eps, "train"), by_step(eps, "eval")
    if not train and hist:  # no rollouts: TRL's logged kernel/* metrics
        for h in hist:
            if any(k.startswith("kernel/") for k in h):
                train[h["step"]] = {k.split("/", 1)[1]: v for k, v in h.items() if k.startswith("kernel/")}
            if any(k.startswith("eval_kernel/") for k in h):
                evals[h["step"]] = {k.split("/", 1)[1]: v for k, v in h.items() if k.startswith("eval_kernel/")}
    train_eps = [e for e in eps if e.get("mode") == "train"]
    eval_eps = [e for e in eps if e.get("mode") == "eval"]
    steps = [plot_step(e) for e in eps] or [h.get("step", 0) for h in hist]
    last_eval = max(evals) if evals else None
    first_eval = min(evals) if evals else None

    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>kernel-rl report: {html.escape(run.name)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>kernel-rl run report: {html.escape(str(run))}</h1>",
             f"<p class='meta'>generated {datetime.now():%Y-%m-%d %H:%M}; {len(train_eps)} train and {len(eval_eps)} "
             f"eval episodes; steps {min(steps, default=0)}–{max(steps, default=0)}; "
             f"{len(flagged)} flagged turn(s){'; baseline: ' + html.escape(str(baseline)) if baseline else ''}</p>"]

    rows = []
    if train_eps:
        rows.append(("train (all steps)", summarize(train_eps)))
        last_train = max(train)
        rows.append((f"train (step {last_train})", train[last_train]))
    if first_eval is not None and first_eval != last_eval:
        rows.append((f"eval (step {first_eval})", evals[first_eval]))
    if last_eval is not None:
        rows.append((f"eval (step {last_eval})", evals[last_eval]))
    if base_summary:
        rows.append(("baseline", base_summary))
    parts += ["<h2>Summary</h2>", summary_table(rows) if rows else "<p class='note'>no episodes</p>",
              "<p class='note'>Percentages are of episodes (one task attempt of up to max_turns turns). "
              "Speedup and roofline fraction are each correct episode's best; fast_1.2 is the share of episodes "
              "whose best correct turn is more than 1.2x faster than the reference (KernelBench's fast_p, p = 1.2); "
              "kernel share is the share of the best turn's device time in the submission's own kernels. "
              "Definitions: kernel_env.agent.metrics (docs/metrics.md).</p>"]

    parts += ["<h2>Training and eval curves</h2>", curves_figure(train, evals, hist)]

    groups = [("train", train_eps)]
    if last_eval is not None:
        groups.append((f"eval (step {last_eval})", [e for e in eval_eps if plot_step(e) == last_eval]))
    if base_eps:
        groups.append(("baseline", base_eps))
    parts += ["<h2>Improvement over turns</h2>",
              "<p class='note'>Share of episodes that have compiled / been correct by turn k (solid: correct, "
              "dotted: compiled), and the mean reward of the k-th turn over the episodes that reached it.</p>",
              turns_figure(groups)]

    tasks = per_task_best(eps)
    parts += ["<h2>Per task</h2>",
              tasks_figure(tasks) if tasks else "<p class='note'>no episodes</p>", tasks_table(tasks)]

    parts.append("<h2>Baseline vs trained</h2>")
    cols = []
    if base_summary:
        cols.append(("baseline", base_summary))
    if first_eval is not None and first_eval != last_eval:
        cols.append((f"eval step {first_eval}", evals[first_eval]))
    if last_eval is not None:
        cols.append((f"trained (eval step {last_eval})", evals[last_eval]))
    if len(cols) >= 2:
        parts.append(compare_figure(cols))
    else:
        parts.append("<p class='note'>Needs a baseline (<code>--baseline</code> with a baseline_eval.py "
                     "summary.json or episodes.jsonl) and eval episodes in the run "
                     "(<code>--eval_strategy steps</code>).</p>" + (compare_figure(cols) if cols else ""))

    parts += ["<h2>Flagged kernels</h2>", flagged_section(flagged, max_flagged), "</body></html>"]
    return "\n".join(parts)


def main(argv=None) -> Path:
    p = argparse.ArgumentParser(description="HTML report of a grpo_kernel.py run")
    p.add_argument("run_dir")
    p.add_argument("--baseline", default=None, help="baseline_eval summary.json or episodes.jsonl (or their folder)")
    p.add_argument("--out", default=None, help="output HTML (default RUN_DIR/report.html)")
    p.add_argument("--max-flagged", type=int, default=50, help="flagged kernels shown with code")
    a = p.parse_args(argv)
    run = Path(a.run_dir)
    if not run.is_dir():
        raise SystemExit(f"no such run folder: {run}")
    page = render(run, a.baseline, a.max_flagged)
    out = Path(a.out) if a.out else run / "report.html"
    out.write_text(page)
    print(f"report written to {out}")
    return out


if __name__ == "__main__":
    main()
