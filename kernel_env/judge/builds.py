"""TRUSTED: the build stage, and the build cache.

A build process (no GPU: its device files hidden; a CPU build slot; a lower priority) imports the
submission. Each load_inline call with no build in the cache comes to the judge as a request: a
compile process (no GPU, and no candidate code: it writes the call's build as load_inline would and
never imports the result; each ninja build of it runs in a sandbox of its own, `_ninja`, so the
compile process serves call after call) builds it in a folder of the call's own, the judge publishes
that into the source's build folder in the cache (`publish_build`), and the build process, like the
run process later, imports it from there. So what any process loads from the cache was made by compilers alone, from
the sources the call named; nothing a submission's code (its Python, or its C++ static initializers)
did can change it. A source whose import only makes load_inline calls with literal arguments
(inert_import.load_inline_calls) needs no build process: the judge sends those calls to compile
processes itself, and the run process is the first to import the source. A source this judge has
built before (with the same precompiled header) skips the stage, a call whose build is published
already is not compiled again, and a load_inline call its compilers rejected before is answered with
the same errors without compiling it again (a policy's samples often repeat a broken kernel word for word, and a
CUDA compile error costs every fallback of the fast path: half a minute to a minute on a GPU box).

Only the judge writes the cache: candidate processes see it read-only (sandbox.wrap). At publish it
records each module's SHA-256 beside the folder (`.published/`, not inside: the folder was made by a
candidate); a process loads a module only while its file still has that hash (published_builds.py:
checked here before a build is skipped, and by the runner before the submission is imported).
"""
from __future__ import annotations

import ast
import asyncio
import functools
import hashlib
import importlib.util
import json
import logging
import os
import re
import secrets
import time
from collections import OrderedDict, deque
from pathlib import Path

from .. import protocol as P
from ..candidate import binding_objects
from ..candidate.fast_build import BUILT_MANIFEST, PLAIN_NAME
from ..published_builds import hashes_file, publish_binding_object, read_hashes, sha256, intact as published_intact
from . import deadlines
from . import feedback as fb
from .config import JudgeConfig
from .devices import queued
from .intake import parse_source
from .pools import BUILD, COMPILE, CandidatePools, discard, inside_folder
from .reference import JudgeInternalError
from .sandbox import Proc, describe_exit, folder_usage, remove_folder
from .verdict import ErrorKind, Stage, Verdict

log = logging.getLogger("kernel_env.judge")
BUILT_MEMORY = 4096  # sources remembered as built
MAX_COMPILES = 16    # load_inline calls one build may ask the judge to compile
FAILED_MEMORY = 512  # load_inline calls remembered as rejected by the compilers
CALL_FILE = "call.json"  # in a compile process's folder: the call it builds
# flags that would make a compiler run programs, plugins or specs of the candidate's choosing (which
# could write the module after the compile), or read flags from a file (@file). nvcc's --run executes
# what it built through a shell, with --run-args appended to the command line: `--run --run-args
# ";cmd"` runs any command, even beside -c
_TOOLCHAIN_FLAG = re.compile(r"^(-B|--?specs|--?sysroot|-isysroot|-wrapper|-fuse-ld|--compiler-bindir|-ccbin|@"
                             r"|--?run(-args)?$)|plugin")
_NINJA_SYNTAX = re.compile(r"[\x00-\x1f\x7f$]")
# a compile failure that the same sources and flags give every time: the compilers' own diagnostics,
# and nothing that says the machine (memory, disk, a signal) rather than the code made it fail
_BUILD_FAILED = "Error building extension"
_ERROR_WORD = re.compile(r"\berror\b|error:")
_MACHINE_TROUBLE = re.compile(r"Killed|signal|No space left|Cannot allocate|out of memory|Resource temporarily"
                              r"|Too many open files|Interrupted|timed out", re.I)


class Builds:
    """The build stage: a CPU build slot, an idle build process, the build published to the cache.
    Remembers the sources whose build succeeded here: the same text again goes straight to its run
    process, which imports the cached build (a build folder removed since is built there again).
    The first build of a kernel (a build folder, `build_key`) goes alone: submissions with the same
    kernel wait for it, then build in parallel, loading what it published (fast_build's manifest), so a
    kernel that a step's samples share is compiled once. A build publishes before its slot goes."""

    def __init__(self, cfg: JudgeConfig, pools: CandidatePools, stats: dict):
        self.cfg, self.pools, self.stats = cfg, pools, stats
        self.slots = asyncio.Semaphore(cfg.build_slots)
        self._built: OrderedDict[str, bool] = OrderedDict()
        # build folders (kernels) whose first build is under way: the others with that kernel wait for it
        self._first_builds: dict[str, asyncio.Event] = {}
        # load_inline calls (with their build settings) the compilers rejected: the answer they got
        self._rejected: OrderedDict[str, str] = OrderedDict()
        # publishes hash every module they move (a build may be GBs: an .incbin of a large library):
        # in a thread, so that every other session's messages go on; one at a time, as merges into
        # one folder must be
        self._publishing = asyncio.Lock()
        self.binding_objects = cfg.cache_dir / "binding-objects"
        # the last compile processes' CPU seconds as they reported them (a claim, for diagnosis only)
        self.compile_cpu: deque = deque(maxlen=500)

    @staticmethod
    def _key(source: str, pch_dir: str | None) -> str:
        # with another precompiled header main.cpp differs: built again
        return hashlib.sha256(f"{pch_dir}\x00{source}".encode()).hexdigest()

    def forget(self, source: str, pch_dir: str | None) -> None:
        """The run process could not import the build: build it again next time."""
        self._built.pop(self._key(source, pch_dir), None)

    async def build(self, v: Verdict, source: str, ext_dir: Path, build_env: dict, pch_dir: str | None,
                    calls: list | None = None) -> Verdict | None:
        """Build `source` into `ext_dir` unless it was built here before. `calls`: what its import runs
        of its own (inert_import.load_inline_calls): [] nothing (no build at all), load_inline calls
        with literal arguments (compiled here, no build process), None anything else (a build process
        imports it). Timings and details go into `v`; returns `v` as the verdict when the build
        failed, else None."""
        if calls == []:
            v.timings["build_wait_s"] = v.timings["build_s"] = 0.0
            v.details["build_skipped"] = "inert import"
            return None
        if calls:
            bound = [bind_load_inline(args, kwargs) for args, kwargs in calls]
            # an argument torch's load_inline would refuse: its own message, from a build process
            calls = bound if all(c is not None for c in bound) and len(bound) <= MAX_COMPILES else None
        key = self._key(source, pch_dir)
        if await self._cached(v, key, ext_dir):
            v.timings["build_wait_s"] = 0.0
            return None
        builder = None
        folder, first = str(ext_dir), None
        try:
            t_w = time.monotonic()
            if folder in self._first_builds:
                await self._first_builds[folder].wait()
                if await self._cached(v, key, ext_dir):  # the same text, built by the evaluation this one waited for
                    v.timings["build_wait_s"] = round(time.monotonic() - t_w, 3)
                    return None
            elif not _published(ext_dir):
                first = self._first_builds[folder] = asyncio.Event()
            async with queued(self.stats, "waiting_build", self.slots):
                t_b = time.monotonic()
                v.timings["build_wait_s"] = round(t_b - t_w, 3)  # for the kernel's first build and a CPU build slot
                if calls:
                    msg = await self._compile_calls(calls, build_env, ext_dir)
                    if msg.get("event") == P.BUILT:
                        self._remember(key)
                        v.details["build_by"] = "judge"  # no build process: the calls were read from the source
                else:
                    # an idle build process (torch imported): the submission, then its build settings
                    # (earlier builds of it in KERNEL_ENV_BUILT_DIR are loaded, not built again)
                    builder = await self.pools.take(BUILD)
                    (builder.workdir / "submission.py").write_text(source)
                    builder.watch_folder(builder.workdir, self.cfg.folder_quota_bytes, self.cfg.folder_quota_files)
                    if not await builder.send(json.dumps({"cmd": P.BUILD, "env": build_env})):
                        raise JudgeInternalError("the build process ended before it got the submission: "
                                                 + builder.output()[-1500:])
                    # import_timeout_s outside its compilers (Python spinning at import), build_timeout_s in all
                    dl = deadlines.Deadline(builder, self.cfg,
                                            untrusted_roots=deadlines.untrusted_roots(self.cfg, self.pools.work_root))
                    deadlines.import_step(dl, self.cfg)
                    msg, compiles = await dl.next_message(), 0
                    while msg.get("event") == P.COMPILE and compiles < MAX_COMPILES:
                        # one of its load_inline calls: built by a compile process, published before the
                        # build process goes on (and before the slot goes: the next build loads it)
                        compiles += 1
                        t_c = time.monotonic()
                        answer = await self._compile(msg.get("call"), build_env, ext_dir, dl.wall_left())
                        dl.excuse(time.monotonic() - t_c)
                        if answer.get("event") == P.TIMEOUT:
                            msg = answer
                            await builder.close()
                            break
                        if not await builder.send(json.dumps(answer)):
                            msg = {"event": P.EOF}
                            break
                        msg = await dl.next_message()
                    if msg.get("event") == P.COMPILE:
                        msg = {"event": P.ERROR, "kind": P.BUILD_ERROR,
                               "message": f"The submission made more than {MAX_COMPILES} load_inline calls."}
                        await builder.close()
                    if msg.get("event") == P.TIMEOUT and "why" not in msg:  # its compilers go before the build slot does
                        msg = {**msg, "why": dl.describe(), "deadline": dl.details()}
                        await builder.close()
                    if msg.get("event") == P.BUILT:
                        # remembered before the waiters on this kernel's first build go on
                        await builder.close()
                        if not msg.get("import_failed"):
                            self._remember(key)
                v.timings["build_s"] = round(time.monotonic() - t_b, 3)
            self.stats["builds"] += 1
            self.stats["build_wait_s_total"] += v.timings["build_wait_s"]
            self.stats["build_s_total"] += v.timings["build_s"]
            if msg.get("event") != P.BUILT:
                return await self._failed(v, builder, msg)
            if isinstance(msg.get("reused"), int) and msg["reused"] > 0:  # a claim, for diagnosis
                v.details["build_reused"] = msg["reused"]
            return None
        finally:
            if first is not None:  # done, built or not: the others with this kernel go on, in parallel
                self._first_builds.pop(folder, None)
                first.set()
            # a build killed midway leaves its lock in the process's own folder, removed here with it
            if builder is not None:
                await asyncio.shield(discard(builder))

    def _remember(self, key: str) -> None:
        self._built[key] = True
        while len(self._built) > BUILT_MEMORY:
            self._built.popitem(last=False)

    async def _compile_calls(self, calls: list, build_env: dict, ext_dir: Path) -> dict:
        """The load_inline calls of a source, read from it, each compiled by a compile process and
        published, in order, within build_timeout_s. The message a build process would have ended with:
        BUILT, or the first call's compile error or time-out."""
        t0, published = time.monotonic(), 0
        for call in calls:
            wall_s = self.cfg.build_timeout_s - (time.monotonic() - t0)
            answer = await self._compile(call, build_env, ext_dir, wall_s)
            if answer.get("event") == P.TIMEOUT:
                return answer
            if not answer.get("ok"):
                return {"event": P.ERROR, "kind": P.BUILD_ERROR, "message": str(answer.get("message") or "")}
            published += answer.get("published") is True
        return {"event": P.BUILT, "reused": published}

    async def _compile(self, call, build_env: dict, ext_dir: Path, wall_s: float) -> dict:
        """Build one load_inline call of a submission with a compile process and publish it into
        `ext_dir`. Returns the answer for the build process ({"cmd": COMPILED, "ok": ...}), or
        {"event": TIMEOUT, ...} when the compile ran past `wall_s`.

        The compile process (trusted code, torch imported) writes the call's build folder in a folder
        of the call's own inside its own, and asks for each ninja build it needs; each runs in a
        sandbox of its own (`_ninja`) that can write that folder and nothing else. The compile process
        then serves the next call: no compiler ever ran beside it."""
        why = _unsafe_call(call)
        if why:
            return {"cmd": P.COMPILED, "ok": False, "message": why}
        rejected_key = hashlib.sha256(json.dumps([call, build_env], sort_keys=True, default=str).encode()).hexdigest()
        if rejected_key in self._rejected:
            self._rejected.move_to_end(rejected_key)
            self.stats["compiles_rejected_again"] += 1
            return {"cmd": P.COMPILED, "ok": False, "message": self._rejected[rejected_key]}
        compiler = await self.pools.take(COMPILE)
        call_dir = compiler.workdir / f"call-{secrets.token_hex(6)}"
        staged = call_dir / "torch_extensions"
        served = False  # it answered this call as it should: it may take the next
        try:
            staged.mkdir(parents=True)
            (call_dir / CALL_FILE).write_text(json.dumps(call))  # what it compiles, for whoever looks
            env = build_env
            if self.cfg.share_binding_objects:
                env = {**build_env, binding_objects.ENV: str(self.binding_objects)}
            # what the call's ninja steps write there, all of them together, is held to the folder quota
            base = await asyncio.to_thread(folder_usage, call_dir, self.cfg.folder_quota_files)
            compiler.clear_output()
            if not await compiler.send(json.dumps({"cmd": P.COMPILE, "env": env, "call": call, "folder": str(staged)})):
                raise JudgeInternalError("the compile process ended before it got its call: " + compiler.output()[-1500:])
            t0 = time.monotonic()
            deadline, compilers_cpu = t0 + max(wall_s, 0.0), 0.0
            while True:
                msg = await compiler.next_message(max(deadline - time.monotonic(), 0.0))
                if msg.get("event") != P.NINJA:
                    break
                ran = await self._ninja(msg, call_dir, base, deadline)
                if ran.get("event") == P.TIMEOUT:
                    msg = ran
                    break
                if ran.get("stopped"):  # nothing of it is published, nor remembered as the code's own error
                    return {"cmd": P.COMPILED, "ok": False, "message": "the compile of this load_inline call was "
                            f"stopped: {ran['stopped']}"}
                compilers_cpu += ran["cpu_s"]
                if not await compiler.send(json.dumps({"cmd": P.NINJA, "rc": ran["rc"], "output": ran["output"]})):
                    msg = {"event": P.EOF}
                    break
            if msg.get("event") == P.TIMEOUT:
                return {"event": P.TIMEOUT, "why": f"compiling a load_inline call took more than {wall_s:.0f} s",
                        "deadline": {"step": "compile", "wall_s": round(wall_s, 1),
                                     "compile_s": round(time.monotonic() - t0, 1)}}
            if msg.get("event") in (P.COMPILED, P.ERROR):
                served = True
                said = msg.get("cpu_s")
                self._note_cpu({**said, "compilers": compilers_cpu} if isinstance(said, dict) else None)
            if msg.get("event") == P.COMPILED and msg.get("published") is True:
                # the call's build is in the folder already (a claim: a run process that does not find
                # it there builds it in its own folder, slower, never wrong)
                return {"cmd": P.COMPILED, "ok": True, "published": True}
            if msg.get("event") == P.COMPILED:
                await self._share_binding(msg.get("binding_object"), staged / call["name"])
                await self.publish(staged, ext_dir)
                return {"cmd": P.COMPILED, "ok": True}
            if msg.get("event") == P.ERROR:
                message = fb.bounded(f"{msg.get('message', '')}\n{compiler.output()[-4000:]}")
                failed_at = message.find(_BUILD_FAILED)
                if (failed_at >= 0 and _ERROR_WORD.search(message, failed_at + len(_BUILD_FAILED))
                        and not _MACHINE_TROUBLE.search(message)):
                    self._rejected[rejected_key] = message
                    while len(self._rejected) > FAILED_MEMORY:
                        self._rejected.popitem(last=False)
                return {"cmd": P.COMPILED, "ok": False, "message": message}
            await compiler.close()
            return {"cmd": P.COMPILED, "ok": False, "message": "the compile process of this load_inline call "
                    f"{describe_exit(compiler.returncode)}:\n{compiler.output()[-4000:]}"}
        finally:
            await asyncio.shield(self.pools.give_back(COMPILE, compiler, served))
            await asyncio.shield(asyncio.to_thread(remove_folder, call_dir))

    async def _ninja(self, msg: dict, call_dir: Path, base: tuple, deadline: float) -> dict:
        """One ninja build a compile process asked for, run in a sandbox of its own (ninja_step.py) that
        writes the call's folder and nothing else, with each compiler's address space capped
        (compile_memory_bytes) and the folder watched (the quota beyond `base`, its size when the call
        began). {"rc", "output", "cpu_s"}; {"stopped": why} over the quota; {"event": TIMEOUT} past
        `deadline`."""
        build_dir, jobs = msg.get("dir"), msg.get("jobs", 0)
        if (not isinstance(build_dir, str) or not inside_folder(Path(build_dir), call_dir) or not isinstance(jobs, int)
                or isinstance(jobs, bool) or not 0 <= jobs <= 4096):
            raise JudgeInternalError(f"a compile process asked for ninja outside its call's folder: {msg!r:.300}")
        step = await self.pools.start_ninja(call_dir, build_dir, jobs)
        try:
            # compilers on the candidate's sources (an assembler's .incbin of any large file it can read
            # makes an object file of that size), and the build moves into the cache
            step.watch_folder(call_dir, self.cfg.folder_quota_bytes, self.cfg.folder_quota_files, base)
            rc = await step.wait(max(deadline - time.monotonic(), 0.0))
            if rc is None:
                return {"event": P.TIMEOUT}
            said = await step.next_message(1.0)
        finally:
            await step.close()
        if await step.over_quota_now():
            return {"stopped": step.over_quota}
        cpu = said.get("cpu_s") if said.get("event") == P.NINJA_RAN else None
        ok_cpu = isinstance(cpu, (int, float)) and not isinstance(cpu, bool) and 0 <= cpu < 1e6
        return {"rc": rc, "output": step.output(), "cpu_s": float(cpu) if ok_cpu else 0.0}

    def _note_cpu(self, said) -> None:
        keys = ("start", "python", "compilers")
        if (isinstance(said, dict) and all(isinstance(said.get(k), (int, float)) and not isinstance(said.get(k), bool)
                                           and 0 <= said[k] < 1e6 for k in keys)):
            self.compile_cpu.append({k: float(said[k]) for k in keys})

    async def _share_binding(self, said, built: Path) -> None:
        """What the compile process did with its binding object (a claim): count a reuse, publish a new one."""
        if not self.cfg.share_binding_objects or not isinstance(said, dict) or not isinstance(said.get("key"), str):
            return
        if said.get("reused") is True:
            self.stats["binding_objects_reused"] += 1
        elif await asyncio.to_thread(publish_binding_object, self.binding_objects, said["key"],
                                     built / binding_objects.OBJECT):
            self.stats["binding_objects_published"] += 1

    async def publish(self, staged: Path, ext_dir: Path) -> None:
        """publish_build, off the event loop. A cancelled evaluation still lets the move finish before
        it goes on (and removes the folder the move reads from)."""
        async with self._publishing:
            moving = asyncio.ensure_future(asyncio.to_thread(publish_build, staged, ext_dir))
            try:
                await asyncio.shield(moving)
            except asyncio.CancelledError:
                await moving
                raise

    async def _cached(self, v: Verdict, key: str, ext_dir: Path) -> bool:
        if key not in self._built:
            return False
        # the modules' hashes, read in a thread (a module may be GBs); changed since published: built again
        if not await asyncio.to_thread(intact, ext_dir):
            self._built.pop(key, None)
            return False
        if key not in self._built:  # forgotten meanwhile
            return False
        self._built.move_to_end(key)
        v.timings["build_s"] = 0.0
        v.details["build_cached"] = True
        return True

    async def _failed(self, v: Verdict, cand: Proc | None, msg: dict) -> Verdict:
        """The verdict of a failed build; `cand` the build process (None: the judge compiled the calls
        itself, which ends in an error or a time-out only)."""
        ev = msg.get("event")
        limit = self.cfg.feedback_max_chars
        if ev == P.TIMEOUT:
            v.error_kind = ErrorKind.BUILD_TIMEOUT.value
            v.feedback = fb.clip(f"Build timed out: {msg.get('why')}.", limit)
            v.details["deadline"] = msg.get("deadline")
        elif ev == P.ERROR and msg.get("kind") == P.NO_MODEL_NEW:
            v.stage, v.error_kind = Stage.FORMAT.value, ErrorKind.NO_MODEL_NEW.value
            v.feedback = "The module imported, but it defines no class ModelNew."
        elif ev == P.ERROR:
            if cand is not None:
                await cand.wait(5)
            v.error_kind = ErrorKind.BUILD_ERROR.value
            v.feedback = fb.build_failure(str(msg.get("message", "")), cand.output() if cand else "", limit)
        else:  # the process died or sent garbage while importing
            rc = await cand.wait(5 if ev == P.EOF else 0.1)
            if rc is None:
                cand.kill()
                rc = await cand.wait(5)
            v.error_kind = ErrorKind.CRASH.value
            if cand.over_quota:
                v.feedback = fb.clip(f"Stopped while importing the submission: {cand.over_quota}.", limit)
                v.details["limit"] = "folder_quota"
            else:
                v.feedback = fb.runtime_failure(f"The process {describe_exit(rc)} while importing the submission.",
                                                "", cand.output(), limit)
        return v


@functools.lru_cache(maxsize=1)
def load_inline_parameters() -> tuple[tuple, dict] | None:
    """load_inline's parameters in order, and their defaults, read from torch's source (the judge
    never imports torch); None where that source is not the plain function this expects."""
    try:
        spec = importlib.util.find_spec("torch")  # finds the package, imports nothing
        path = Path(spec.submodule_search_locations[0]) / "utils" / "cpp_extension.py"
        tree = ast.parse(path.read_text())
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "load_inline")
        a = fn.args
        if fn.decorator_list or a.vararg or a.kwarg or a.posonlyargs or a.kwonlyargs:
            return None
        names = tuple(x.arg for x in a.args)
        defaults = dict(zip(names[len(names) - len(a.defaults):], (ast.literal_eval(d) for d in a.defaults)))
        return names, defaults
    except (AttributeError, TypeError, OSError, SyntaxError, ValueError, StopIteration):
        return None


def bind_load_inline(args: list, kwargs: dict) -> dict | None:
    """A load_inline call as a build process reports it (every parameter, defaults filled in, without
    `verbose`), from its arguments; None where torch would refuse them (or its signature is unknown)."""
    params = load_inline_parameters()
    if params is None:
        return None
    names, defaults = params
    if len(args) > len(names):
        return None
    a = dict(zip(names, args))
    for k, val in kwargs.items():
        if k in a or k not in names:
            return None
        a[k] = val
    for n in names:
        if n not in a:
            if n not in defaults:
                return None
            a[n] = defaults[n]
    return {k: val for k, val in a.items() if k != "verbose"}


def _unsafe_call(call) -> str | None:
    """Why a load_inline call (as a build process sent it) is not compiled, or None."""
    if not isinstance(call, dict):
        return "load_inline's arguments could not be read"
    if not isinstance(call.get("name"), str) or not PLAIN_NAME.fullmatch(call["name"]):
        return "load_inline's name must be a plain name (letters, digits, '_', '.', '-')"
    # every extra_* argument (cflags, cuda and sycl cflags, ldflags, include paths): each reaches a
    # compiler's command line through build.ninja
    for arg in sorted(k for k in call if isinstance(k, str) and k.startswith("extra_")):
        flags = call.get(arg) or []
        for flag in [flags] if isinstance(flags, str) else flags if isinstance(flags, list) else [None]:
            if not isinstance(flag, str):
                return f"load_inline's {arg} must be strings"
            # torch writes flags into build.ninja as they are: a newline there starts a rule and a
            # build statement of the flag's own, whose command ninja then runs; `$` is ninja's escape
            if _NINJA_SYNTAX.search(flag):
                return (f"the flag {flag[:80]!r} in {arg} is not allowed here (a control character or '$' "
                        "would be read as the build file's own syntax)")
            if any(_TOOLCHAIN_FLAG.search(part) for part in re.split(r"[,= ]", flag)):
                return f"the flag {flag[:80]!r} in {arg} is not allowed here (it changes the toolchain or reads flags from a file)"
    return None


def build_key(source: str, tree: ast.Module | None = None) -> str:
    """The build folder of a submission: a hash of its long string constants (the kernel sources and
    flags). Submissions that differ only in Python share a build; different kernels never share a
    folder, so they never wait on each other's build lock, even when they reuse an extension name.
    `tree`: the source already parsed (intake.screen_parsed)."""
    try:
        if tree is None:
            tree = parse_source(source)
    except (SyntaxError, RecursionError, MemoryError):
        return hashlib.sha256(source.encode()).hexdigest()[:20]
    # docstrings and other bare string statements are not kernel sources: leave them out
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    consts = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and len(n.value) >= 32 and id(n) not in bare})
    return hashlib.sha256("\x00".join(consts).encode()).hexdigest()[:20]


def _manifest(folder: Path) -> dict:
    """fast_build's manifest of a build folder (load_inline call -> the module it built), the entries
    whose module file is a plain file of that folder. Written in a candidate's sandbox: read with care."""
    path = folder / BUILT_MANIFEST
    try:
        if path.is_symlink() or path.stat().st_size > (1 << 20):
            return {}
        entries = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return {}
    good = {}
    for key, e in (entries.items() if isinstance(entries, dict) else ()):
        if not isinstance(e, dict):
            continue
        file = e.get("file")
        if (isinstance(key, str) and len(key) <= 128 and isinstance(e.get("module"), str) and isinstance(file, str)
                and PLAIN_NAME.fullmatch(file) and (folder / file).is_file() and not (folder / file).is_symlink()):
            good[key] = {"module": e["module"], "file": file}
    return good


def publish_build(staged: Path, ext_dir: Path) -> None:
    """Move what a compile process built (the extension folders in its own folder's torch_extensions)
    into the source's build folder in the cache, where run processes read it (fast_build's manifest).
    An extension folder not there yet moves as it is. Into one that is, only the modules of calls it
    lacks move, each under a name of its own, and the manifest is replaced by the union: files already
    there never change, so a run process reading the folder meanwhile finds what its manifest named.
    Either way the manifest left in the cache holds only the entries checked here."""
    try:
        built = sorted(staged.iterdir())
    except OSError:
        return
    ext_dir.mkdir(parents=True, exist_ok=True)
    for src in built:
        new = {} if src.is_symlink() or not src.is_dir() or not PLAIN_NAME.fullmatch(src.name) else _manifest(src)
        if not new:
            continue
        dst = ext_dir / src.name
        try:
            if not dst.exists() and not dst.is_symlink():
                hashes = {e["file"]: sha256(src / e["file"]) for e in new.values()}
                _write_hashes(ext_dir, src.name, hashes)  # before the manifest that names the files
                os.rename(src, dst)  # the first build of this extension here: the folder as it is
                have, merged = None, new
            elif dst.is_symlink() or not dst.is_dir():
                continue
            else:
                have = _manifest(dst)
                hashes = read_hashes(ext_dir, src.name)
                # an entry whose file no longer has the hash published for it counts as missing
                have = {k: e for k, e in have.items() if hashes.get(e["file"]) == sha256(dst / e["file"])}
                merged = dict(have)
                for key, e in new.items():
                    if key not in have:  # another call's module, under a name of its own
                        file = f"{hashlib.sha256(key.encode()).hexdigest()[:12]}-{secrets.token_hex(3)}-{e['file']}"
                        hashes[file] = sha256(src / e["file"])
                        _write_hashes(ext_dir, src.name, hashes)
                        os.replace(src / e["file"], dst / file)
                        merged[key] = {**e, "file": file}
            if merged != have:  # the manifest in the cache is the judge's: only entries it checked
                tmp = dst / f".{BUILT_MANIFEST}.{secrets.token_hex(4)}"
                tmp.write_text(json.dumps(merged))
                os.replace(tmp, dst / BUILT_MANIFEST)
        except OSError as e:  # another file system, another judge at the same folder: built again next time
            log.warning("could not move the build %s into the cache: %s", src.name, e)


def _write_hashes(ext_dir: Path, name: str, hashes: dict) -> None:
    path = hashes_file(ext_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    tmp.write_text(json.dumps(hashes))
    os.replace(tmp, path)


def _published(ext_dir: Path) -> bool:
    """Something was built into `ext_dir` before (a first build of its kernel has been done)."""
    try:
        return any(d.is_dir() for d in ext_dir.iterdir())
    except OSError:
        return False


def intact(ext_dir: Path) -> bool:
    """published_builds.intact, as the judge asks it: a build folder that is gone is built again."""
    return published_intact(ext_dir, if_absent=False)
