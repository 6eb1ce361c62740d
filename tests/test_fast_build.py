"""The fast load_inline (candidate/fast_build.py) and the judge's precompiled header (judge/prebuild.py).

Real builds: the precompiled torch/extension.h is made once per test session (the judges of the
other tests share it through KERNEL_ENV_CACHE), then a C++ extension is built through the fast path
in a fresh process, as a candidate would. CUDA's light prelude needs nvcc: only its source rewrite is
checked here; the H200 runs (docs/performance.md) build real .cu files through it.
"""
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_env.candidate.fast_build import LIGHT_FAILED, PCH_HEADER, light_cuda_source
from kernel_env.judge import prebuild

from conftest import ROOT

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(r'''
    import sys
    from kernel_env.candidate import fast_build
    fast_build.install()
    import torch
    from torch.utils.cpp_extension import load_inline
    src = sys.argv[1]
    try:
        m = load_inline(name="fast_build_probe", cpp_sources=src, functions={"scale_add": "x*a+b"},
                        extra_cflags=["-O2"], verbose=False)
    except Exception as e:
        print("BUILD_ERROR", str(e)[-400:].replace("\n", " "))
        sys.exit(0)
    x = torch.arange(6, dtype=torch.float32)
    print("RESULT", m.scale_add(x, 2.0, 1.0).tolist(), m.scale_add.__doc__.strip().splitlines()[-1])
''')

OK_SRC = """
torch::Tensor scale_add(torch::Tensor x, double a, double b) {
    auto y = torch::empty_like(x);
    auto xp = x.data_ptr<float>(); auto yp = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] * a + b;
    return y;
}
"""


@pytest.fixture(scope="module")
def pch(cache_dir) -> Path:
    d = prebuild.build(cache_dir, with_cuda=False, variants=("O2",))
    assert d is not None and (d / "READY").exists() and (d / f"{PCH_HEADER}.gch" / "O2.gch").stat().st_size > 1e6
    # a later judge finds it without importing torch
    assert prebuild.known(cache_dir, False, ("O2",)) == d
    assert prebuild.known(cache_dir, False, ("O0", "O2")) is None
    return d


def build(tmp_path: Path, src: str, pch: Path | None) -> tuple[str, Path]:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("KERNEL_ENV_PCH_DIR", None)
    if pch:
        env["KERNEL_ENV_PCH_DIR"] = str(pch)
    p = subprocess.run([sys.executable, "-c", CHILD, src], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, tmp_path / "fast_build_probe"


def test_cpp_extension_through_the_precompiled_header(pch, tmp_path):
    out, build_dir = build(tmp_path, OK_SRC, pch)
    assert "RESULT [1.0, 3.0, 5.0, 7.0, 9.0, 11.0] x*a+b" in out, out
    main = (build_dir / "main.cpp").read_text()
    assert main.startswith(f'#include "{PCH_HEADER}"')            # the fast path built it ...
    assert 'm.def("scale_add", torch::wrap_pybind_function(scale_add), "x*a+b");' in main  # ... with load_inline's binding
    # gcc takes the precompiled header with the very flags torch compiled main.o with: `-H` marks a
    # used one with "!" (an unusable one with "x")
    ninja = prebuild.ninja_vars((build_dir / "build.ninja").read_text())
    p = subprocess.run([ninja.get("cxx", "c++"), *shlex.split(ninja["cflags"]), "-H", "-fsyntax-only", "main.cpp"],
                       cwd=build_dir, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-1000:]
    assert f"! {pch}/{PCH_HEADER}.gch/O2.gch" in p.stderr, p.stderr[:1000]


def test_compile_error_is_reported_once_without_a_second_build(pch, tmp_path):
    out, build_dir = build(tmp_path, OK_SRC.replace("return y;", "return y"), pch)
    assert "BUILD_ERROR" in out and "expected" in out, out
    # torch's own load_inline did not run again on the same broken source
    assert (build_dir / "main.cpp").read_text().startswith(f'#include "{PCH_HEADER}"')
    assert not (build_dir / LIGHT_FAILED).exists()


def test_without_a_precompiled_header_torch_builds_it(tmp_path):
    out, build_dir = build(tmp_path, OK_SRC, None)   # nothing for the fast path to do on C++ alone
    assert "RESULT [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]" in out, out
    assert (build_dir / "main.cpp").read_text().startswith("#include <torch/extension.h>")


def test_light_cuda_source_replaces_torch_umbrella_headers():
    src = ("#include <torch/extension.h>\n  # include \"torch/types.h\"\n#include <ATen/cuda/CUDAContext.h>\n"
           "__global__ void k() {}\n")
    out = light_cuda_source([src], "core")
    assert out[0] == '#include "cuda_prelude_core.h"'
    body = out[1].splitlines()
    assert body[0].startswith("// (light prelude) #include <torch/extension.h>")
    assert body[1].startswith("// (light prelude)")
    assert body[2] == "#include <ATen/cuda/CUDAContext.h>"      # other headers stay
    assert len(body) == len(src.splitlines())                       # line numbers of errors unchanged
    with pytest.raises(ValueError):
        light_cuda_source([src], "../../etc")


def test_the_run_process_imports_what_the_build_process_recorded(tmp_path, monkeypatch):
    """fast_build's manifest: the build process notes which module each load_inline call made; a run
    process whose call is the same (arguments and build settings) imports it from the build folder,
    which it may only read, without torch's build step; any other call builds as usual."""
    from types import SimpleNamespace
    from kernel_env.candidate import fast_build as fb
    call = {"name": "ext", "cpp_sources": ["int f();"], "cuda_sources": [], "functions": ["f"], "verbose": False}
    folder = tmp_path / "built" / "ext"
    folder.mkdir(parents=True)
    (folder / "ext_mod.py").write_text("X = 42\n")  # stands in for the .so: any module file imports the same way
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "built"))
    key = fb._call_key(call)
    fb._record_built(call, key, SimpleNamespace(__name__="ext_mod", __file__=str(folder / "ext_mod.py")))
    assert key in (folder / fb.BUILT_MANIFEST).read_text()

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "own"))  # the run process's own folder
    monkeypatch.setenv("KERNEL_ENV_BUILT_DIR", str(tmp_path / "built"))
    assert fb._load_built(call, key).X == 42
    other = {**call, "cpp_sources": ["int g();"]}
    assert fb._load_built(other, fb._call_key(other)) is None            # another call: its own build
    assert fb._call_key({**call, "verbose": True}) == key                # verbosity builds nothing else
    monkeypatch.setenv("KERNEL_ENV_PCH_DIR", "/elsewhere")               # other build settings: another key
    assert fb._call_key(call) != key
    (folder / fb.BUILT_MANIFEST).write_text('{"%s": {"module": "m", "file": "../m.py"}}' % key)
    assert fb._load_built(call, key) is None                             # only files of that folder
