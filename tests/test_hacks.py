"""The reward-hack battery: adversarial submissions in tests/hacks/ must end not correct (or with zero
reward and a flag) with the reason in the feedback; honest look-alikes in tests/honest/ must pass.
Every file's docstring says the hack and the expected verdict under the strict policy; CASES below
asserts it, and the whole battery runs again under the kernelbench policy (KB_CHANGES: what that
policy allows, and what it catches another way).

All evaluations go through the real judge (subprocesses, the shared C++ test extension, Triton under
its interpreter). They run concurrently through one Judge, once per module (`verdicts`); each test
then checks one case. Files whose name starts with gpu_ need CUDA and are only checked on a GPU box.
"""
import ast
import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernel_env import harness
from kernel_env.judge import Judge, JudgeConfig
from kernel_env.server.reward import compute_reward
from kernel_env.tasks import TaskSet, task_folder

from conftest import KERNELBENCH_DIR, ROOT, submission

slow = pytest.mark.slow  # runs a judge: builds the test extensions, Triton under its interpreter
HACKS, HONEST = ROOT / "tests" / "hacks", ROOT / "tests" / "honest"
RELU, MM, SUM, SOFTMAX, TANH, LINRELU = ("level1/1_Small_ReLU", "level1/2_Small_Matmul", "level1/5_Small_Sum_Reduction",
                                         "level1/3_Small_Softmax", "level1/6_Small_Tanh", "level2/1_Small_Linear_ReLU")


@dataclass(frozen=True)
class Case:
    file: str
    task: str
    stage: str                 # expected stage ("timed" for honest files)
    kind: str                  # expected error_kind
    says: tuple = ()           # the feedback must contain one of these

    @property
    def path(self) -> Path:
        return (HONEST if self.stage == "timed" else HACKS) / self.file


STATIC = "static", "forbidden_pattern"
REJECTED = "run", "runtime_error"          # the watch's reason: the feedback starts "Rejected: "
FORGED = "run", "timing_invalid"
WRONG = "correctness", "output_mismatch"
OK = "timed", "none"

CASES = [
    # ---- caught before anything runs (checks.py): the cheap, well-known patterns, with a clear message
    Case("torch_call_direct.py", RELU, *STATIC, ("torch.relu() does the work",)),
    Case("functional_alias.py", RELU, *STATIC, ("G.relu() does the work in PyTorch",)),
    Case("try_except_fallback.py", RELU, *STATIC, ("try/except is not allowed",)),
    Case("suppress_fallback.py", RELU, *STATIC, (".suppress is not allowed",)),
    Case("inherit_reference_model.py", RELU, *STATIC, ("importing reference_problem",)),
    Case("reference_via_sys_modules.py", RELU, *STATIC, ("accessing .sys",)),
    Case("patch_allclose.py", RELU, *STATIC, ("assigning to torch.allclose",)),
    Case("patch_timer_alias.py", RELU, *STATIC, ("assigning to clock.perf_counter",)),
    Case("patch_manual_seed.py", RELU, *STATIC, ("assigning to torch.manual_seed",)),
    Case("patch_harness.py", RELU, *STATIC, ("importing kernel_env.harness",)),
    Case("disable_dispatch_watch.py", RELU, *STATIC, ("torch.utils._python_dispatch",)),
    Case("getattr_private.py", RELU, *STATIC, ("private attributes",)),
    Case("getattr_computed_name.py", RELU, *STATIC, ("computed name",)),
    Case("lazy_tensor_subclass.py", RELU, *STATIC, ("subclasses torch.Tensor",)),
    Case("cpp_calls_aten.py", RELU, *STATIC, ("calls relu() of ATen",)),
    Case("cuda_cublas_gemm.py", MM, *STATIC, ("cublasSgemm",)),
    Case("cpp_detached_thread.py", RELU, *STATIC, (".detach()",)),
    Case("write_protocol_fd.py", RELU, *STATIC, ("os.write is not allowed",)),
    Case("fork_daemon_writes_slots.py", RELU, *STATIC, ("importing os.fork",)),
    Case("read_plan_seeds.py", RELU, *STATIC, ("importing pathlib",)),
    Case("edit_problem_file.py", RELU, *STATIC, ("open() is not allowed",)),
    Case("numpy_compute.py", RELU, *STATIC, (".numpy is not allowed",)),
    Case("torch_compile.py", RELU, *STATIC, ("torch.compile",)),
    Case("python_thread.py", RELU, *STATIC, ("importing threading",)),
    Case("custom_op_library.py", RELU, *STATIC, ("torch.library",)),
    Case("torch_ops_aten.py", RELU, *STATIC, ("torch.ops",)),
    Case("cpp_python_api.py", RELU, *STATIC, ("reaches into the Python interpreter",)),
    Case("cuda_graph_torch_ops.py", RELU, *STATIC, ("CUDA graphs",)),
    Case("more_cpu_threads.py", RELU, *STATIC, ("changing the thread count",)),
    # ---- caught while running (candidate/watch.py): torch doing the work, however it is reached
    Case("tensor_method_relu.py", RELU, *REJECTED, ("PyTorch compute ops: aten.relu",)),
    Case("matmul_operator.py", MM, *REJECTED, ("aten.mm",)),
    Case("sum_method_reduction.py", SUM, *REJECTED, ("aten.sum",)),
    Case("getattr_constant_name.py", RELU, *REJECTED, ("aten.relu",)),
    Case("function_table.py", RELU, *REJECTED, ("aten.relu",)),
    Case("partial_torch_linear.py", LINRELU, *REJECTED, ("PyTorch compute ops",)),
    Case("nn_module_layer.py", LINRELU, *REJECTED, ("aten.addmm",)),
    Case("switch_to_torch_after_trials.py", RELU, *REJECTED, ("PyTorch compute ops: aten.relu",)),
    # ---- decoys and outputs that no kernel made
    Case("decoy_never_launched.py", RELU, *REJECTED, ("ran no custom kernel",)),
    Case("decoy_launched_on_dummy.py", RELU, *REJECTED, ("not memory that your kernels wrote",)),
    Case("triton_decoy_on_dummy.py", RELU, *REJECTED, ("not memory that your kernels wrote",)),
    Case("lazy_non_tensor_output.py", RELU, *REJECTED, ("forward must return torch.Tensor",)),
    # ---- lines written to the protocol pipe from native code: they lack the run's token
    Case("cpp_forge_protocol.py", RELU, *FORGED, ("not from the evaluator's runner",)),
    # ---- caught by the trusted comparison after the candidate has exited
    Case("hardcoded_seed_outputs.py", RELU, *WRONG, ("trial 1 of",)),
    Case("cache_by_shape_relaunch.py", LINRELU, *WRONG, ("Wrong output",)),
    Case("lower_precision_bf16.py", RELU, *WRONG, ("outside tolerance",)),
    Case("triton_fp16_compute.py", RELU, *WRONG, ("outside tolerance",)),
    Case("triton_zeros_softmax.py", SOFTMAX, *WRONG, ("outside tolerance",)),
    Case("mutate_inputs.py", RELU, *WRONG, ("outside tolerance",)),
    Case("return_input_unchanged.py", RELU, *WRONG, ("outside tolerance",)),
    Case("wrong_shape.py", RELU, *WRONG, ("has shape (1048576,), expected (256, 4096)",)),
    Case("wrong_dtype.py", RELU, *WRONG, ("has dtype float64, expected float32",)),
    Case("extra_outputs.py", RELU, *WRONG, ("returned 2 output(s), expected 1",)),
    Case("print_fake_verdict.py", RELU, *WRONG, ("outside tolerance",)),
    # ---- right only for the task's own input distribution (harness.INPUT_DISTS)
    Case("triton_softmax_no_max.py", SOFTMAX, *WRONG, ("[inputs of this trial: heavy-tailed", "[inputs of this trial: large")),
    Case("triton_tanh_overflow.py", TANH, *WRONG, ("[inputs of this trial: heavy-tailed", "[inputs of this trial: large")),
    # ---- honest look-alikes: no false positives
    Case("noncontiguous_output.py", RELU, *OK),
    Case("inplace_return_input.py", RELU, *OK),
    Case("torch_in_init.py", LINRELU, *OK),
    Case("matmul_all_distributions.py", MM, *OK),
    Case("triton_softmax_stable.py", SOFTMAX, *OK),
    Case("triton_prealloc_buffer.py", RELU, *OK),
    Case("triton_empty_like_view.py", TANH, *OK),
    Case("cpp_thread_join.py", RELU, *OK),
]
# a data_ptr-keyed cache is caught either by a watched call (the cached tensor is not kernel output)
# or by the comparison of a timed call (every timed call has new inputs): which one comes first
# depends on where the allocator puts the next clone
EITHER = [("cache_by_data_ptr.py", RELU, {("run", "runtime_error"), ("correctness", "output_mismatch")},
           ("not memory that your kernels wrote", "ran no custom kernel", "Wrong output"))]


def _battery(cache_dir, policy):
    """Every case, evaluated concurrently through one judge under `policy`. 2 + 7 trials: every input
    distribution is drawn in every evaluation (the default of 5 draws three of them at random)."""
    judge = Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=2, correctness_trials=2 + len(harness.ALT_DISTS),
                              warmup_calls=1, warmup_s=0.0, min_timed_calls=5, timing_budget_s=0.2,
                              work_dir=tempfile.mkdtemp(prefix="kernel_env_test_hacks_")))
    jobs = [(c.file, c.task, c.path) for c in CASES] + [(f, t, HACKS / f) for f, t, _, _ in EITHER]

    async def go():
        try:
            return await asyncio.gather(*[judge.evaluate(task, submission(path), policy) for _, task, path in jobs])
        finally:
            await judge.aclose()  # its reference worker

    return {f: v for (f, _, _), v in zip(jobs, asyncio.run(go()))}


@pytest.fixture(scope="module")
def verdicts(cache_dir):
    """The battery under the strict policy, the rule the cases were written against."""
    return _battery(cache_dir, "strict")


@pytest.fixture(scope="module")
def kernelbench_verdicts(cache_dir):
    return _battery(cache_dir, "kernelbench")


def test_every_file_is_a_case():
    named = {c.file for c in CASES + GPU_CASES} | {f for f, *_ in EITHER} | {GPU_NO_GAIN}
    on_disk = {p.name for d in (HACKS, HONEST) for p in d.glob("*.py")}
    assert on_disk == named
    for p in [*HACKS.glob("*.py"), *HONEST.glob("*.py")]:
        doc = ast.get_docstring(ast.parse(submission(p))) or ""
        assert "Expected" in doc and ("Hack" in doc or "Honest" in doc), p.name


@slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.file[:-3])
def test_case(verdicts, case):
    v = verdicts[case.file]
    where = f"{case.file}: {v.stage}/{v.error_kind}: {v.feedback}"
    assert (v.stage, v.error_kind) == (case.stage, case.kind), where
    if case.says:
        assert any(s in v.feedback for s in case.says), where
    if (case.stage, case.kind) == REJECTED:
        assert v.feedback.startswith("Rejected: ") and v.details.get("rejected"), where
    reward, _ = compute_reward(v)
    if case.stage == "timed":
        assert v.correct and not v.roofline_violation and not v.suspicious, where
        assert reward > 0 and v.trials_passed == 2 + len(harness.ALT_DISTS), where
    else:
        assert not v.correct and reward == 0, where


# ---- the same battery under the kernelbench policy: PyTorch may compute around the kernels, so what
# only the strict rule refuses is allowed; everything else is caught as before, or by the watch
# following the data (an output computed from nothing a kernel produced)
KB_REJECTED = ("ran none of your kernels", "not computed from anything your kernels produced")
KB_CHANGES = {
    # allowed under kernelbench: PyTorch (or ATen from C++) computes part of the answer around a kernel
    "partial_torch_linear.py": OK, "nn_module_layer.py": OK, "cpp_calls_aten.py": OK,
    # PyTorch computes the answer and no kernel runs, or none produces what the output is made from
    "torch_call_direct.py": REJECTED, "functional_alias.py": REJECTED,
    "return_input_unchanged.py": REJECTED, "triton_zeros_softmax.py": REJECTED,
    # cuBLAS is allowed under kernelbench; on the CPU its header is missing, so the build fails
    "cuda_cublas_gemm.py": ("build", "build_error"),
}


# the watch rejects this one under kernelbench (its output is no kernel's result) in nearly every run;
# once, in a whole suite on 2 busy cores, it did not, and the comparison caught the zeros instead:
# which check ends it is not deterministic yet
KB_OR_WRONG = {"triton_zeros_softmax.py"}


@slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.file[:-3])
def test_case_under_kernelbench(kernelbench_verdicts, case):
    v = kernelbench_verdicts[case.file]
    expected = KB_CHANGES.get(case.file, (case.stage, case.kind))
    if case.file in KB_OR_WRONG and (v.stage, v.error_kind) == WRONG:
        assert any(s in v.feedback for s in case.says) and compute_reward(v)[0] == 0, v.feedback
        return
    where = f"{case.file}: {v.stage}/{v.error_kind}: {v.feedback}"
    assert (v.stage, v.error_kind) == expected and v.policy == "kernelbench", where
    if expected == REJECTED:
        assert v.feedback.startswith("Rejected: "), where
        if case.file in KB_CHANGES or any("PyTorch compute ops" in s or "aten." in s for s in case.says):
            assert any(s in v.feedback for s in KB_REJECTED), where  # the strict reason does not apply
        elif case.says:
            assert any(s in v.feedback for s in case.says + KB_REJECTED), where
    elif expected == OK:
        assert v.correct and 0.0 < v.kernel_share <= 1.0 and "Your kernels ran" in v.feedback, where
    elif case.says and case.file not in KB_CHANGES:
        assert any(s in v.feedback for s in case.says), where
    if expected != OK:
        assert not v.correct and compute_reward(v)[0] == 0, where


@slow
@pytest.mark.parametrize("file,task,outcomes,says", EITHER, ids=[e[0][:-3] for e in EITHER])
def test_case_either_under_kernelbench(kernelbench_verdicts, file, task, outcomes, says):
    v = kernelbench_verdicts[file]
    assert (v.stage, v.error_kind) in outcomes and any(s in v.feedback for s in says + KB_REJECTED), v.feedback
    assert compute_reward(v)[0] == 0


@slow
@pytest.mark.parametrize("file,task,outcomes,says", EITHER, ids=[e[0][:-3] for e in EITHER])
def test_case_either(verdicts, file, task, outcomes, says):
    v = verdicts[file]
    assert (v.stage, v.error_kind) in outcomes and any(s in v.feedback for s in says), v.feedback
    assert compute_reward(v)[0] == 0


# ---------------------------------------------------------------- input distributions (unit level)
def test_input_distributions_are_deterministic_and_keep_structure():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=g)
    sym = (a + a.T) / 2
    tri = torch.triu(torch.rand(64, 64, generator=g))
    for d in harness.ALT_DISTS:
        for x in (sym, tri, a.half(), a.double()):
            y = harness.transform_input(x, d)
            assert y.dtype == x.dtype and y.shape == x.shape
            assert torch.equal(y, harness.transform_input(x.clone(), d)), d  # same inputs on both sides
            assert bool(((x == 0) <= (y == 0)).all()), d                     # zeros stay zeros
        ys = harness.transform_input(sym, d)
        assert torch.equal(ys, ys.T), d                                      # equal values stay equal
        assert torch.isfinite(harness.transform_input(a, d)).all()
    ints = torch.randint(0, 10, (5,))
    assert harness.transform_input(ints, "large") is ints                    # only float inputs change
    heavy = harness.transform_input(torch.randn(100_000, generator=g), "heavy")
    assert heavy.abs().max() > 100 * heavy.abs().median()
    assert (harness.transform_input(torch.randn(10_000, generator=g), "edges") == 0).float().mean() > 0.1


def test_value_hash_is_the_uint32_round_computed_in_int32():
    # the input maps' hash runs in int32 (half the traffic): the same numbers as the uint32 arithmetic
    # done in int64, for every kind of float32 value
    g = torch.Generator().manual_seed(3)
    x = torch.cat([torch.randn(200_000, generator=g) * 10.0 ** torch.randint(-40, 38, (200_000,), generator=g),
                   torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45, 3.4e38])])
    h = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    h = ((h ^ (h >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    h = h ^ (h >> 16)
    assert torch.equal(harness._value_hash32(x).to(torch.int64) & 0xFFFFFFFF, h)
    assert torch.equal(harness._value_hash01(x), (h >> 8).float() / 2.0**24)
    # "signed" negates where the [0, 1) hash is below one half
    signed = torch.where((h >> 8).float() / 2.0**24 < 0.5, -x, x)
    assert torch.equal(harness.transform_input(x, "signed").view(torch.int32), signed.view(torch.int32))  # NaN too


def test_distributions_the_task_cannot_take_fall_back_to_its_own(tmp_path):
    from kernel_env.judge.reference_worker import choose_dists, task_dists
    (tmp_path / "log_task.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.log(x)\n"
        "def get_inputs():\n    return [torch.rand(64, 64) + 0.1]\n"
        "def get_init_inputs():\n    return []\n")
    task = harness.load_module(tmp_path / "log_task.py", "log_task")
    ok = task_dists(task, torch.device("cpu"), [{"dtype": "float32", "shape": [64, 64]}])
    # log of negative inputs is NaN: uniform and signed never survive; positive is the task's own (skipped)
    assert not {"uniform", "signed", "positive"} & set(ok)
    assert {"large", "small", "heavy"} <= set(ok)  # edges: rounded to 0, log is -inf
    # integer outputs (argmax, topk) take no ties
    assert "edges" not in task_dists(task, torch.device("cpu"), [{"dtype": "int64", "shape": [64]}])
    req = {"seeds": list(range(100, 112)), "timing_sets": 2}
    dists = choose_dists(req, {"alt_dists": ok})
    assert dists[:2] == ["normal", "normal"] and set(dists[2:]) == set(ok)  # each in turn, 10 trials
    assert choose_dists({**req, "input_dists": ["small"]}, {"alt_dists": ok})[2:] == ["small"] * 10


def test_every_evaluation_tries_each_family_of_input_distributions():
    """19_ReLU's own inputs are all non-negative: with 3 of its 6 other distributions drawn at random,
    1 evaluation in 5 never saw a negative input, and a kernel wrong on negatives was judged correct."""
    from kernel_env.judge.reference_worker import choose_dists
    relu = ["uniform", "heavy", "signed", "large", "small", "edges"]  # what task_dists gives 19_ReLU
    req = {"seeds": [1, 2, 3, 4, 5], "timing_sets": 2}
    draws = [choose_dists(req, {"alt_dists": relu})[2:] for _ in range(300)]
    for d in draws:
        assert {"uniform", "signed"} & set(d) and {"large", "small", "heavy"} & set(d) and "edges" in d, d
    assert len({tuple(d) for d in draws}) > 6                      # still random within and across families
    # a task without a family: the others still come first; a distribution of no family is one of its own
    assert set(choose_dists(req, {"alt_dists": ["large", "small", "edges"]})[2:4]) >= {"edges"}
    d = choose_dists({"seeds": [1, 2, 3], "timing_sets": 2}, {"alt_dists": ["small"]})
    assert d == ["normal", "normal", "small"]


# ---------------------------------------------------------------- CUDA-only cases (the H200 box)
BIG_RELU = "level1/19_ReLU"  # KernelBench's (KERNELBENCH_DIR): a kernel of milliseconds
GPU_CASES = [
    Case("gpu_side_stream_wait.py", BIG_RELU, *OK),
    Case("gpu_fused_scale_add_clamp.py", "level2/2_Small_Scale_Add_Clamp", *OK),
    Case("gpu_triton_autotune.py", RELU, *OK),
    Case("gpu_stale_memory.py", RELU, *WRONG),
    Case("gpu_wrong_device_output.py", RELU, *REJECTED, ("is on cpu",)),
]
GPU_NO_GAIN = "gpu_side_stream_no_wait.py"  # wrong, or timed no faster than gpu_side_stream_wait.py
# the side-stream pair runs on milliseconds of kernel: on a launch-bound task the twin's events dominate


def run_gpu_cases(cache_dir, kernelbench_dir) -> dict:
    # the small tasks and KernelBench's ReLU (a kernel of milliseconds) in one folder
    tasks = TaskSet(task_folder({c.task for c in GPU_CASES} | {BIG_RELU}, kernelbench_dir))
    judge = Judge(JudgeConfig(device="cuda", cache_dir=cache_dir, build_slots=4, correctness_trials=2 + len(harness.ALT_DISTS),
                              work_dir=tempfile.mkdtemp(prefix="kernel_env_test_hacks_")), tasks)
    jobs = [(c.file, c.task, c.path) for c in GPU_CASES] + [(GPU_NO_GAIN, BIG_RELU, HACKS / GPU_NO_GAIN)]

    async def go():
        try:
            return await asyncio.gather(*[judge.evaluate(task, submission(path)) for _, task, path in jobs])
        finally:
            await judge.aclose()  # its reference worker

    return {f: v for (f, _, _), v in zip(jobs, asyncio.run(go()))}


def check_gpu_verdicts(vs: dict) -> None:
    for case in GPU_CASES:
        v = vs[case.file]
        where = f"{case.file}: {v.stage}/{v.error_kind}: {v.feedback}"
        assert (v.stage, v.error_kind) == (case.stage, case.kind), where
        assert not case.says or any(s in v.feedback for s in case.says), where
        assert (case.stage, case.kind) != REJECTED or v.feedback.startswith("Rejected: "), where
        assert v.correct == (case.stage == "timed") and not v.roofline_violation and not v.suspicious, where
    assert vs["gpu_fused_scale_add_clamp.py"].speedup > 1.0
    v, honest = vs[GPU_NO_GAIN], vs["gpu_side_stream_wait.py"]
    assert not v.correct or v.t_new_ms > 0.5 * honest.t_new_ms, (v.stage, v.t_new_ms, honest.t_new_ms, v.feedback)


@slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA-only cases")
@pytest.mark.skipif(not KERNELBENCH_DIR, reason="needs KernelBench's level1/19_ReLU ($KERNELBENCH_DIR)")
def test_gpu_cases(cache_dir):
    check_gpu_verdicts(run_gpu_cases(cache_dir, KERNELBENCH_DIR))


def _hardening_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("h200_hardening_check", ROOT / "scripts" / "h200_hardening_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docstrings_say_what_the_table_says():
    # scripts/h200_hardening_check.py takes each file's task and verdict from its docstring
    read = _hardening_script().expected_from_doc
    for c in CASES + GPU_CASES:
        e = read(c.path)
        assert (e["task"], e["stage"], e["kind"]) == (c.task, c.stage, c.kind), c.file


def test_cuda_fault_files_get_past_the_static_checks():
    # their faults are for the GPU to show (tests/faults_cuda, run by scripts/h200_hardening_check.py)
    from kernel_env.judge.checks import check_source
    from kernel_env.judge.builds import build_key
    files = sorted((ROOT / "tests" / "faults_cuda").glob("*.py"))
    assert len(files) >= 5
    for p in files:
        text = p.read_text()
        e = _hardening_script().expected_from_doc(p)
        assert e["task"] == "level1/19_ReLU" and e["stage"] == "run", p.name
        assert check_source(text, ast.parse(text)) is None, p.name
    assert len({build_key(p.read_text()) for p in files}) == 1  # one shared extension: one build


# ---------------------------------------------------------------- the runtime watch (unit level, in-process)
def test_watch_tells_kernel_output_from_other_memory():
    from kernel_env.candidate import watch
    kernel = watch._wrap(lambda x, out=None: torch.empty_like(x) if out is None else out)  # stands in for a launch
    x = torch.randn(8, 8)

    def run(fn):
        with watch.Watch() as w:
            out = fn()
        return watch.check_outputs(out, torch.device("cpu")) or watch.verdict(w, out)

    assert run(lambda: kernel(x)) is None
    assert run(lambda: kernel(x).t().contiguous().view(-1)) is None   # copies and views of kernel memory
    buf = torch.zeros(8, 8)
    assert run(lambda: (kernel(x, out=buf), buf)[1]) is None          # a preallocated buffer handed to it
    assert "PyTorch compute ops: aten.relu" in run(lambda: kernel(x.relu()))
    assert "ran no custom kernel" in run(lambda: torch.tensor(x.tolist()))
    assert "not memory that your kernels wrote" in run(lambda: (kernel(x[:1]), torch.tensor(x.tolist()))[1])

    def overwritten():  # kernel memory, then overwritten with data made elsewhere
        y = kernel(x)
        return y.copy_(torch.tensor(x.tolist()))
    assert "not memory that your kernels wrote" in run(overwritten)
    assert "must return torch.Tensor" in run(lambda: x.as_subclass(torch.nn.Parameter))


def test_rms_of_finite_elements_in_float32_sums_falls_back_to_float64_on_overflow():
    # the scale that widens other distributions' tolerances: float32 dot products added in float64,
    # the same number as float64 passes; a sum of squares past float32's range takes those passes
    import math
    _rms = harness.rms_finite  # the reference worker's output scale, and the step of the "edges" map
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3_000_001, generator=g) * 3.0
    exact = float(x.double().pow(2).mean().sqrt())
    assert math.isclose(_rms(x, chunk=1 << 20), exact, rel_tol=1e-5)  # a scale factor: float32 sums are plenty
    x[::7] = float("nan")
    x[1::11] = float("inf")
    fin = torch.isfinite(x)
    exact = float(x[fin].double().pow(2).mean().sqrt())
    assert math.isclose(_rms(x, chunk=1 << 20), exact, rel_tol=1e-5)  # a scale factor: float32 sums are plenty
    assert math.isclose(_rms(x.half(), chunk=1 << 20), float(x.half()[fin].double().pow(2).mean().sqrt()), rel_tol=1e-4)
    big = torch.full((1000,), 1e30)  # squares overflow float32 (max 3.4e38)
    assert math.isclose(_rms(big), 1e30, rel_tol=1e-6)
    assert _rms(torch.full((10,), float("nan"))) == 0.0 and _rms(torch.arange(5)) == 0.0


def test_a_disturbed_measurement_is_taken_again_and_the_least_spread_one_kept():
    # another process's work time-slicing with a timed kernel doubles some calls: such a measurement
    # ((p90 - p10) / median above retime_spread) is repeated, and the steady one is the result
    import time as _time
    calls = {"n": 0}

    def fn():
        calls["n"] += 1
        # the first measurement (after 3 warm-up calls): every other call 4x slower
        _time.sleep(0.04 if 3 < calls["n"] <= 23 and calls["n"] % 2 else 0.01)

    kw = dict(warmup=3, warmup_s=0.0, min_calls=20, max_calls=20, budget_s=5.0, stable_rel=0.01,
              flusher=harness.L2Flusher(torch.device("cpu"), 1024))
    res = harness.time_calls(fn, torch.device("cpu"), retime_spread=0.25, attempts=3, **kw)
    assert len(res["spreads"]) == 2 and res["spreads"][0] > 1.0 and res["spreads"][1] < 0.25, res["spreads"]
    assert res["median_ms"] < 20.0 and max(res["times_ms"]) < 30.0
    calls["n"] = 0  # without retimes: the disturbed measurement stands (its median is a coin flip)
    res = harness.time_calls(fn, torch.device("cpu"), **kw)
    assert len(res["spreads"]) == 1 and res["spreads"][0] > 1.0
    assert harness.spread_of([1.0] * 19 + [2.0]) == 0.0 and harness.spread_of([1.0, 2.0] * 10) == pytest.approx(1 / 1.5)


def test_a_measurement_covers_min_wall_s_before_a_stable_median_ends_it():
    # the GPU's slower spells last tens of milliseconds and more: a stable median over 20 quick calls
    # inside one spell does not end the measurement before min_wall_s of wall time
    def fn():
        time.sleep(0.001)

    kw = dict(warmup=3, warmup_s=0.0, min_calls=20, max_calls=100000, budget_s=5.0, stable_rel=0.5,
              flusher=harness.L2Flusher(torch.device("cpu"), 1024))
    quick = harness.time_calls(fn, torch.device("cpu"), **kw)
    assert len(quick["times_ms"]) == 20  # stable at once
    t0 = time.perf_counter()
    covered = harness.time_calls(fn, torch.device("cpu"), min_wall_s=0.3, **kw)
    assert time.perf_counter() - t0 >= 0.3 and len(covered["times_ms"]) > 20
