"""A submission whose import runs none of its own code (judge/inert_import.py) skips the build stage;
anything its import could do (loop, sleep, compile, crash) still happens in a build process, outside
the device slot."""
import ast
from pathlib import Path

import pytest

from kernel_env.judge import Judge, JudgeConfig
from kernel_env.judge.inert_import import is_inert

from cases import submission

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
    judge = Judge(JudgeConfig(device="cpu", cache_dir=tmp_path / "cache", work_dir=tmp_path / "work"))
    inert = submission(ROOT / "tests" / "submissions" / "triton_relu.py")
    v = judge.evaluate_sync("level1/1_Small_ReLU", inert)
    assert v.stage == "timed" and v.correct, v.feedback
    assert v.details.get("build_skipped") == "inert import" and judge.stats()["builds"] == 0
    # the same kernel with a call at import: imported by a build process first, as before
    v = judge.evaluate_sync("level1/1_Small_ReLU", inert.replace("\nclass ModelNew", "\ntorch.manual_seed(0)\n\n\nclass ModelNew", 1))
    assert v.stage == "timed" and v.correct, v.feedback
    assert "build_skipped" not in v.details and judge.stats()["builds"] == 1


def test_an_inert_source_that_fails_at_import_gets_the_import_error(tmp_path):
    judge = Judge(JudgeConfig(device="cpu", cache_dir=tmp_path / "cache", work_dir=tmp_path / "work"))
    src = submission(ROOT / "tests" / "submissions" / "triton_relu.py").replace(
        "\nclass ModelNew", "\nBROKEN = NOT_DEFINED_ANYWHERE\n\n\nclass ModelNew", 1)
    assert is_inert(ast.parse(src))
    v = judge.evaluate_sync("level1/1_Small_ReLU", src)
    assert v.stage == "build" and "NOT_DEFINED_ANYWHERE" in v.feedback, (v.stage, v.feedback)
