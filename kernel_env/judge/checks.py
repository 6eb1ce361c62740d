"""TRUSTED: checks on the submission's source, before anything runs.

They catch the cheap, well-known reward hacks early and with a clear message (field notes §4): no
kernel at all, torch doing the work (under the strict policy), a try/except fallback, inheriting the reference, patching timers
or the comparison, threads and subprocesses. Runtime checks in the judge back them up; these are not
the only line of defence, so they stay simple and explainable.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..compute_policy import STRICT
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
                     "signal", "inspect", "gc", "importlib", "builtins", "sys", "pickle", "marshal", "shutil",
                     # other ways to reach the evaluator's process state, files, or run work elsewhere
                     "_thread", "kernel_env", "reference_problem", "traceback", "types", "code", "codeop", "dis",
                     "runpy", "mmap", "io", "pathlib", "tempfile", "glob", "fcntl", "pty", "select", "selectors",
                     "posix", "resource", "urllib", "http", "ssl", "requests", "operator", "copyreg",
                     "torch.library", "torch.multiprocessing", "torch.jit", "torch.fx", "torch.export",
                     "torch.overrides", "torch.compiler"}
# Attribute names that reach interpreter internals (frames, globals, the module table, class graphs):
# the candidate harness and the runtime watch (candidate/watch.py) live in the same process.
FORBIDDEN_ATTRS = {
    "__dict__", "__globals__", "__builtins__", "__subclasses__", "__bases__", "__base__", "__mro__", "__code__",
    "__closure__", "__defaults__", "__kwdefaults__", "__func__", "__self__", "__getattribute__", "__setattr__",
    "__delattr__", "__import__", "__loader__", "__spec__", "__reduce__", "__reduce_ex__", "__wrapped__",
    "__torch_function__", "__torch_dispatch__", "f_locals", "f_globals", "f_back", "f_code", "f_builtins",
    "tb_frame", "tb_next", "gi_frame", "gi_code", "cr_frame", "ag_frame", "sys", "builtins", "_thread",
}
# torch entry points that hand the work to PyTorch's own compilers, run it elsewhere or touch files
FORBIDDEN_TORCH_ATTRS = {"library": "registering operators", "ops": "calling dispatcher operators directly",
                         "compile": "torch.compile (it generates the kernel from PyTorch ops)",
                         "jit": "torch.jit", "fx": "torch.fx", "export": "torch.export",
                         "multiprocessing": "other processes", "save": "writing files", "load": "reading files",
                         "from_file": "mapping files", "from_numpy": "computing with NumPy",
                         "overrides": "torch.overrides", "compiler": "torch.compiler",
                         # the reference runs on the judge's thread count: more threads is not a kernel
                         "set_num_threads": "changing the thread count",
                         "set_num_interop_threads": "changing the thread count"}
# CUDA graphs captured in Python replay whatever torch ops were captured, unseen by the runtime watch
FORBIDDEN_TORCH_CUDA = {"graph", "graphs", "CUDAGraph", "make_graphed_callables"}
# the only parts of os a kernel needs (build flags, paths)
OS_ALLOWED = {"environ", "path", "getenv", "cpu_count", "getpid", "sep", "pathsep", "linesep", "name", "fspath"}
# method names that move the work out of kernels or out of the process
FORBIDDEN_METHODS = {"numpy": "computing with NumPy", "tofile": "writing files", "register_forward_hook": "hooks",
                     "register_forward_pre_hook": "hooks", "suppress": "suppressing exceptions (a fallback)",
                     "attrgetter": "dynamic attribute lookups", "methodcaller": "dynamic attribute lookups"}
# (paths outside its folder are the sandbox's business: read-only file system, own /proc)
FORBIDDEN_STRINGS = ("reference_problem", "kernel_env.", "plan.json")

# C++/CUDA sources: the compute must be written out, not delegated to ATen or a vendor library; no
# detached work, no reaching into the interpreter.
_CPP_MARKERS = ("#include", "__global__", "torch::", "at::", "TORCH_", "PYBIND11", "extern \"C\"")
_CPP_COMPUTE_NAMES = sorted(TORCH_COMPUTE | {"linear", "conv_transpose2d", "addcmul", "addcdiv", "lerp", "sign",
                                             "reciprocal", "neg", "floor", "ceil", "round", "exp2", "log2", "log1p",
                                             "expm1", "sigmoid_", "tanh_", "relu_", "softmax_out", "mm_out",
                                             "matmul_out", "bmm_out", "addmm_out", "gemm", "native_layer_norm",
                                             "native_batch_norm", "_softmax", "cudnn_convolution", "convolution",
                                             "_convolution", "embedding", "gather", "index_select", "scatter"})
# what only the strict policy refuses: the compute delegated to ATen or a vendor library
_CPP_COMPUTE_RULES = [
    (re.compile(r"(?<![\w:])(?:at|torch)::(?:native::|cuda::|cpu::)?(" + "|".join(map(re.escape, _CPP_COMPUTE_NAMES))
                + r")\s*\("), "calls {0}() of ATen/LibTorch from C++: the computation must be in your kernel"),
    (re.compile(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|cusparse\w*|cutlass::gemm\w*)\s*\("),
     "calls the vendor library function {0}(): write the kernel yourself"),
    (re.compile(r"#\s*include\s*[<\"](cublas\w*|cudnn\w*|cublasLt\w*)"), "includes the vendor library header {0}"),
]
# what every policy refuses
_CPP_RULES = [
    (re.compile(r"\b(TORCH_LIBRARY\w*)\b"), "{0} (registering dispatcher operators) is not allowed: expose your "
     "functions with load_inline(functions=[...])"),
    # a helper thread that is joined before returning is fine; one that is detached outlives the call
    # (Tensor::detach() is autograd, not threads: .detach() counts only in sources that make threads)
    (re.compile(r"(pthread_detach|std::async|\.\s*detach\s*\(\s*\))"),
     "uses {0}, which is not allowed in a kernel (work that outlives the call escapes the timer)"),
    # C++ can reach the interpreter itself: patch the harness, read its frames
    (re.compile(r"\b(Py(?:Import|Run|Sys|Eval|Object_SetAttr|Object_GetAttr|Dict_SetItem|Module|Frame|"
                r"ThreadState|GILState_Ensure)\w*)\s*\(|((?:py|pybind11)::(?:module_?::import|eval|exec|globals)\b)"),
     "reaches into the Python interpreter ({0}): not allowed in a kernel"),
    # Processes, signals, files and sockets from native code are the sandbox's business (judge/sandbox.py,
    # tests/test_faults.py): a pattern list here would be easy to get around and would hide those faults.
]
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


def _has_kernel(nodes: list, source: str) -> bool:
    uses_tl = re.search(r"\btl\.", source) is not None  # once: a submission may hold thousands of functions
    for node in nodes:
        if isinstance(node, ast.Call) and _dotted(node.func).split(".")[-1] == "load_inline":
            return True
        if uses_tl and isinstance(node, (ast.FunctionDef,)) and any(
                _dotted(d.func if isinstance(d, ast.Call) else d).endswith(("triton.jit", "triton.autotune", "jit"))
                for d in node.decorator_list):
            return True
    return False


def _forbidden_module(name: str) -> bool:
    parts = name.split(".")
    if parts[0] in FORBIDDEN_IMPORTS or any(".".join(parts[:i]) in FORBIDDEN_IMPORTS for i in range(2, len(parts) + 1)):
        return True
    # private modules of torch/triton (torch._C, torch.utils._python_dispatch, torch._dynamo, ...)
    return parts[0] in ("torch", "triton") and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _check_cpp(nodes: list, policy: str) -> CheckFailure | None:
    rules = (_CPP_COMPUTE_RULES if policy == STRICT else []) + _CPP_RULES
    for node in nodes:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 16):
            continue
        text = node.value
        if not any(m in text for m in _CPP_MARKERS):
            continue
        # comments may mention anything; an unterminated /* ends at the end of the text (as for the
        # compiler, which refuses it), so that thousands of them cost one pass, not one pass each
        code = re.sub(r"//[^\n]*|/\*.*?(?:\*/|\Z)", " ", text, flags=re.S)
        for rx, msg in rules:
            m = rx.search(code)
            if m and m.group(0).lstrip().startswith(".") and not re.search(r"std::j?thread|pthread_create", code):
                m = None  # Tensor::detach(), not a thread
            if m:
                what = next((g for g in m.groups() if g), m.group(0)).strip()
                line = node.lineno + text[: text.find(what)].count("\n") if what in text else node.lineno
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, "the C++/CUDA source " + msg.format(what), line)
    return None


def check_source(source: str, tree: ast.Module, policy: str = STRICT) -> CheckFailure | None:
    """The first forbidden pattern found, or None. Under the kernelbench policy PyTorch compute,
    ATen compute from C++ and vendor libraries are allowed (compute_policy.py); the rest holds under
    both."""
    nodes = list(ast.walk(tree))  # once: the checks below go over them several times
    if not _has_kernel(nodes, source):
        return CheckFailure(ErrorKind.NO_KERNEL, "no custom kernel found: build one with "
                            "torch.utils.cpp_extension.load_inline (CUDA or C++) or write a @triton.jit kernel")
    bad = _check_cpp(nodes, policy)
    if bad:
        return bad
    # names bound by imports: attribute chains from them are library code (torch, F, os, ...)
    aliases: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def resolve(dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        if head in aliases:
            return aliases[head] + ("." + rest if rest else "")
        return dotted

    # `a.b.c` is three Attribute nodes; the rules on dotted names look at the whole chain once, from its
    # outermost node (visited first), or a long chain would cost its length squared
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)}

    for node in nodes:
        line = getattr(node, "lineno", None)
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, "try/except is not allowed: a failing kernel must fail, "
                                "not fall back to PyTorch", line)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                mod = node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            for n in names:
                if _forbidden_module(n) or n in ("os.fork",):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"importing {n} is not allowed in a submission", line)
            if isinstance(node, ast.ImportFrom) and node.module == "os":
                for a in node.names:
                    if a.name not in OS_ALLOWED:
                        return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"os.{a.name} is not allowed in a submission "
                                            f"(only os.{', os.'.join(sorted(OS_ALLOWED))})", line)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for bad_s in FORBIDDEN_STRINGS + ("kernel_env",):
                if bad_s in node.value if bad_s != "kernel_env" else node.value == bad_s:
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"the string {bad_s!r} refers to the evaluator's "
                                        "own files or modules", line)
        if isinstance(node, ast.Attribute):
            if node.attr in FORBIDDEN_ATTRS:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"accessing .{node.attr} (interpreter internals) "
                                    "is not allowed", line)
            full = resolve(_dotted(node)) if id(node) not in inner else ""
            parts = full.split(".")
            if parts[0] == "os" and len(parts) > 1 and parts[1] not in OS_ALLOWED:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{full} is not allowed in a submission (only "
                                    f"os.{', os.'.join(sorted(OS_ALLOWED))})", line)
            if parts[0] in ("torch", "triton") and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{full}: private PyTorch/Triton APIs are not allowed", line)
            if parts[:2] == ["torch", "cuda"] and len(parts) > 2 and parts[2] in FORBIDDEN_TORCH_CUDA:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{full} is not allowed in a submission (CUDA graphs "
                                    "captured from PyTorch ops; launch your own kernels)", line)
            if parts[0] == "torch" and len(parts) > 1 and parts[1] in FORBIDDEN_TORCH_ATTRS:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{full} is not allowed in a submission "
                                    f"({FORBIDDEN_TORCH_ATTRS[parts[1]]})", line)
            if node.attr in FORBIDDEN_METHODS and isinstance(getattr(node, "ctx", None), ast.Load):
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f".{node.attr} is not allowed in a submission "
                                    f"({FORBIDDEN_METHODS[node.attr]})", line)
        if isinstance(node, ast.FunctionDef) and node.name in ("__torch_function__", "__torch_dispatch__"):
            return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"defining {node.name} (a tensor subclass that runs code "
                                "when read) is not allowed", line)
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                b = resolve(_dotted(base))
                if b.split(".")[-1] == "Model" or b.endswith("reference_problem.Model"):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{node.name} must not inherit from the "
                                        "reference Model", line)
                if b.split(".")[-1] == "Tensor" and b.split(".")[0] in ("torch", "Tensor"):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{node.name} subclasses torch.Tensor: outputs "
                                        "must be plain tensors computed by your kernel (no lazy tensors)", line)
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            head, _, last = name.rpartition(".")
            if name in ("Model", "reference_problem.Model") or last == "Model" and head:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, "calling the reference Model is not allowed", line)
            rhead = resolve(head) if head else ""
            torch_call = head in TORCH_NAMESPACES or rhead in ("torch", "torch.nn.functional", "torch.special",
                                                               "torch.linalg", "torch.fft", "torch.Tensor")
            if policy == STRICT and torch_call and last in TORCH_COMPUTE:
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{name}() does the work in PyTorch: write it in your "
                                    "kernel instead (allocating outputs with torch.empty* is fine)", line)
            if name in ("setattr", "delattr", "exec", "eval", "compile", "__import__", "globals", "vars", "os.fork",
                        "os.kill", "os.system", "os.popen", "os.execv", "os.execve", "os.setsid", "open", "input",
                        "breakpoint", "locals"):
                return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{name}() is not allowed in a submission", line)
            if name in ("getattr", "hasattr") and len(node.args) >= 2:
                target, attr = resolve(_dotted(node.args[0])), node.args[1]
                if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                    if target.split(".")[0] in ("torch", "triton", "os", "time", "math", "numpy") or \
                            _dotted(node.args[0]) in aliases:
                        return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{name}() on a module with a computed "
                                            "name is not allowed", line)
                elif attr.value.startswith("_") or attr.value in FORBIDDEN_ATTRS:
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"{name}(..., {attr.value!r}): private attributes "
                                        "are not allowed", line)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for tgt in targets:
                dotted = _dotted(tgt)
                if isinstance(tgt, ast.Attribute) and (dotted.split(".")[0] in (
                        "torch", "time", "F", "nn", "os", "triton", "statistics", "harness", "kernel_env")
                        or dotted.split(".")[0] in aliases):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"assigning to {dotted} (patching a library) is not allowed", line)
                if isinstance(tgt, ast.Name) and tgt.id in ("torch", "time"):
                    return CheckFailure(ErrorKind.FORBIDDEN_PATTERN, f"rebinding {tgt.id} is not allowed", line)
    return None
