"""UNTRUSTED side (runs in the candidate process): `load_inline` with the same result, built faster.

Almost all of a load_inline build is compilers parsing torch's headers: `torch/extension.h` (the whole
C++ frontend and the Python bindings) in both the binding `main.cpp` and, through the submission's own
`#include <torch/extension.h>` and load_inline's `#include <torch/types.h>`, in the `.cu` that nvcc
parses twice (device and host). Two changes, each one falling back to torch's own path:

1. The `.cu` sees a light prelude (cuda_prelude_*.h beside this file: ATen and the `torch::` names of
   torch/types.h, without autograd or the C++ frontend) in place of torch's headers. A kernel that
   needs more does not compile that way; then torch's own load_inline builds it unchanged (and a
   marker in the build folder skips the light attempt next time). The `shim` prelude goes further:
   the .cu sees no torch header at all (cuda_prelude_shim.h declares the API kernels' host code uses,
   and main.cpp answers those calls with torch's own functions, cuda_prelude_shim_bridge.inc); a
   kernel it cannot build is built with the `core` prelude.
2. `main.cpp` includes torch/extension.h through a precompiled header that the judge made at start
   (judge/prebuild.py; its folder comes in KERNEL_ENV_PCH_DIR). gcc ignores a PCH whose flags do not
   match, so the worst case is the normal parse. Under the shim, when the C++ sources only declare
   functions, `main.cpp` includes a light binding header instead (include/torch_binding_light.h,
   precompiled too): the full header's pending template instantiations cost every file that
   includes it seconds even through the PCH. A main.cpp that does not compile that way is built
   with the full header (and a marker skips the light attempt next time).

The module is what torch builds from the same sources with the same flags: same compiler, same
`functions` binding, same build folder (TORCH_EXTENSIONS_DIR/<name>), torch's own versioning.
"""
from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

from . import binding_objects

INCLUDE_DIR = Path(__file__).resolve().parent / "include"
PCH_HEADER = "kernel_env_torch_extension.h"   # `#include <torch/extension.h>`, precompiled beside it
LIGHT_FAILED = "kernel_env_light_failed"       # marker: this source needs torch's full headers
SHIM_FAILED = "kernel_env_shim_failed"         # marker: this source needs more than the shim prelude

# torch's umbrella headers: the light prelude stands in for them in the .cu
_HEAVY_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(extension|types|all|torch)\.h[>"]', re.M)
# and for the shim prelude, also the headers of what it declares itself (its definitions would clash)
_SHIM_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](torch/(extension|types|all|torch)\.h|ATen/ATen\.h'
                           r'|ATen/cuda/CUDAContext\.h|c10/cuda/CUDAGuard\.h|c10/cuda/CUDAStream\.h'
                           r'|c10/cuda/CUDAException\.h|ATen/cuda/Exceptions\.h|ATen/Dispatch\.h|ATen/OpMathType\.h'
                           r'|ATen/core/TensorAccessor\.h)[>"]', re.M)
SHIM_BRIDGE = "cuda_prelude_shim_bridge.inc"
BINDING_HEADER = "kernel_env_torch_binding.h"  # include/torch_binding_light.h, precompiled beside PCH_HEADER
BINDING_FAILED = "kernel_env_binding_failed"   # marker: this main.cpp needs torch/extension.h

_CU_FAILED = re.compile(r"FAILED: (\[code=\d+\] )?cuda\.cuda\.o")
_MAIN_FAILED = re.compile(r"FAILED: (\[code=\d+\] )?main\.o")
_LINK_FAILED = re.compile(r"FAILED: (\[code=\d+\] )?\S+\.so\b")
_COMMENTS = re.compile(r'//[^\n]*|/\*.*?\*/|"(\\.|[^"\\\n])*"', re.S)

_orig_load_inline = None
_orig_load = None


def install() -> None:
    """Replace torch.utils.cpp_extension.load_inline (before the submission is imported)."""
    global _orig_load_inline, _orig_load
    from torch.utils import cpp_extension as ce
    if _orig_load_inline is not None:
        return
    _orig_load_inline, _orig_load = ce.load_inline, ce.load
    sig = inspect.signature(_orig_load_inline)

    def load_inline(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return _orig_load_inline(*args, **kwargs)  # torch's own error message
        bound.apply_defaults()
        a = dict(bound.arguments)
        a.update(a.pop("kwargs", {}) or {})
        key = _call_key(a)
        module = _load_built(a, key)
        if module is not None:
            REUSED.append(key)
        elif COMPILE_BY is not None:  # a build process: the judge's compile process builds it
            module = COMPILE_BY(a, key)
        else:
            module = _fast_or_torch(a, lambda: _orig_load_inline(*args, **kwargs))
            _record_built(a, key, module)
        LOADED.append(getattr(module, "__file__", ""))
        return module

    load_inline.__doc__ = _orig_load_inline.__doc__
    ce.load_inline = load_inline


LOADED: list[str] = []  # module files load_inline gave this process, in order (loaded_digest)
# In a build process: (call arguments, call key) -> the module, built by a compile process of the judge
# (no candidate code runs there) into the published build folder, and imported from there. Set by the
# runner; None elsewhere (a run process that finds no build of its call compiles into its own folder).
COMPILE_BY = None
REUSED: list[str] = []  # calls answered from KERNEL_ENV_BUILT_DIR, built by an earlier process


def loaded_digest() -> str:
    """A short hash of the module files load_inline loaded in this process: which build a verdict came
    from, for diagnosis (two evaluations of one source must show the same)."""
    import hashlib
    h = hashlib.sha256()
    for path in LOADED:
        try:
            h.update(Path(path).read_bytes())
        except OSError:
            h.update(b"?")
    return h.hexdigest()[:16] if LOADED else ""


BUILT_MANIFEST = "kernel_env_built.json"  # in a build folder: call key -> the module that call built
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # an extension's name, a module file's name


def _call_key(a: dict) -> str | None:
    """Everything that decides what a load_inline call builds: its arguments and the build settings
    of the environment. None when the arguments are not plain data."""
    import hashlib
    import json
    env = {k: os.environ.get(k, "") for k in ("TORCH_CUDA_ARCH_LIST", "KERNEL_ENV_FAST_BUILD", "KERNEL_ENV_CUDA_PRELUDE",
                                              "KERNEL_ENV_PCH_DIR", "CXX", "CC")}
    try:
        text = json.dumps({"args": {k: v for k, v in a.items() if k != "verbose"}, "env": env}, sort_keys=True)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _default_build_dir(a: dict, root: str | None) -> Path | None:
    if a.get("build_directory") or not root or not isinstance(a.get("name"), str):
        return None
    return Path(root) / a["name"]


def _record_built(a: dict, key: str | None, module) -> None:
    """Note in the build folder which module this call built, for the run process (_load_built)."""
    import json
    folder = _default_build_dir(a, os.environ.get("TORCH_EXTENSIONS_DIR"))
    path = getattr(module, "__file__", None)
    if key is None or folder is None or not path:
        return
    try:
        manifest = folder / BUILT_MANIFEST
        entries = json.loads(manifest.read_text()) if manifest.exists() else {}
        entries[key] = {"module": module.__name__, "file": os.path.basename(path)}
        tmp = folder / f".{BUILT_MANIFEST}.{os.getpid()}"
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, manifest)
    except (OSError, ValueError, AttributeError):
        pass


def _published_dir(a: dict, root: str | None) -> Path | None:
    """Where the judge publishes a call's build: <root>/<name>, whatever build_directory the call names."""
    name = a.get("name")
    if not root or not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        return None
    return Path(root) / name


def compile_only(a: dict, run_ninja=None) -> dict:
    """In a compile process (trusted code only; its sources are the candidate's): build one recorded
    load_inline call the way load_inline would (the fast path, falling back to torch's own), into
    TORCH_EXTENSIONS_DIR/<name>, and record it in that folder's manifest under the call's key; never
    import what was built (its static initializers are the candidate's code). Returns the manifest
    entry; raises what load_inline would raise on a compile error.

    `run_ninja(build_directory, verbose, error_prefix)` runs each ninja build torch's load would run
    (default: torch's own, here): the runner's asks the judge, which runs it in a sandbox of its own."""
    import types
    from torch.utils import cpp_extension as ce
    key = _call_key(a)
    if key is None or not isinstance(a.get("name"), str) or not PLAIN_NAME.fullmatch(a["name"]):
        raise ValueError("load_inline's name must be a plain name and its arguments plain data")
    b = {k: v for k, v in a.items() if k != "build_directory"}  # built where the judge publishes from
    if b.get("use_pch"):  # torch would run a compiler on the call's flags itself, outside ninja: same module without
        b["use_pch"] = False
    # torch numbers a name's builds within a process (name_v1, ...): each call here is a process's first
    ce.JIT_EXTENSION_VERSIONER.entries.clear()

    def built_not_imported(module_name, path, is_python_module):
        file = os.path.join(path, f"{module_name}{ce.LIB_EXT}")
        if not os.path.isfile(file):
            raise RuntimeError(f"the build of {module_name} left no {os.path.basename(file)}")
        return types.SimpleNamespace(__name__=module_name, __file__=file)

    run_ninja = run_ninja or ce._run_ninja_build

    def ninja_sharing_the_binding(build_directory, verbose, error_prefix):
        build_dir = Path(build_directory)
        as_written = binding_objects.before_ninja(build_dir, b)
        try:
            return run_ninja(build_directory, verbose, error_prefix)
        except Exception as e:
            if as_written is None or not _LINK_FAILED.search(str(e)):
                raise
            binding_objects.undo(build_dir, as_written)  # the shared object did not link: compiled here
            return run_ninja(build_directory, verbose, error_prefix)

    install()
    # torch's own two, back once this call is built: the next call in this process starts from them
    torch_import, torch_ninja = ce._import_module_from_library, ce._run_ninja_build
    ce._import_module_from_library, ce._run_ninja_build = built_not_imported, ninja_sharing_the_binding
    try:
        module = _fast_or_torch(b, lambda: _orig_load_inline(**b))
    finally:
        ce._import_module_from_library, ce._run_ninja_build = torch_import, torch_ninja
    _record_built(b, key, module)
    entry = {"key": key, "module": module.__name__, "file": os.path.basename(module.__file__)}
    if binding_objects.LAST:  # the main.o of the build that succeeded: shared, or one the judge may share
        entry["binding_object"] = dict(binding_objects.LAST)
    return entry


def _manifest_entry(folder: Path | None, key: str | None) -> tuple[str, str] | None:
    """(module name, module file) of the call `key` in a build folder's manifest, when its module file
    is a plain file name there that exists; None otherwise."""
    import json
    if key is None or folder is None:
        return None
    try:
        entry = json.loads((folder / BUILT_MANIFEST).read_text()).get(key)
        module_name, file = entry["module"], entry["file"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not (isinstance(file, str) and os.path.basename(file) == file and (folder / file).is_file()):
        return None
    return module_name, file


def published_entry(a: dict, root: str | None) -> dict | None:
    """The manifest entry of this call's build in the published build folder `root`, when one is
    there (its module file present); None otherwise. Read, never loaded: a compile process asks this
    before building a call that an earlier build may have made already."""
    key = _call_key(a)
    found = _manifest_entry(_published_dir(a, root), key)
    return None if found is None else {"key": key, "module": found[0], "file": found[1]}


def _load_built(a: dict, key: str | None):
    """The module the judge published for this very call, imported from the build folder
    (KERNEL_ENV_BUILT_DIR, which a candidate process may only read) without torch's build step; None
    when there is none."""
    folder = _published_dir(a, os.environ.get("KERNEL_ENV_BUILT_DIR"))
    found = _manifest_entry(folder, key)
    if found is None:
        return None
    module_name, file = found
    if not a.get("is_python_module", True):  # a library of torch ops, as torch's load_inline loads it
        import torch
        torch.ops.load_library(str(folder / file))
        return str(folder / file)
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location(module_name, str(folder / file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a failure here is the submission's import error, as from torch
    sys.modules.setdefault(module_name, module)
    return module


def _fast_or_torch(a: dict, torch_load_inline):
    """The module built the fast way, else by torch's own load_inline (a compile error that torch's
    path would give too is raised at once)."""
    if os.environ.get("KERNEL_ENV_FAST_BUILD", "1") != "0":
        try:
            fast = _fast(a)
        except _Final as e:
            raise e.error from None
        except Exception:
            fast = None
        if fast is not None:
            return fast
    return torch_load_inline()


class _Final(Exception):
    """A build error that torch's own load_inline would give too: no second attempt."""
    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def _as_list(x) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def _fast(a: dict):
    """The module built the fast way, or None when this call is not one the fast path handles."""
    from torch.utils import cpp_extension as ce
    if (a.get("sycl_sources") or a.get("no_implicit_headers") or not a.get("is_python_module", True)
            or a.get("use_pch")):
        return None
    cuda = _as_list(a.get("cuda_sources"))
    build_dir = Path(a.get("build_directory") or ce._get_build_directory(a["name"], False))
    pch_dir = os.environ.get("KERNEL_ENV_PCH_DIR", "")
    pch = bool(pch_dir) and (Path(pch_dir) / PCH_HEADER).is_file()
    light = bool(cuda) and not (build_dir / LIGHT_FAILED).exists()
    if not (pch or light):
        return None
    prelude = os.environ.get("KERNEL_ENV_CUDA_PRELUDE", "shim")
    if light and prelude == "shim" and not (build_dir / SHIM_FAILED).exists():
        # main.cpp through the light binding header when its sources only declare functions
        binding = (pch and (Path(pch_dir) / f"{BINDING_HEADER}.gch").is_dir() and declarations_only(a["cpp_sources"])
                   and not (build_dir / BINDING_FAILED).exists())
        for light_binding in ((True, False) if binding else (False,)):
            try:
                return _build(a, build_dir, pch_dir if pch else "", "shim", light_binding)
            except Exception as e:
                if light_binding and _MAIN_FAILED.search(str(e)) and not _CU_FAILED.search(str(e)):
                    _mark(build_dir / BINDING_FAILED)  # the full header next, and straight away next time
                    continue
                # anything else (the shim lacks what this kernel uses, or this torch breaks the bridge):
                # the core prelude next, and straight away next time
                _mark(build_dir / SHIM_FAILED)
                break
    if prelude == "shim":
        prelude = "core"
    try:
        return _build(a, build_dir, pch_dir if pch else "", prelude if light else None)
    except Exception as e:
        msg = str(e)
        if "Error building extension" in msg and not (light and _CU_FAILED.search(msg)):
            # the submission's own C++ (main.cpp) fails to compile: torch's path would fail the same way
            raise _Final(e) from None
        if light:  # most likely the prelude lacks something this kernel uses: torch's full build next time
            _mark(build_dir / LIGHT_FAILED)
        raise


def _mark(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass


def declarations_only(cpp_sources) -> bool:
    """Whether load_inline's C++ sources only declare functions (defined in the .cu), so that main.cpp
    needs no more of torch than the light binding header: no braces, once comments, strings and
    preprocessor lines are left out."""
    text = _COMMENTS.sub(" ", "\n".join(_as_list(cpp_sources)))
    return "{" not in "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _build(a: dict, build_dir: Path, pch_dir: str, prelude: str | None, light_binding: bool = False):
    """torch's load() on the sources load_inline would write, with main.cpp through the precompiled
    header (when `pch_dir`; the light binding header when `light_binding`, the submission's includes of
    torch's umbrella headers commented out) and the .cu under `prelude` (None: torch's own headers)."""
    # main.cpp exactly as load_inline writes it, but torch/extension.h comes through the PCH
    cpp = _as_list(a["cpp_sources"])
    if light_binding:
        lines = [f'#include "{BINDING_HEADER}"'] + [_HEAVY_INCLUDE.sub(r"// (light binding) \g<0>", c) for c in cpp]
    else:
        lines = [f'#include "{PCH_HEADER}"' if pch_dir else "#include <torch/extension.h>"] + cpp
    if prelude == "shim":  # what the shim's .cu calls, answered with torch's own types
        lines.append(f'#include "{SHIM_BRIDGE}"')
    functions = a.get("functions")
    if functions is not None:
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, list):
            functions = {f: f for f in functions}
        if not isinstance(functions, dict):
            return None
        wrap = a.get("with_pytorch_error_handling", True)
        lines.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        lines += [f'm.def("{f}", torch::wrap_pybind_function({f}), "{d}");' if wrap else f'm.def("{f}", {f}, "{d}");'
                  for f, d in functions.items()]
        lines.append("}")
    sources = [_write(build_dir / "main.cpp", "\n".join(lines))]
    cuda = _as_list(a.get("cuda_sources"))
    if cuda:
        if prelude:
            body = light_cuda_source(cuda, prelude)
        else:
            body = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"] + cuda
        sources.append(_write(build_dir / "cuda.cu", "\n".join(body)))
    includes = _as_list(a.get("extra_include_paths")) + [str(INCLUDE_DIR)] + ([pch_dir] if pch_dir else [])
    return _orig_load(a["name"], sources, extra_cflags=a.get("extra_cflags"),
                      extra_cuda_cflags=a.get("extra_cuda_cflags"), extra_ldflags=a.get("extra_ldflags"),
                      extra_include_paths=includes, build_directory=str(build_dir), verbose=False,
                      with_cuda=a.get("with_cuda"), is_python_module=True,
                      keep_intermediates=a.get("keep_intermediates", True))


def light_cuda_source(cuda_sources: list[str], prelude: str, leave_out: bool = True) -> list[str]:
    """The .cu of the light path: the prelude first (in place of load_inline's torch/types.h), and the
    submission's own includes of torch's umbrella headers commented out (line numbers kept); under
    the shim, also those of what the shim declares itself (CUDAContext.h, CUDAGuard.h, CUDAStream.h,
    CUDAException.h, Dispatch.h, ...), and without its half-precision types or its accessors when the
    sources name neither (shim_leaves_out; `leave_out` False: the whole shim, for a side by side)."""
    if prelude not in ("core", "aten", "shim"):
        raise ValueError(f"unknown prelude {prelude!r}")
    pattern = _SHIM_INCLUDE if prelude == "shim" else _HEAVY_INCLUDE
    head = [f'#include "cuda_prelude_{prelude}.h"']
    if prelude == "shim" and leave_out and (left_out := shim_leaves_out(cuda_sources)):
        head = [f"#define {m}" for m in left_out] + head + ["#line 2"]  # the sources' lines numbered as without
    return head + [pattern.sub(r"// (light prelude) \g<0>", s) for s in cuda_sources]


# What the shim prelude's optional parts are named by: a .cu whose text (comments included, to err on
# the side of the whole prelude) matches neither leaves that part out. A miss only costs a build: the
# shim attempt fails to compile, and the core prelude builds it.
_SHIM_PARTS = {"KSHIM_NO_HALF": re.compile(r"half|bfloat|bf16|fp16|float16|reduced", re.I),
               "KSHIM_NO_ACCESSOR": re.compile(r"accessor|ptrtraits", re.I)}


def shim_leaves_out(cuda_sources: list[str]) -> list[str]:
    """The macros that leave parts of cuda_prelude_shim.h out for these sources: c10::Half and
    c10::BFloat16 (with cuda_fp16.h and cuda_bf16.h) unless the text names a half-precision type, a
    reduced floating type or fp16; the tensor accessors unless it names an accessor or PtrTraits."""
    text = "\n".join(cuda_sources)
    return [macro for macro, names in _SHIM_PARTS.items() if not names.search(text)]


def _write(path: Path, text: str) -> str:
    """Write only when the text changed: ninja rebuilds what is newer than its object."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return str(path)
