"""Every limit and threshold of the judge, with its default, in one place."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..compute_policy import parse as parse_policy


def default_cache_dir() -> Path:
    # absolute: sandboxes bind it by path and run in folders of their own, where a relative one is not found
    return Path(os.environ.get("KERNEL_ENV_CACHE", Path.home() / ".cache" / "kernel_env")).absolute()


@dataclass
class JudgeConfig:
    device: str = "cpu"                     # "cpu" or "cuda"
    gpus: tuple[int, ...] = (0,)            # CUDA device indices, one measurement at a time on each
    build_slots: int = max(1, (os.cpu_count() or 2) - 1)  # concurrent candidate builds (CPU bound)
    # evaluations per device that hold a run process at once (the one measuring included): the others
    # get theirs ready (the task imported) while it measures
    staged_runners: int = 4
    # the device's next evaluation starts as soon as a candidate is timed: its trials and their check
    # run while this one's candidate ends and its rechecks are compared; its timing waits for that
    # (judge/devices.py, Turn). Off: one evaluation after the other, the end included
    overlap_tail: bool = True
    # idle run processes kept per device (torch imported, CUDA context made, ~0.6 GB of GPU memory each;
    # one on the CPU device). Under load one starts in ~8 s on the H200 box and each evaluation takes
    # one, so this many starting at once caps evaluations at about idle_runners x 7.5 a minute; with 8,
    # evaluations waited for theirs (ready p50 1.1-1.8 s, the device idle 7-9 s of 90), with 16 they did
    # not (p50 0.04 s; docs/log/performance.md, checks before the timing). Lower it on a GPU with little memory
    idle_runners: int = 16
    # idle build processes kept ready (torch and Triton imported, no GPU): a build does not wait for
    # Python and torch to start, 4-5 s on the H200 box (one on the CPU device)
    staged_builders: int = 4
    # builds run at this niceness: under load the CPU goes first to the process holding the device
    # slot (Triton compiles at the first call, inside it) and to the reference worker
    build_nice: int = 10
    # and under SCHED_IDLE (Linux): CPU time only when no other process wants it. At nice 10, 15 builds
    # still took the CPU from the process being timed: a call's launch waited behind them and the call
    # timed 2-14x slower (one load measurement in five retimed on the H200; docs/design/timing.md)
    build_sched_idle: bool = True
    # at server start, before any evaluation: each device's idle run processes and its reference worker
    # (CUDA context, the comparison's kernels compiled), so the first evaluation waits for neither
    start_ahead: bool = True
    # the compute rule (compute_policy.py): "auto" (level 1 strict, levels 2-3 kernelbench), one
    # policy for every level, or per level ("1=strict,2=kernelbench"); an evaluation may name its own
    policy: str = "auto"
    # the share of the device time in the submission's own kernels, from a few more calls after the
    # timing (candidate/share.py): "events" (CUDA events around its kernel calls and PyTorch's ops),
    # "profiler" (torch.profiler's CUPTI records: vendor kernels named too; docs/design/policies.md) or
    # "off"; under kernelbench a correct submission below min_kernel_share fails (0: no minimum;
    # docs/design/policies.md says why that is the default)
    kernel_share: str = "events"
    min_kernel_share: float = 0.0
    max_code_bytes: int = 256 * 1024
    build_timeout_s: float = 300.0          # import of the submission, load_inline compile included
    run_timeout_s: float = 180.0            # correctness trials + timing, on the device
    # Deadlines per step from what the task needs (judge/deadlines.py; docs/design/pipeline.md,
    # deadlines). The import: at most this long outside the candidate's compilers (which the judge
    # sees in its process tree), build_timeout_s in all; Python spinning at import ends here.
    # (27 s: the verdict, kill included, within 30 s; 30.0 gave 30.04-30.19 s on the H200)
    import_timeout_s: float = 27.0
    # the run process's import, inside the device slot, of a source the judge read as inert
    # (judge/inert_import.py: nothing of its own at import but load_inline calls with literal
    # arguments, whose builds it made): what can still take time there is the builds' native code at
    # load (static initializers), and one that never returns holds the GPU until this
    inert_import_timeout_s: float = 8.0
    # each step of the run (a trial, the timing, the kernel-share calls): this floor (inputs made, the
    # watch, launches, synchronising) plus run_ref_factor x the reference's time per call; the first
    # trial also run_first_call_s (Triton's JIT, lazy module loads, library handles). With these a
    # kernel that never returns holds the device slot <= 10 s on every level-1 task (t_ref <= 185 ms
    # on the H200); run_timeout_s stays the ceiling of the whole run outside compilers
    run_step_floor_s: float = 2.0
    run_ref_factor: float = 16.0
    run_first_call_s: float = 5.0
    # per timed call besides the call itself (L2 flush, fresh inputs, synchronise, events): the timing
    # phase's deadline counts max_timed_calls of these per attempt
    run_call_overhead_s: float = 0.01
    # ModelNew(...): its cost follows the parameter count (a level-3 network initialised), not a call
    run_construct_s: float = 20.0
    # a killed candidate's processes have all exited (their GPU context torn down) before the device
    # slot goes to the next evaluation; if some are still there after this long, the slot goes anyway
    # and the judge logs an error
    kill_wait_s: float = 30.0
    reference_timeout_s: float = 600.0      # reference outputs, reference timing, FLOP count
    correctness_trials: int = 5
    # output slots for the trials held at once: 0 = all of them when they fit in the device's free
    # memory beside the candidate's own inputs and outputs and the reference's check, else as many
    # as fit (the candidate then waits for each batch's check before the next), and if even one does
    # not, one timing set instead of two: a multi-GB task fits an 80 GB card
    # (reference_worker.slot_plan); a number fixes it (tests, a card shared with other work)
    trial_rows: int = 0
    atol_fp32: float = 1e-4
    rtol_fp32: float = 1e-4
    atol_half: float = 1e-2                 # fp16 / bf16
    rtol_half: float = 1e-2
    # an all-zero answer must not pass: tolerances are capped at this share of the reference's scale
    tiny_output_frac: float = 0.01
    warmup_calls: int = 3
    warmup_s: float = 0.2                   # and at least this long: clocks ramp up, caches fill
    min_timed_calls: int = 20
    # a candidate's timing may stop at timing_early_calls when those calls pin their median down: its
    # ~98 % confidence interval (harness.median_band; the 2nd and 9th of 10 calls) within
    # timing_early_rel of it. A 6.4 GB ReLU's calls agree to ~0.3 %; ten more of them cost ~0.1 s of
    # its slot and move its median by less than that; a 16 us kernel's scatter by 4-6 % and still
    # get min_timed_calls (0: off). The reference, timed once per task, always gets min_timed_calls
    timing_early_calls: int = 10
    timing_early_rel: float = 0.005
    max_timed_calls: int = 500
    timing_budget_s: float = 2.0            # measured time budget per kernel
    timing_stable_rel: float = 0.01         # stop when the median moves less than this
    # and not before this much wall time (more calls, more of the GPU's short-term drift averaged); the
    # reference's time is measured once per task and cached, so it gets longer
    timing_min_wall_s: float = 0.0
    reference_min_wall_s: float = 1.0
    # After the GPU idled, its first second or two of load run 2-4 % slower and jumpier than under
    # sustained load (clocks unlocked; docs/design/timing.md, quiet timing). The reference
    # is timed once per task, after this much warm-up; a candidate measured while no other evaluation
    # waits for its device (the device would idle otherwise) gets the quiet_ warm-up and wall time.
    # Under load the GPU stays busy and the short rule above holds.
    reference_warmup_s: float = 1.5
    quiet_warmup_s: float = 1.5
    quiet_min_wall_s: float = 0.5
    # and waits up to this long for run processes already making their CUDA context (no new one starts
    # its GPU work while a candidate runs, under load too)
    quiet_warm_wait_s: float = 3.0
    # A slot taken at most busy_gap_s after the device's previous one ended finds the GPU busy until
    # now (that slot's work, then this evaluation's own trials and check): its clocks are up, and the
    # timing's warm-up is only there for the allocator, caches and JITs (warmup_calls). It then lasts
    # at most busy_warmup_s, and ends sooner once harness.STEADY_CALLS calls in a row agree within
    # busy_warmup_steady_rel (0: off). On the H200 under load warmup_s was ~0.2 of a ~1.1 s slot; a
    # flat 0.05 s took the spread probes under load from ~1.001 to 1.10 (docs/log/containment-h200.md),
    # so the warm-up stops on the calls' own steadiness, not on a shorter clock
    busy_warmup_s: float = 0.2
    busy_warmup_steady_rel: float = 0.005
    busy_gap_s: float = 0.5
    # Under load a run process may still be warming up (a step begun between two slots) when a slot's
    # timing is due. A warm-up that stopped on steady calls beside such a process had timed calls 20 %
    # apart; waiting for the step itself cost millisecond kernels with small inputs ~0.4 s of slot, and
    # a 0.1 s wait mostly ran out (p50 0.09 s) and cost them ~0.1 s (docs/log/slot-h100-2026-12-06.md):
    # the timing waits for it up to timing_warm_wait_s (none by default), then stops its processes
    # (SIGSTOP) until the candidate's run ends (stop_warmers; judge/devices.py). Where it cannot stop
    # them (or stop_warmers is off), the warm-up lasts busy_warmup_s whole instead of stopping on steady calls.
    timing_warm_wait_s: float = 0.0
    stop_warmers: bool = True
    # a measurement whose calls spread more than this ((p90 - p10) / median) is taken again, up to
    # timing_attempts in all, keeping the least spread one: another process's GPU work time-slicing with
    # it doubled a 3.8 ms matmul's calls in one evaluation under load (docs/log/performance.md)
    timing_retime_spread: float = 0.25
    timing_attempts: int = 3
    l2_flush_bytes: int = 256 * 1024 * 1024
    suspicious_speedup: float = 50.0
    roofline_violation_factor: float = 0.5  # t_new below this share of t_min: physically implausible
    output_cap_bytes: int = 64 * 1024       # of a candidate's stdout/stderr kept for feedback
    feedback_max_chars: int = 2000
    cache_dir: Path = field(default_factory=default_cache_dir)
    work_dir: Path | None = None            # per-evaluation folders (default: <system tmp>/kernel_env_work)
    cpu_threads: int = 1                    # torch threads per process on the CPU device
    # input distributions of the correctness trials after the first two (harness.INPUT_DISTS); each
    # trial draws the next of these in a random order, where the task allows it
    input_dists: tuple[str, ...] = ("uniform", "heavy", "signed", "positive", "large", "small", "edges")
    sandbox: str = "auto"                   # auto | bwrap | unshare | none (see judge/sandbox.py)
    candidate_memory_bytes: int = 16 << 30  # address-space limit of a candidate on the CPU device
    # what a build, compile or run process may write into its own folder, beyond what the judge put
    # there (its CPU output slots): the folder is on the server's disk, which other evaluations need
    # too. Read every sandbox.FOLDER_CHECK_S (0.5 s): a process may overshoot by what it writes in that time
    folder_quota_bytes: int = 4 << 30
    folder_quota_files: int = 100_000
    # address space each compiler of a load_inline call may map beyond its own (pools.COMPILER_OWN_BYTES),
    # on every device: the sources are the candidate's, and an #include of /dev/zero makes the compiler
    # read until the machine's memory runs out
    compile_memory_bytes: int = 16 << 30
    # faster load_inline builds, same modules (candidate/fast_build.py): the .cu sees no torch header
    # ("shim": cuda_prelude_shim.h, main.cpp answers its calls with torch's functions; a kernel it cannot
    # build goes to "core"), or a light prelude of ATen headers ("core" | "aten"; "off" = torch's own
    # path); and a precompiled torch/extension.h for main.cpp (docs/design/builds.md)
    fast_build: str = "shim"
    # a binding file (main.cpp) compiled before, with the same text, command and toolchain, is not compiled
    # again: compile processes link the object the judge published (candidate/binding_objects.py)
    share_binding_objects: bool = True
    precompiled_header: bool = True
    # torch's bytecode compiled once for the candidate processes (judge/bytecode_cache.py): on the H200
    # box, whose torch ships none, a run process's start took 7.8 CPU-s p50 without it
    bytecode_cache: bool = True
    # optimisation levels given a precompiled header (each ~0.8 GB, ~40 s to make once per box)
    pch_variants: tuple[str, ...] = field(default_factory=lambda: tuple(
        os.environ.get("KERNEL_ENV_PCH_VARIANTS", "O0,O2,O3").split(",")))

    def __post_init__(self):
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', not {self.device!r}")
        self.cache_dir = Path(self.cache_dir)
        self.gpus = tuple(int(g) for g in self.gpus)
        if self.fast_build not in ("aten", "core", "shim", "off"):
            raise ValueError(f"fast_build must be 'aten', 'core', 'shim' or 'off', not {self.fast_build!r}")
        self.pch_variants = tuple(self.pch_variants)
        parse_policy(self.policy)  # ValueError with the accepted forms
        if not 0.0 <= self.min_kernel_share <= 1.0:
            raise ValueError("min_kernel_share must be between 0 and 1")
        if self.kernel_share not in ("events", "profiler", "off"):
            raise ValueError(f"kernel_share must be 'events', 'profiler' or 'off', not {self.kernel_share!r}")
        if self.min_kernel_share > 0 and self.kernel_share == "off":
            raise ValueError("min_kernel_share needs kernel_share on (the share is what it is compared with)")
        if self.correctness_trials < 1:
            raise ValueError("correctness_trials must be >= 1")
        if self.trial_rows < 0:
            raise ValueError("trial_rows must be >= 0 (0: as many as fit in device memory)")
        for name in ("import_timeout_s", "inert_import_timeout_s", "run_step_floor_s", "run_construct_s", "kill_wait_s", "compile_memory_bytes",
                     "folder_quota_bytes", "folder_quota_files"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        for name in ("run_ref_factor", "run_first_call_s", "run_call_overhead_s"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0")

    def tolerance(self, dtype_name: str) -> tuple[float, float]:
        if dtype_name in ("float16", "bfloat16"):
            return self.atol_half, self.rtol_half
        return self.atol_fp32, self.rtol_fp32

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]
