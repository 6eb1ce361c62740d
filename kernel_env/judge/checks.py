"""TRUSTED: checks on the submission's source, before anything runs.

They catch the cheap, well-known reward hacks early and with a clear message (field notes §4): no
kernel at all, torch doing the work, a try/except fallback, inheriting the reference, patching timers
or the comparison, threads and subprocesses. Runtime checks in the judge back them up; these are not
the only line of defence, so they stay simple and explainable.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .verdict import ErrorKind

# torch functions that do the work a kernel should do. Allocation, shapes and dtype handling stay allowed.
TORCH_COMPUTE = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "tensordot", "linear", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "relu", "relu_", "gelu", "silu", "sigmoid",
    "tanh", "softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
    "dropout", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "scaled_dot_product_attention", "cumsum", "cumprod",
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "norm", "var", "std", "logsumexp",
    "exp", "log", "sqrt", "rsqrt", "abs", "clamp", "clip", "hardtanh", "elu", "selu", "leaky_relu", "softplus",
    "softsign", "hardsigmoid", "hardswish", "mish", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "smooth_l1_loss", "kl_div", "cosine_similarity", "triplet_margin_loss", "hinge_embedding_loss",
    "cdist", "matrix_power", "addmv", "mv", "dot", "outer", "cross", "diag", "tril", "triu", "where", "pow",
    "multiply", "mul", "add", "sub", "div", "maximum", "minimum", "erf", "sin", "cos", "argsort", "sort", "topk",
}
TORCH_NAMESPACES = {"torch", "F", "torch.nn.functional", "functional", "torch.special", "torch.linalg", "torch.fft"}
# nn layers that compute: constructing them to hold parameters is fine, calling them is not (see below).
FORBIDDEN_IMPORTS = {"threading", "multiprocessing", "subprocess", "concurrent", "asyncio", "ctypes", "socket",
                     "signal", "inspect", "gc", "importlib", "builtins", "sys", "pickle", "marshal", "shutil"}
TIMER_NAMES = {"perf_counter", "perf_counter_ns", "time", "time_ns", "monotonic", "monotonic_ns", "Event",
               "elapsed_time", "synchronize", "record", "allclose", "isclose", "assert_close", "equal"}


@dataclass
class CheckFailure:
    kind: ErrorKind
    message: str
    line: int | None = None


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _has_kernel(tree: ast.AST, source: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "load_inline":
            return True
        if isinstance(node, (ast.FunctionDef,)) and any(
                _dotted(d.func if isinstance(d, ast.Call) else d).endswith(("triton.jit", "triton.autotune", "jit"))
                for d in node.decorator_list) and re.search(r"\btl\.", source):
            return True
    return False


def check_source(source: str, tree: ast.Module) -> CheckFailure | None:
    """The first forbidden pattern found, or None."""
    if not _has_kernel(tree, source):
        return CheckFailure(ErrorKind.NO_KERNEL, "no custom kernel found: build one with "
                            "torch.utils.cpp_extension.load_inline (CUDA or C++) or write a @triton.jit kernel")
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, "try/except is not allowed: a failing kernel must fail, "
                                "not fall back to PyTorch", line)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for n in names:
                if n.split(".")[0] in FORBIDDEN_IMPORTS or n in ("os.fork",):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"importing {n} is not allowed in a submission", line)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("time",) and any(
                    a.name in TIMER_NAMES for a in node.names):
                pass  # reading a clock is harmless; replacing it is caught below
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for base in node.bases:
                if _dotted(base).split(".")[-1] == "Model":
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, "ModelNew must not inherit from the reference Model", line)
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            head, _, last = name.rpartition(".")
            if name in ("Model", "reference_problem.Model") or last == "Model" and head:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, "calling the reference Model is not allowed", line)
            if head in TORCH_NAMESPACES and last in TORCH_COMPUTE:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{name}() does the work in PyTorch: write it in your "
                                    "kernel instead (allocating outputs with torch.empty* is fine)", line)
            if name in ("setattr", "delattr", "exec", "eval", "compile", "__import__", "globals", "vars", "os.fork",
                        "os.kill", "os.system", "os.popen", "os.execv", "os.execve", "os.setsid", "open"):
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{name}() is not allowed in a submission", line)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for tgt in targets:
                dotted = _dotted(tgt)
                if isinstance(tgt, ast.Attribute) and dotted.split(".")[0] in ("torch", "time", "F", "nn", "os", "triton",
                                                                                 "statistics", "harness", "kernel_env"):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"assigning to {dotted} (patching a library) is not allowed", line)
                if isinstance(tgt, ast.Name) and tgt.id in ("torch", "time"):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"rebinding {tgt.id} is not allowed", line)
    return None
