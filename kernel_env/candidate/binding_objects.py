"""Compile side (a compile process: trusted code, the candidate's sources): one `main.o` for every
build whose binding file is the same.

Under the fast path a CUDA submission's `main.cpp` is the light binding header, its C++ declarations
and the pybind11 module; most of its ~4 CPU-seconds go to code that the header makes every file
emit (pybind11's runtime, std containers), whatever the declarations. Samples of one task usually
declare the same functions under the same extension name, so their `main.cpp` is the same text: the
object is compiled once and shared.

Before ninja runs, the compile process reads the compile command of `main.o` from `build.ninja` and
hashes it with `main.cpp`, the compiler, the precompiled header and the judge's include folder (the
key). If the judge has published an object under that key (`published_builds.binding_object`, its
SHA-256 checked), it goes into the build folder and its edge leaves `build.ninja`, so ninja only
links it. Otherwise ninja compiles it, and the compile process reports the key; the judge publishes
the object (`published_builds.publish_binding_object`). An object that does not link is compiled
again.

Only a binding file whose output is a function of that text is shared (`shareable`): every include
a plain `<path>` resolved in the compiler's own folders (the call names no include folder of its
own, and its flags come from a short list that reads no file), and no `asm`, `__DATE__`/`__TIME__`,
`__has_include`, `#embed`, pragma that reads a file, digraph or trigraph. The rest is compiled as
before.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
from pathlib import Path

ENV = "KERNEL_ENV_BINDING_OBJECTS"  # the judge's folder of published binding objects (read-only here)
OBJECT = "main.o"

# what a compile process did with its last binding object: {"key": ..., "reused": bool}, or {} when
# the binding file was not one to share
LAST: dict = {}

_PLAIN_INCLUDE = re.compile(r"[ \t]*#[ \t]*include[ \t]*<(?!/)(?![^>]*\.\.)[A-Za-z0-9_./+-]+>[ \t]*")
_LIGHT_PREFIX = "// (light binding) "
_UNSHAREABLE = re.compile(r"asm|__DATE__|__TIME__|__TIMESTAMP__|__COUNTER__|__has_include|__has_embed|_Pragma"
                          r"|#[ \t]*(pragma[ \t]+GCC|embed)|%:|\?\?=|\r")
# the call's own C++ flags that read no file and name no include folder (profile feedback reads one)
_PLAIN_FLAG = re.compile(r"-(O[0-3sgz]?|D[A-Za-z_]\w*(=[\w.+-]*)?|U[A-Za-z_]\w*|std=[\w+]+|f(?!(no-)?(auto-)?profile)(no-)?[a-z0-9-]+"
                         r"|f(visibility|fp-contract|abi-version)=\w+|W(?![apl],)[\w=+-]*|w|g[0-3]?|pthread|m(avx|sse|fma|bmi)[\w.-]*)")
_EDGE = re.compile(r"^build main\.o: compile (\S+)$", re.M)


def shareable(main_cpp: str, call: dict) -> bool:
    """Whether the object compiled from this binding file depends on its text, the command and the
    toolchain alone."""
    if call.get("extra_include_paths") or not all(
            isinstance(f, str) and _PLAIN_FLAG.fullmatch(f) for f in _as_list(call.get("extra_cflags"))):
        return False
    text = re.sub(r"\\[ \t\f\v]*\n", "", main_cpp)  # lines spliced, as the compiler does first
    if _UNSHAREABLE.search(text):
        return False
    ours = {'#include "kernel_env_torch_binding.h"', '#include "kernel_env_torch_extension.h"',
            '#include "cuda_prelude_shim_bridge.inc"'}
    for line in text.split("\n"):
        if "include" in line and line not in ours and not _PLAIN_INCLUDE.fullmatch(line.removeprefix(_LIGHT_PREFIX)):
            return False
    return True


def _as_list(x) -> list:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x) if isinstance(x, (list, tuple)) else [None]


def ninja_vars(text: str) -> dict:
    """The top-level `name = value` lines of a build.ninja (cxx, cflags, ...)."""
    return dict(line.split(" = ", 1) for line in text.splitlines() if " = " in line and not line.startswith(" "))


def _file_identity(path: str) -> list:
    st = os.stat(path)
    return [os.path.realpath(path), st.st_size, st.st_mtime_ns]


def key(build_dir: Path, ninja_text: str, main_cpp: str) -> str | None:
    """The key of the build folder's main.o: its compile command (the build folder's path left out),
    main.cpp's text (as `shareable` read it), the compiler, and every file of the include folders the command names that are not the
    system's or torch's (the judge's include folder, the precompiled header's). None when it cannot
    be made."""
    from .fast_build import INCLUDE_DIR
    m = _EDGE.search(ninja_text)
    v = ninja_vars(ninja_text)
    if not m or "cxx" not in v or Path(m.group(1)) != build_dir / "main.cpp":
        return None
    cxx = shutil.which(v["cxx"])
    if cxx is None:
        return None
    flags = shlex.split(v.get("cflags", "")) + ["--post--"] + shlex.split(v.get("post_cflags", ""))
    folders = [f[2:] for f in flags if f.startswith("-I") and len(f) > 2]
    system = [b for a, b in zip(flags, flags[1:]) if a == "-isystem"]  # torch's and Python's headers
    trusted = {os.path.realpath(INCLUDE_DIR)}
    h = hashlib.sha256()
    try:
        import torch
        h.update(json.dumps([flags, _file_identity(cxx), torch.__version__, [_file_identity(s) for s in system]]).encode())
        for folder in folders:
            for entry in sorted(Path(folder).rglob("*")):
                if entry.is_file():
                    # the judge's folders: its include files by content; the precompiled header's (GBs) by stat
                    ident = (hashlib.sha256(entry.read_bytes()).hexdigest()
                             if os.path.realpath(folder) in trusted else _file_identity(str(entry)))
                    h.update(json.dumps([str(entry), ident]).encode())
        h.update(main_cpp.encode())
    except (OSError, ValueError):
        return None
    return h.hexdigest()


def before_ninja(build_dir: Path, call: dict) -> str | None:
    """Called with the build folder once torch has written build.ninja: the published object put in place
    and its compile edge taken out (returns build.ninja's text as it was), or the key noted for the
    judge. None when nothing changed."""
    LAST.clear()
    folder = os.environ.get(ENV, "")
    ninja = build_dir / "build.ninja"
    try:
        text = ninja.read_text()
        main_cpp = (build_dir / "main.cpp").read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if not folder or not shareable(main_cpp, call):
        return None
    k = key(build_dir, text, main_cpp)
    if k is None:
        return None
    LAST.update(key=k, reused=False)
    from ..published_builds import binding_object
    published = binding_object(Path(folder), k)
    if published is None:
        return None
    try:
        shutil.copyfile(published, build_dir / OBJECT)
        ninja.write_text(_EDGE.sub("", text, count=1))
    except OSError:
        return None
    LAST["reused"] = True
    return text


def undo(build_dir: Path, ninja_text: str) -> None:
    """The published object did not link: main.o is compiled here after all."""
    (build_dir / "build.ninja").write_text(ninja_text)
    (build_dir / OBJECT).unlink(missing_ok=True)
    LAST["reused"] = False
