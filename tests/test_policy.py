"""The compute policies (kernel_env/compute_policy.py): strict (all the compute in the submission's kernels)
and kernelbench (PyTorch and vendor ops allowed around them, the outputs computed from what a kernel
produced), and the share of the time in the submission's own kernels (candidate/share.py).

Unit tests run the static checks, the runtime watch and the share's timeline in this process, with
Python functions standing in for extension functions (wrapped the way load_inline's are); the slow
tests take real C++ submissions through the judge, under both policies.
"""
import ast
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from kernel_env import compute_policy as policy
from kernel_env.candidate import share, watch
from kernel_env.judge import Judge, JudgeConfig
from kernel_env.judge.checks import check_source
from kernel_env.server.reward import RewardConfig, compute_reward

from conftest import submission

slow = pytest.mark.slow
LINRELU, RELU = "level2/1_Small_Linear_ReLU", "level1/1_Small_ReLU"


def test_policy_choice_per_level():
    assert policy.parse("auto") == {1: "strict", 2: "kernelbench", 3: "kernelbench"}
    assert policy.parse("strict") == {1: "strict", 2: "strict", 3: "strict"}
    assert policy.parse("2=strict") == {1: "strict", 2: "strict", 3: "kernelbench"}
    assert policy.for_level("1=kernelbench,3=strict", 1) == "kernelbench"
    for bad in ("lenient", "2=lenient", "two=strict", "2:strict"):
        with pytest.raises(ValueError, match="bad policy"):
            policy.parse(bad)
    with pytest.raises(ValueError, match="policy"):
        JudgeConfig(policy="loose")
    with pytest.raises(ValueError, match="min_kernel_share"):
        JudgeConfig(min_kernel_share=0.2, kernel_share="off")


# ---------------------------------------------------------------- static checks
PY_TORCH = """
import torch
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="e", cpp_sources="torch::Tensor f(torch::Tensor x);", functions=["f"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.f(torch.matmul(x, x))
"""
CPP_SRC = '''
import torch
from torch.utils.cpp_extension import load_inline
src = r"""
#include <torch/extension.h>
%s
torch::Tensor f(torch::Tensor x) { return %s; }
"""
ext = load_inline(name="e", cpp_sources=src, functions=["f"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.f(x)
'''


def _check(src, pol):
    bad = check_source(src, ast.parse(src), pol)
    return bad.message if bad else None


@pytest.mark.parametrize("src,strict_says", [
    (PY_TORCH, "torch.matmul() does the work"),
    (CPP_SRC % ("", "at::matmul(x, x)"), "calls matmul() of ATen"),
    (CPP_SRC % ("#include <cublas_v2.h>", "x"), "vendor library header cublas_v2"),
    (CPP_SRC % ("", "(cublasSgemm(h), x)"), "vendor library function cublasSgemm"),
])
def test_compute_in_pytorch_or_a_vendor_library_is_strict_only(src, strict_says):
    assert strict_says in _check(src, "strict")
    assert _check(src, "kernelbench") is None


@pytest.mark.parametrize("src,says", [
    (PY_TORCH.replace("return ext.f", "try:\n            pass\n        except Exception:\n            pass\n        return ext.f"),
     "try/except"),
    (PY_TORCH.replace("import torch\n", "import torch\nimport threading\n", 1), "importing threading"),
    (PY_TORCH.replace("return ext.f(", "torch.allclose = None\n        return ext.f("), "patching a library"),
    (CPP_SRC % ("", "(PyRun_SimpleString(\"1\"), x)"), "reaches into the Python interpreter"),
    (CPP_SRC % ("TORCH_LIBRARY(m, n) {}", "x"), "TORCH_LIBRARY"),
])
def test_every_other_check_holds_under_both(src, says):
    for pol in policy.POLICIES:
        assert says in (_check(src, pol) or ""), pol


# ---------------------------------------------------------------- the runtime watch
def _k_relu_into(x, out):   # stands for an extension function that writes its result into `out`
    out.copy_(torch.relu(x))


def _k_identity(x):          # returns its input untouched
    return x


def _k_noop(x):              # runs, writes nothing
    return None


def _k_clone(x):             # a copy kernel: new memory with the same data
    return x.clone()


relu_into, identity, noop, clone = map(watch._wrap, (_k_relu_into, _k_identity, _k_noop, _k_clone))
W = torch.randn(8, 8)


def partial(x):              # the GEMM in PyTorch, the ReLU in "its kernel", an epilogue in PyTorch
    y = x @ W
    out = torch.empty_like(y)
    relu_into(y, out)
    return out * 2.0 + 1.0


def decoy_on_dummy(x):
    noop(torch.zeros(4))
    return torch.relu(x @ W)


def decoy_writes_dummy(x):
    relu_into(torch.randn(4, 8), torch.empty(4, 8))
    return torch.relu(x @ W)


def identity_decoy(x):
    return torch.relu(identity(x) @ W)


def lazy_copy(x):
    return clone(torch.relu(x @ W))


def overwritten_with_out(x):  # the kernel's buffer, then PyTorch's answer written over it
    buf = torch.empty(4, 8)
    relu_into(torch.randn(4, 8), buf)
    torch.matmul(x, W, out=buf)
    return buf


def overwritten_with_copy(x):
    buf = torch.empty(4, 8)
    relu_into(torch.randn(4, 8), buf)
    buf.copy_(torch.relu(x @ W))
    return buf


def pytorch_only(x):
    return torch.relu(x @ W)


def test_a_kernel_benchmarked_before_its_launch_still_produces_its_output():
    """An autotuner runs the kernel on the call's own tensors (the watch suspended) before the launch
    that counts: that launch rewrites the same bytes, and the output is still the kernel's."""
    x = torch.randn(4, 8)
    with watch.Watch("kernelbench") as w:
        out = torch.empty(4, 8)
        w.suspended += 1
        for _ in range(3):
            relu_into(x, out)
        w.suspended -= 1
        relu_into(x, out)
    assert watch.verdict(w, out) is None
    with watch.Watch("kernelbench") as w:  # and PyTorch's answer written over it afterwards is not
        out = torch.empty(4, 8)
        w.suspended += 1
        relu_into(x, out)
        w.suspended -= 1
        out.copy_(torch.relu(x))
        relu_into(x, out)
    assert "not computed from anything your kernels produced" in watch.verdict(w, out)


def _watch(fn, pol):
    with watch.Watch(pol) as w:
        out = fn(torch.randn(4, 8))
    return watch.verdict(w, out)


@pytest.mark.parametrize("fn,kernelbench_ok", [
    (partial, True), (lazy_copy, True),
    (decoy_on_dummy, False), (decoy_writes_dummy, False), (identity_decoy, False),
    (overwritten_with_out, False), (overwritten_with_copy, False), (pytorch_only, False),
])
def test_watch_strict_refuses_pytorch_compute_kernelbench_follows_the_data(fn, kernelbench_ok):
    assert "PyTorch compute ops" in _watch(fn, "strict")
    why = _watch(fn, "kernelbench")
    if kernelbench_ok:
        assert why is None
    else:
        assert why and ("not computed from anything your kernels produced" in why or "ran none of your kernels" in why)



def test_the_watch_and_the_timeline_never_load_dynamo():
    """torch wraps a dispatch mode's __torch_dispatch__ in dynamo's guard, which imports torch._dynamo
    at the first call (~1 CPU-s in every run process). Ours are unwrapped, and still see every op."""
    code = (
        "import sys, torch\n"
        "from kernel_env.candidate import share, watch\n"
        "w = watch.Watch()\n"
        "with w:\n"
        "    torch.ones(4).relu()\n"
        "t = share.Timeline(torch.device('cpu'))\n"
        "with t:\n"
        "    torch.ones(4).relu()\n"
        "print(w.compute, len(t.spans), 'torch._dynamo' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["{'aten.relu':", "1}", "2", "False"], out.stdout


# ---------------------------------------------------------------- the share's timeline
def _k_busy(x):               # its own work: a Python loop, no PyTorch op inside
    t = 0.0
    for i in range(400_000):
        t += i
    return x[:1] + 0.0 * t    # PyTorch's add, nested in the kernel call: taken out of its time


busy = watch._wrap(_k_busy)


@pytest.mark.parametrize("method", ["events", "profiler"])
def test_share_counts_the_kernels_own_time_not_pytorch_inside_or_around_it(method):
    cpu = torch.device("cpu")
    x, w = torch.randn(256, 256), torch.randn(256, 256)
    # the best of three: on a busy machine time taken from the process between calls lands outside
    # the kernel (a CI run once saw 0.73 with the profiler)
    mine = max((share.measure(lambda: busy(x), cpu, watch.profiling, method) for _ in range(3)),
               key=lambda m: m["share"])
    assert mine["share"] > 0.8 and mine["own_us"] > 0
    assert any(n == "_k_busy" and own for n, _, own in mine["top"])
    # PyTorch's part tens of ms beside the kernel's ~0.1 s: far below the kernel alone's share, whatever
    # the profiler's own overhead (a 256 x 256 power, a few ms, once came out 0.919 against 0.916)
    big = torch.randn(512, 512) / 512 ** 0.5
    heavy = share.measure(lambda: busy(torch.relu(torch.linalg.matrix_power(big @ big, 8))), cpu, watch.profiling,
                          method)
    assert 0 < heavy["share"] < mine["share"] - 0.05, (heavy, mine)
    none = share.measure(lambda: torch.relu(x @ w), cpu, watch.profiling, method)
    assert none["share"] == 0.0 and none["total_us"] > 0
    assert json.loads(json.dumps(mine)) == mine  # travels as JSON


def test_reward_can_weight_the_speed_by_the_share():
    from types import SimpleNamespace
    v = SimpleNamespace(correct=True, roofline_violation=False, suspicious=False, speedup=4.0, stage="timed",
                        error_kind="none", kernel_share=0.25)
    plain, _ = compute_reward(v)
    weighted, reason = compute_reward(v, RewardConfig(share_power=1.0))
    cfg = RewardConfig()
    assert weighted == pytest.approx(cfg.base + 0.25 * (plain - cfg.base)) and "share 0.25" in reason
    assert compute_reward(SimpleNamespace(**{**vars(v), "kernel_share": None}), RewardConfig(share_power=1.0))[0] == plain


# ---------------------------------------------------------------- through the judge (real C++)
@pytest.fixture(scope="module")
def verdicts(cache_dir):
    """Real submissions through one judge, under both policies (one shared C++ build)."""
    judge = Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, build_slots=2, warmup_calls=1, warmup_s=0.0,
                              min_timed_calls=5, timing_budget_s=0.2,
                              work_dir=tempfile.mkdtemp(prefix="kernel_env_test_policy_")))
    # the partial answer under each policy, the lazy one and the decoy's other cases, and an honest
    # all-kernel answer are in the hack battery too (tests/test_hacks.py, both policies)
    jobs = {
        ("partial", None): (LINRELU, "tests/hacks/partial_torch_linear.py"),
        ("decoy", "kernelbench"): (LINRELU, "linear_relu_decoy.py"),
        ("lazy", "kernelbench"): (LINRELU, "linear_relu_lazy.py"),
        ("honest", "strict"): (RELU, "relu_ok.py"),
    }

    async def go():
        try:
            return await asyncio.gather(*[judge.evaluate(task, submission(path), pol)
                                          for (_, pol), (task, path) in jobs.items()])
        finally:
            await judge.aclose()

    return dict(zip(jobs, asyncio.run(go())))


@slow
def test_a_partial_level2_answer_is_correct_by_default(verdicts):
    """Level 2's default policy is kernelbench: the GEMM in PyTorch, the ReLU in the submission's
    kernel (under strict the same file is rejected: tests/test_hacks.py)."""
    v = verdicts["partial", None]
    assert v.correct and v.policy == "kernelbench", v.feedback
    assert 0.0 < v.kernel_share < 1.0 and "Your kernels ran" in v.feedback
    assert v.details["kernel_time"]["total_us"] > 0


@slow
def test_pytorch_doing_all_the_work_beside_a_decoy_fails(verdicts):
    v = verdicts["decoy", "kernelbench"]  # under strict its torch.relu() call is refused before it runs
    assert not v.correct and "not computed from anything your kernels produced" in v.feedback


@slow
def test_a_trivial_kernel_after_pytorchs_work_is_correct_with_a_share_near_zero(verdicts):
    lazy = verdicts["lazy", "kernelbench"]
    # near 0: PyTorch's GEMM takes 0.5-2 ms on the CPU, the kernel's one row ~0.1 ms, mostly the call's
    # own overhead, which on 2 busy cores was seen to take up to a fifth of the time
    assert lazy.correct and lazy.kernel_share < 0.35, (lazy.kernel_share, lazy.feedback)
    assert lazy.kernel_share < verdicts["partial", None].kernel_share


@slow
def test_an_all_kernel_answer_has_nearly_all_the_share(verdicts):
    v = verdicts["honest", "strict"]
    assert v.correct and v.policy == "strict" and v.kernel_share > 0.5, (v.kernel_share, v.feedback)


def test_min_kernel_share_refuses_a_correct_answer_whose_kernels_do_little():
    """Under kernelbench with a minimum share, a correct answer below it (or one whose share could not
    be measured) fails with the reason; under strict the minimum does not apply."""
    from kernel_env.judge.verdict import Verdict, finish
    cfg = JudgeConfig(min_kernel_share=0.5)
    profile = {"device_name": "cpu", "flops": 1e6, "bytes": 1e6, "t_ref_ms": 1.0, "t_min_ms": 0.1, "bound": "memory",
               "ref_roofline_frac": 0.1}
    low = {"share": 0.1, "own_us": 10.0, "total_us": 100.0, "top": [["aten::addmm", 90.0, False], ["relu", 10.0, True]]}
    v = finish(Verdict(LINRELU, "run", policy="kernelbench"), cfg, profile, 5, None, [2.0] * 5, low)
    assert (v.stage, v.error_kind, v.correct, v.speedup) == ("run", "low_kernel_share", False, None)
    assert "at least 50%" in v.feedback and "Your kernels ran 10% of the CPU time; aten::addmm 90%" in v.feedback
    assert compute_reward(v)[0] == 0 and v.details["speedup_if_accepted"] == pytest.approx(0.5)
    unknown = finish(Verdict(LINRELU, "run", policy="kernelbench"), cfg, profile, 5, None, [2.0] * 5, None)
    assert unknown.error_kind == "low_kernel_share" and "could not be measured" in unknown.feedback
    for pol, kt in (("strict", low), ("kernelbench", {**low, "share": 0.6, "own_us": 60.0})):
        ok = finish(Verdict(LINRELU, "run", policy=pol), cfg, profile, 5, None, [2.0] * 5, kt)
        assert ok.correct and ok.kernel_share == kt["share"], pol
