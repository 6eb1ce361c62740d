"""One main.o for builds whose binding file is the same (candidate/binding_objects.py).

Real builds on the CPU: a C++ extension compiled by `fast_build.compile_only` in a fresh process, as a
compile process does, through the session's precompiled header; the judge's side
(`published_builds.publish_binding_object`) called as the judge calls it. A CUDA submission's binding
file is the same kind of file (declarations, the light binding header): the GPU runs build those.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_env.candidate import binding_objects
from kernel_env.published_builds import binding_object, publish_binding_object, sha256

from conftest import ROOT
from test_fast_build import OK_SRC, pch  # noqa: F401 (pch: the session's precompiled header, a fixture)

SRC = "#include <torch/extension.h>\n#include <vector>\n" + OK_SRC

CHILD = textwrap.dedent(r'''
    import importlib.util, json, os, sys
    from kernel_env.candidate import fast_build
    call = json.loads(sys.argv[1])
    entry = fast_build.compile_only(call)
    folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], call["name"])
    spec = importlib.util.spec_from_file_location(entry["module"], os.path.join(folder, entry["file"]))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    import torch
    entry["result"] = module.scale_add(torch.arange(3, dtype=torch.float32), 2.0, 1.0).tolist()
    print("ENTRY " + json.dumps(entry))
''')


def main_cpp(cpp: str, ours: str = '#include "kernel_env_torch_extension.h"') -> str:
    return "\n".join([ours, cpp, "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
                      'm.def("f", torch::wrap_pybind_function(f), "f");', "}"])


@pytest.mark.parametrize("cpp", [
    "#include <vector>\n#include <ATen/cuda/CUDAContext.h>\ntorch::Tensor f(torch::Tensor x);",
    "// (light binding) #include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x, int64_t n);",
    "#define CHECK(x) TORCH_CHECK(x.is_contiguous(), \\\n  \"contiguous\")\n#pragma once\ntorch::Tensor f(torch::Tensor x);",
])
def test_a_binding_file_of_plain_includes_and_declarations_is_shared(cpp):
    assert binding_objects.shareable(main_cpp(cpp), {"extra_cflags": ["-O3", "-DN=4", "-std=c++17", "-fopenmp", "-Wall"]})


@pytest.mark.parametrize("cpp", [
    '#include "cuda.cu"',                                  # the build folder's own files differ per kernel
    "#include <../cuda.cu>",
    "#include </etc/hostname>",
    "#include MACRO_NAMING_A_FILE",
    '/* a comment */ #include "x.h"',                     # still a directive
    '#\\\ninclude "x.h"',                                  # spliced into one
    '%:include "x.h"',                                     # a digraph of '#'
    '??=include "x.h"',
    '#include_next <vector>',
    'asm(".incbin \\"/etc/hostname\\"");',                 # the assembler reads a file
    "static const char* when = __DATE__ __TIME__;",
    "#if __has_include(<x.h>)\n#endif",
    '#pragma GCC dependency "x.h"',
    '_Pragma("GCC dependency \\"x.h\\"")',
    "#embed </etc/hostname>",
    "torch::Tensor f(torch::Tensor x);\r\n",
])
def test_a_binding_file_whose_object_may_depend_on_more_than_its_text_is_compiled(cpp):
    assert not binding_objects.shareable(main_cpp(cpp), {})


@pytest.mark.parametrize("call", [
    {"extra_include_paths": ["/tmp/headers"]},
    {"extra_cflags": ["-include", "/tmp/x.h"]},
    {"extra_cflags": ["-I/tmp"]},
    {"extra_cflags": ["-fprofile-use=/tmp/profile"]},      # profile data read from a file
    {"extra_cflags": ["-fprofile-use"]},                    # ... from the build folder
    {"extra_cflags": ["-fauto-profile"]},
    {"extra_cflags": ["-Wp,-include,/tmp/x.h"]},            # flags passed on to the preprocessor
    {"extra_cflags": ['-DX="a b"']},
    {"extra_cflags": "-march=native"},                      # the machine's own CPU
])
def test_a_call_with_include_folders_or_file_reading_flags_is_compiled(call):
    assert not binding_objects.shareable(main_cpp("torch::Tensor f(torch::Tensor x);"), call)


def test_a_function_docstring_cannot_smuggle_a_directive_into_the_binding_file():
    text = main_cpp("torch::Tensor f(torch::Tensor x);") + '\nm.def("g", g, "x");\n#include "cuda.cu"\n//");'
    assert not binding_objects.shareable(text, {})


@pytest.mark.slow
def test_a_binding_file_compiled_once_is_linked_from_the_published_object(pch, tmp_path):
    objects = tmp_path / "objects"
    call = {"name": "binding_probe", "cpp_sources": [SRC + f"// {os.urandom(6).hex()}\n"],
            "functions": ["scale_add"], "extra_cflags": ["-O2"]}

    def compile_in_a_fresh_process(folder: str) -> tuple[dict, Path]:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / folder), PYTHONPATH=str(ROOT),
                   KERNEL_ENV_PCH_DIR=str(pch), **{binding_objects.ENV: str(objects)})
        p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(call)], env=env, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0 and "ENTRY " in p.stdout, p.stderr[-2000:]
        entry = json.loads(p.stdout.split("ENTRY ", 1)[1])
        assert entry["result"] == [1.0, 3.0, 5.0], entry
        return entry, tmp_path / folder / call["name"]

    first, built = compile_in_a_fresh_process("first")
    key = first["binding_object"]["key"]
    assert first["binding_object"] == {"key": key, "reused": False}
    assert publish_binding_object(objects, key, built / "main.o")
    assert not publish_binding_object(objects, key, built / "main.o")  # once
    assert binding_object(objects, key) == objects / f"{key}.o"

    second, built = compile_in_a_fresh_process("second")
    assert second["binding_object"] == {"key": key, "reused": True}
    assert "main.o: compile" not in (built / "build.ninja").read_text()  # ninja only linked it
    assert sha256(built / "main.o") == sha256(objects / f"{key}.o")

    # a published object whose file changed since is not handed out (the compile process asks this)
    obj = objects / f"{key}.o"
    data = bytearray(obj.read_bytes())
    data[-1] ^= 0xFF
    obj.write_bytes(bytes(data))
    assert binding_object(objects, key) is None

    # one with its recorded hash that does not link (not an object at all): compiled here after all
    obj.write_bytes(b"not an object file")
    (objects / f"{key}.sha256").write_text(sha256(obj))
    third, built = compile_in_a_fresh_process("third")
    assert third["binding_object"] == {"key": key, "reused": False}
    assert "main.o: compile" in (built / "build.ninja").read_text()
