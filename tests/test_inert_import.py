"""A submission whose import runs none of its own code (judge/inert_import.py) skips the build stage;
anything its import could do (loop, sleep, compile, crash) still happens in a build process, outside
the device slot."""
import ast
import os
import time
from pathlib import Path

import pytest

from kernel_env.judge import Judge, JudgeConfig
from kernel_env.judge.inert_import import is_inert

from cases import submission
from conftest import sharing_the_precompiled_header

ROOT = Path(__file__).resolve().parent.parent

HEAD = ("import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
        "from typing import Optional\n")
KERNEL = ("@triton.jit\ndef _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
          "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
          "    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)\n")
MODEL = ("class ModelNew(nn.Module):\n    '''doc'''\n    scale: float = 1.0\n"
         "    def forward(self, x: torch.Tensor, eps: Optional[float] = None) -> torch.Tensor:\n"
         "        y = torch.empty_like(x)\n        _k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n"
         "        return y\n")


@pytest.mark.parametrize("path", ["examples/submissions/19_ReLU_triton.py", "examples/submissions/23_Softmax_triton.py",
                                  "examples/submissions/1_Square_matrix_multiplication__triton.py",
                                  "tests/honest/gpu_triton_autotune.py", "tests/honest/triton_prealloc_buffer.py"])
def test_triton_answers_as_written_are_inert(path):
    assert is_inert(ast.parse(submission(ROOT / path)))


@pytest.mark.parametrize("extra", [
    "",
    "BLOCK = 1 << 16\nEPS: float = 1e-5\nSIZES = (2 ** 20, -3, 4 * 256)\nT = int | None\n",
    "@triton.autotune(configs=[triton.Config({'BLOCK': 1024}, num_warps=4)], key=['n'])\n"
    "@triton.jit\ndef _k2(x, n, BLOCK: tl.constexpr):\n    pass\n",
    "@triton.heuristics({'EVEN': lambda args: args['n'] % 2 == 0})\n@triton.jit\ndef _k3(x, n, EVEN: tl.constexpr):\n    pass\n",
    "class Helper:\n    @staticmethod\n    def f(x):\n        return x\n",
    "DEVICE = torch.device('cuda')\nBIG = torch.finfo(torch.float32).max\nB = triton.next_power_of_2(1000)\n",
])
def test_definitions_literals_and_tritons_decorators_are_inert(extra):
    assert is_inert(ast.parse(HEAD + KERNEL + extra + MODEL))


@pytest.mark.parametrize("extra", [
    "torch.manual_seed(0)\n",                                   # a call
    "DEVICE = triton.runtime.driver.active.get_active_torch_device()\n",  # the GPU's driver, at import
    "while True:\n    pass\n",                                  # a loop
    "import time\n",                                            # another module
    "import os\nos.environ['X'] = '1'\n",
    "from torch.utils.cpp_extension import load_inline\n",      # the builder
    "X = [i for i in range(10 ** 12)]\n",                      # a comprehension runs a loop
    "X = 10 ** 10 ** 10\n",                                     # arithmetic without end
    "X = 'x' * 10 ** 10\n",
    "X = (1 << 62) << 62\n",
    "if torch.cuda.is_available():\n    X = 1\n",
    "def spin(f):\n    while True:\n        pass\n@spin\ndef g():\n    pass\n",   # its own decorator
    "staticmethod = lambda f: f()\nclass A:\n    @staticmethod\n    def g():\n        pass\n",  # a builtin rebound
    "class Base:\n    def __init_subclass__(cls):\n        pass\nclass A(Base):\n    pass\n",  # its own base
    "class Meta(type):\n    pass\nclass A(metaclass=Meta):\n    pass\n",
    "class A:\n    x = 1\nY = A.x\n",                         # an attribute of its own class (a descriptor?)
    "class G:\n    def __class_getitem__(cls, k):\n        pass\nX: G[int] = 1\n",
    "def g(x=torch.zeros(4)):\n    return x\n",               # a default made at import
    "def g(x: print('annotation')):\n    pass\n",              # an annotation evaluated at import
    "X = f'{torch.__version__}'\n",
    "try:\n    X = 1\nexcept Exception:\n    pass\n",
    "del torch\n",
])
def test_anything_that_runs_at_import_is_not_inert(extra):
    assert not is_inert(ast.parse(HEAD + KERNEL + extra + MODEL))


def test_an_inert_import_skips_the_build_stage_and_one_that_runs_code_does_not(tmp_path):
    judge = Judge(JudgeConfig(device="cpu", cache_dir=sharing_the_precompiled_header(tmp_path / "cache"), work_dir=tmp_path / "work"))
    inert = submission(ROOT / "tests" / "submissions" / "triton_relu.py")
    v = judge.evaluate_sync("level1/1_Small_ReLU", inert)
    assert v.stage == "timed" and v.correct, v.feedback
    assert v.details.get("build_skipped") == "inert import" and judge.stats()["builds"] == 0
    # the same kernel with a call at import: imported by a build process first, as before
    v = judge.evaluate_sync("level1/1_Small_ReLU", inert.replace("\nclass ModelNew", "\ntorch.manual_seed(0)\n\n\nclass ModelNew", 1))
    assert v.stage == "timed" and v.correct, v.feedback
    assert "build_skipped" not in v.details and judge.stats()["builds"] == 1


def test_an_inert_source_that_fails_at_import_gets_the_import_error(tmp_path):
    judge = Judge(JudgeConfig(device="cpu", cache_dir=sharing_the_precompiled_header(tmp_path / "cache"), work_dir=tmp_path / "work"))
    src = submission(ROOT / "tests" / "submissions" / "triton_relu.py").replace(
        "\nclass ModelNew", "\nBROKEN = NOT_DEFINED_ANYWHERE\n\n\nclass ModelNew", 1)
    assert is_inert(ast.parse(src))
    v = judge.evaluate_sync("level1/1_Small_ReLU", src)
    assert v.stage == "build" and "NOT_DEFINED_ANYWHERE" in v.feedback, (v.stage, v.feedback)


# ---------------------------------------------------------------- load_inline calls with literal arguments
from kernel_env.judge.builds import bind_load_inline  # noqa: E402
from kernel_env.judge.inert_import import load_inline_calls  # noqa: E402

CPP_HEAD = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
CPP_CALL = ("SRC = r'''\n#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x.relu(); }\n'''\n"
            "DECL = 'torch::Tensor f(torch::Tensor x);'\n"
            "_ext = load_inline(name='lit_ext', cpp_sources=[SRC], functions=['f'], extra_cflags=['-O2'], verbose=True)\n")
CPP_MODEL = ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.f(x)\n")


@pytest.mark.parametrize("path", ["examples/submissions/19_ReLU_cuda.py", "examples/submissions/23_Softmax_cuda.py",
                                  "examples/submissions/1_Square_matrix_multiplication__cuda.py",
                                  "examples/submissions/40_LayerNorm_cuda.py", "tests/submissions/relu_ok.py"])
def test_cuda_and_cpp_answers_as_written_make_literal_load_inline_calls(path):
    calls = load_inline_calls(ast.parse(submission(ROOT / path)))
    assert calls and all(isinstance(kw.get("name"), str) for _, kw in calls), calls
    assert not is_inert(ast.parse(submission(ROOT / path)))  # a build, unlike a Triton answer


def test_literal_arguments_are_read_as_the_call_would_see_them():
    src = (CPP_HEAD + "import torch.utils.cpp_extension as cpp\nHEAD = '#include <torch/extension.h>\\n'\n"
           "BODY = 'int g() { return 1; }'\nFLAGS = ('-O3', '-DX=1')\n"
           "m1 = load_inline('a', HEAD + BODY, functions=['g'], extra_cflags=FLAGS)\n"
           "m2 = cpp.load_inline(name='b', cpp_sources=[HEAD, BODY], with_cuda=False)\n"
           "torch.utils.cpp_extension.load_inline(name='c', cpp_sources='', is_python_module=False)\n" + CPP_MODEL)
    calls = load_inline_calls(ast.parse(src))
    assert calls == [(["a", "#include <torch/extension.h>\nint g() { return 1; }"], {"functions": ["g"], "extra_cflags": ["-O3", "-DX=1"]}),
                     ([], {"name": "b", "cpp_sources": ["#include <torch/extension.h>\n", "int g() { return 1; }"], "with_cuda": False}),
                     ([], {"name": "c", "cpp_sources": "", "is_python_module": False})]


@pytest.mark.parametrize("extra", [
    "SRC = SRC + '// changed'\n",                           # bound twice: the value at the call is not read
    "def SRC():\n    pass\n",
    "import torch.nn as SRC\n",                              # a name an import binds again
    "import os\n",                                          # a module of its own choice
    "torch.manual_seed(0)\n",                               # any other call
])
def test_a_name_bound_again_or_other_code_is_no_literal_build(extra):
    src = CPP_HEAD + CPP_CALL.replace("_ext = load_inline", extra + "_ext = load_inline") + CPP_MODEL
    assert load_inline_calls(ast.parse(src)) is None


@pytest.mark.parametrize("call", [
    "_ext = load_inline(name=NAME, cpp_sources=[SRC])\n",                  # a name bound after the call
    "_ext = load_inline(name=f'ext{1}', cpp_sources=[SRC])\n",            # an f-string
    "_ext = load_inline(name='e', cpp_sources=[SRC.strip()])\n",          # a method call
    "_ext = load_inline(name='e', cpp_sources=[SRC], **{'verbose': True})\n",
    "_ext = load_inline(*['e', SRC])\n",
    "_ext = load_inline(name='e', cpp_sources=[SRC], extra_cflags=['-O' + str(3)])\n",
    "_ext = load_inline(name='e', cpp_sources=[SRC] * 2)\n",
    "_ext = load_inline(name='e', cpp_sources=[SRC])\nF = _ext.f\n",      # the module used at import
    "_ext, = [load_inline(name='e', cpp_sources=[SRC])]\n",
])
def test_calls_whose_arguments_are_not_literals_are_no_literal_build(call):
    src = CPP_HEAD + CPP_CALL.split("_ext = ")[0] + call + "NAME = 'late'\n" + CPP_MODEL
    assert load_inline_calls(ast.parse(src)) is None


def test_literals_that_grow_without_end_are_not_read():
    """`B = A + A` doubles a string each line: the judge reads a source's literals in its own process,
    so their size is bounded, and such a source goes to a build process (which has its own limits)."""
    doubling = "".join(f"S{i + 1} = S{i} + S{i}\n" for i in range(200))
    src = CPP_HEAD + "S0 = 'xxxxxxxx'\n" + doubling + f"_ext = load_inline(name='e', cpp_sources=[S200])\n" + CPP_MODEL
    t0 = time.monotonic()
    assert load_inline_calls(ast.parse(src)) is None
    wide = CPP_HEAD + "S = '" + "x" * 100_000 + "'\nL = [" + ", ".join(["S"] * 1000) + "]\n_ext = load_inline(name='e', cpp_sources=L)\n" + CPP_MODEL
    assert load_inline_calls(ast.parse(wide)) is None
    nested = CPP_HEAD + "L0 = ['x']\n" + "".join(f"L{i + 1} = [L{i}, L{i}]\n" for i in range(60)) + "_ext = load_inline(name='e', cpp_sources=L60)\n" + CPP_MODEL
    assert load_inline_calls(ast.parse(nested)) is None
    assert time.monotonic() - t0 < 5
    # a real source's size is far below the bound
    assert load_inline_calls(ast.parse(CPP_HEAD + CPP_CALL + CPP_MODEL))


@pytest.mark.parametrize("args,kwargs", [
    (["n", "c"], {}),
    (["n"], {"cpp_sources": ["c"], "cuda_sources": "k", "functions": ["f"], "verbose": True}),
    ([], {"name": "n", "cpp_sources": "c", "extra_cflags": ["-O3"], "with_cuda": True, "is_python_module": False}),
])
def test_a_call_read_from_the_source_is_what_a_build_process_reports(args, kwargs):
    """The compile process and the run process key a build by the call's arguments: the judge's
    reading must be the build process's (torch's own signature, defaults filled in, no `verbose`)."""
    import inspect
    from torch.utils import cpp_extension as ce
    bound = inspect.signature(ce.load_inline).bind(*args, **kwargs)
    bound.apply_defaults()
    assert bind_load_inline(args, kwargs) == {k: v for k, v in bound.arguments.items() if k != "verbose"}


@pytest.mark.parametrize("args,kwargs", [([], {"cpp_sources": "c"}), (["n"], {"name": "m", "cpp_sources": "c"}),
                                         ([], {"name": "n", "cpp_sources": "c", "no_such_flag": 1}),
                                         (["n", "c"] + [None] * 30, {})])
def test_a_call_torch_would_refuse_is_not_read(args, kwargs):
    assert bind_load_inline(args, kwargs) is None


HANG_AT_LOAD = ("// a static initializer that never returns: runs wherever the module is loaded\n"
                "static int never = [] { volatile int x = 1; while (x) {} return 0; }();\n")


SMALL_CPP = ("import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
             "SRC = '#include <torch/extension.h>\\n// TAG\\n"
             "torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }\\n'\n"
             "_ext = load_inline(name='lit_TAG', cpp_sources=[SRC], functions=['relu'])\n"
             "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.relu(x)\n")


@pytest.mark.slow
def test_literal_load_inline_calls_are_compiled_without_a_build_process(cache_dir, tmp_path):
    # the suite's shared cache: whichever test came first published the test prelude's build there
    # an import the judge read as inert gets a deadline of its own in the run process
    judge = Judge(JudgeConfig(device="cpu", cache_dir=cache_dir, work_dir=tmp_path / "work", import_timeout_s=60.0,
                              inert_import_timeout_s=4.0))
    src = submission(ROOT / "tests" / "submissions" / "relu_ok.py")
    v = judge.evaluate_sync("level1/1_Small_ReLU", src)
    assert v.stage == "timed" and v.correct, v.feedback
    assert v.details.get("build_by") == "judge" and judge.stats()["builds"] == 1
    # the run process loaded what the judge built under the key it computes itself: it compiled nothing
    assert v.details["run_phases"]["builds_loaded"] == 1, v.details["run_phases"]
    # the same call behind code of the source's own: a build process imports it, and loads that build
    other = src.replace("\nclass ModelNew", "\ntorch.manual_seed(0)\n\n\nclass ModelNew", 1)
    v = judge.evaluate_sync("level1/1_Small_ReLU", other)
    assert v.stage == "timed" and v.correct and "build_by" not in v.details, v.feedback
    # a compile error: the compilers' message, before any run process
    tag = os.urandom(4).hex()
    small = SMALL_CPP.replace("TAG", tag)
    broken = small.replace("return x.clamp_min(0);", "return undeclared_name;")
    assert broken != small and load_inline_calls(ast.parse(broken))
    v = judge.evaluate_sync("level1/1_Small_ReLU", broken)
    assert (v.stage, v.error_kind) == ("build", "build_error") and "undeclared_name" in v.feedback, v.feedback
    assert v.details.get("build_by") is None and "run_phases" not in v.details
    # a static initializer that never returns now first runs in the run process: ended by the deadline
    # of an inert import (not import_timeout_s), the evaluation after it judged as before
    hang = small.replace("// " + tag, "// " + tag + "\\n" + HANG_AT_LOAD.replace("\n", "\\n"))
    assert hang != small and load_inline_calls(ast.parse(hang))
    t0 = time.monotonic()
    v = judge.evaluate_sync("level1/1_Small_ReLU", hang)
    assert (v.stage, v.error_kind) == ("build", "build_timeout"), v.feedback
    assert v.details.get("build_by") == "judge" and time.monotonic() - t0 < 200
    assert v.details["deadline"]["deadline_s"] == 4.0 and v.details["deadline"]["expired"] == "step", v.details
    # the compile processes said where their CPU went: their start, and the compiler they ran
    cpu = judge.stats()["compile_cpu_s"]
    assert cpu["n"] >= 1 and cpu["start"]["mean"] > 0.1 and cpu["compilers"]["mean"] > 0.1, cpu
    v = judge.evaluate_sync("level1/1_Small_ReLU", src)
    assert v.stage == "timed" and v.correct and v.details.get("build_cached"), v.feedback
