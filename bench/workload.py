"""What the benchmarks submit: honest submissions per device, and how each is made a fresh build.

On cuda: the hand-written CUDA and Triton kernels of examples/submissions for four KernelBench
level-1 tasks. On cpu: the CPU test kernels on the small built-in tasks (C++ through load_inline,
Triton under its interpreter). The C++ files of tests/submissions share one extension byte for byte,
so made unique each costs a full build (~25-40 s on 2 cores): the CPU pool is mostly Triton.
"""
from __future__ import annotations

import ast
import threading
import runpy
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a file as the judge gets it: most C++ test submissions leave the shared C++ prelude to tests/cases.py,
# taken by path (tests/ is no package); other files are read unchanged
submission = runpy.run_path(str(ROOT / "tests" / "cases.py"))["submission"]


@dataclass(frozen=True)
class Sub:
    task: str   # task id
    path: str   # submission file, relative to the checkout root
    lang: str   # cuda | triton | cpp

    @property
    def code(self) -> str:
        return submission(ROOT / self.path)

    @property
    def label(self) -> str:
        return f"{self.task}={self.path}"


def _ex(task: str, stem: str) -> list[Sub]:
    return [Sub(task, f"examples/submissions/{stem}_cuda.py", "cuda"),
            Sub(task, f"examples/submissions/{stem}_triton.py", "triton")]


# load-phase jobs are taken from these lists in order, round and round
POOL = {
    "cuda": (_ex("level1/19_ReLU", "19_ReLU") + _ex("level1/23_Softmax", "23_Softmax")
             + _ex("level1/1_Square_matrix_multiplication_", "1_Square_matrix_multiplication_")
             + _ex("level1/40_LayerNorm", "40_LayerNorm")),
    "cpu": [Sub("level1/1_Small_ReLU", "tests/honest/triton_prealloc_buffer.py", "triton"),
            Sub("level1/3_Small_Softmax", "tests/honest/triton_softmax_stable.py", "triton"),
            Sub("level1/6_Small_Tanh", "tests/honest/triton_empty_like_view.py", "triton"),
            Sub("level1/6_Small_Tanh", "tests/submissions/tanh_ok.py", "cpp"),
            Sub("level1/1_Small_ReLU", "tests/honest/triton_prealloc_buffer.py", "triton"),
            Sub("level1/3_Small_Softmax", "tests/honest/triton_softmax_stable.py", "triton"),
            Sub("level1/6_Small_Tanh", "tests/honest/triton_empty_like_view.py", "triton"),
            Sub("level1/1_Small_ReLU", "tests/honest/triton_prealloc_buffer.py", "triton")],
}
# cold/warm latency: a fresh build of this kernel, then the same source again
COLD = {"cuda": Sub("level1/19_ReLU", "examples/submissions/19_ReLU_cuda.py", "cuda"),
        "cpu": Sub("level1/1_Small_ReLU", "tests/submissions/relu_ok.py", "cpp")}
# timing spread: these kernels, not made unique (their builds are cached), evaluated again and again.
# On cuda a millisecond kernel with small inputs (the plain harness makes inputs on the CPU: 19_ReLU's
# 6.4 GB would cost it ~30 s per evaluation) and a ~10 us one (bench/tasks): one per spread goal (README.md)
PROBES = {"cuda": [Sub("level1/1_Square_matrix_multiplication_",
                       "examples/submissions/1_Square_matrix_multiplication__cuda.py", "cuda"),
                   Sub("level1/19_ReLU_4M", "examples/submissions/19_ReLU_cuda.py", "cuda")],
          "cpu": [Sub("level1/1_Small_ReLU", "tests/submissions/relu_ok.py", "cpp")]}
# the benchmark's own problems, served beside the KernelBench folder's (run_all.task_root)
BENCH_TASKS = ROOT / "bench" / "tasks"


def parse_sub(spec: str) -> Sub:
    """TASK=FILE (the language is guessed from the source)."""
    task, path = spec.split("=", 1)
    code = submission(ROOT / path)  # an absolute path stays as it is
    lang = "triton" if "triton" in code and "load_inline" not in code else (
        "cuda" if "cuda_sources" in code else "cpp")
    return Sub(task, path, lang)


# CPython 3.11's ast.parse is not safe in several threads at once (the load's clients call unique()
# together): "SystemError: AST constructor recursion depth mismatch" was seen here
_AST_LOCK = threading.Lock()


def unique(code: str, tag: str) -> str:
    """The same submission, but a build of its own: a comment inside every kernel source.

    load_inline: a `// tag` line before the first #include (torch hashes the sources, and so does the
    judge's build folder key). Triton: a `# tag` line inside every @triton.jit function (Triton's
    cache key hashes the function's source text, comments included). A plain Python comment
    elsewhere would change neither."""
    if "load_inline" in code:
        i = code.find("#include")
        if i < 0:
            raise ValueError("load_inline submission without #include: cannot tag its kernel source")
        return code[:i] + f"// {tag}\n" + code[i:]
    lines = code.splitlines(keepends=True)
    spots = []
    with _AST_LOCK:
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                first = node.body[0]
                spots.append((first.lineno - 1, first.col_offset))
    if not spots:
        raise ValueError("no load_inline and no @triton.jit function: cannot tag a kernel source")
    for line, col in sorted(spots, reverse=True):
        lines.insert(line, " " * col + f"# {tag}\n")
    return "".join(lines)
