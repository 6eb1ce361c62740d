"""TRUSTED: the judge's idle candidate processes, and how a candidate process is started.

An idle process has torch imported (a run process its CUDA context made too) and waits for its
submission: it costs an evaluation no start-up, and 64 sessions never start 64 torch imports at
once. Three kinds: run processes per device (key ("run", gpu)), and without a GPU for all, build
processes (key BUILD: they import submissions) and compile processes (key COMPILE: they write the
builds of load_inline calls, call after call, and run neither candidate code nor compilers: each ninja
build runs in a sandbox of its own, `start_ninja`). Each lives in a folder of its own (where its
submission will be written) with its own build folder and Triton cache in it; the evaluation's
settings come with its plan (candidate/runner.py). A candidate process writes nothing but its own folder (and a /dev/shm
of its own: sandbox.wrap's private_ipc), so nothing it writes is loaded by another process, except what
the judge itself publishes (builds.publish_build: what compile processes built; and the Triton cache
of the runner's own warm-up kernel, taken before any candidate code ran: `_publish_warm`).
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import itertools
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path

from .. import protocol as P
from . import bytecode_cache
from .config import JudgeConfig
from .deadlines import process_tree
from .devices import DeviceSlots
from .environ import ProcessEnv
from .sandbox import PYTHON, Proc, remove_folder, wrap

log = logging.getLogger("kernel_env.judge")
BUILD = ("build", None)  # the pool key of idle build processes (not tied to a device)
COMPILE = ("compile", None)  # and of idle compile processes
NO_GPU = (P.BUILD, P.COMPILE)  # the modes of candidate processes without a GPU
RUNNER = [PYTHON, "-m", "kernel_env.candidate.runner"]
NINJA_STEP = str(Path(__file__).resolve().parent.parent / "candidate" / "ninja_step.py")
MAX_CALLS = 256  # load_inline calls one compile process serves before another takes its place
# a compiler's own address space (its program and libraries, a precompiled header it maps), to which
# each may add compile_memory_bytes
COMPILER_OWN_BYTES = 2 << 30


def max_file_bytes(cfg: JudgeConfig) -> int:
    """RLIMIT_FSIZE of a candidate: room for a build, not for filling the disk. Outputs never go to
    files on CUDA; on the CPU they do (mapped slot files, made by the reference worker)."""
    return 2 << 30


async def discard(p: Proc) -> None:
    """End a process the judge keeps between evaluations, and remove its folder."""
    if p.loop is asyncio.get_running_loop():
        if getattr(p, "warmed", None) is not None:
            p.warmed.cancel()
        await p.close()
    else:  # its pipes belong to an event loop that has ended: kill it directly
        p.kill()
    await asyncio.to_thread(remove_folder, p.workdir)


class CandidatePools:
    def __init__(self, cfg: JudgeConfig, devices: tuple, work_root: Path, build_staging: Path, env: ProcessEnv,
                 slots: DeviceSlots, isolation: str, hide: list, bytecode: "bytecode_cache.Warm | None"):
        self.cfg, self.work_root, self.build_staging, self.env = cfg, work_root, build_staging, env
        self.slots, self.isolation, self.hide, self.bytecode = slots, isolation, hide, bytecode
        self.idle: dict[tuple, list[Proc]] = {("run", g): [] for g in devices}
        self.idle[BUILD] = []
        self.idle[COMPILE] = []
        self._starting = {k: 0 for k in self.idle}
        self._lent = {k: 0 for k in self.idle}  # taken, and coming back (give_back): compile processes
        self._loop = None
        self._bg: set[asyncio.Task] = set()  # processes being started for the pool
        self.one_shot = False  # evaluate_sync: one evaluation per event loop, no pool kept between them
        self.triton_warm = triton_warm_dir(cfg.cache_dir)
        self.warm_steps_s: dict[int, collections.deque] = {}  # the last run processes' warm-up steps, s on the judge's clock
        self.started_on_demand: collections.Counter = collections.Counter()  # take() found none idle

    def idle_runners(self) -> int:
        return sum(len(v) for k, v in self.idle.items() if k[0] == "run")

    def fill(self, key: tuple) -> None:
        """Start candidate processes in the background until enough are idle or starting for `key`:
        ("run", gpu) keeps `idle_runners` run processes of the device (one when one-shot), BUILD and
        COMPILE keep `staged_builders` processes each (none when one-shot)."""
        self._adopt_loop()
        for _ in range(self._target(key) - len(self.idle[key]) - self._starting[key] - self._lent[key]):
            self._starting[key] += 1
            t = asyncio.ensure_future(self._add_idle(key))
            self._bg.add(t)
            t.add_done_callback(self._bg.discard)

    def _adopt_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # processes started under an event loop that has ended
            for idle in self.idle.values():
                while idle:
                    p = idle.pop()
                    p.kill()
                    remove_folder(p.workdir)
            self._starting = {k: 0 for k in self.idle}
            self._lent = {k: 0 for k in self.idle}
            self._loop = loop

    def _target(self, key: tuple) -> int:
        cpu = self.cfg.device == "cpu"  # there the measurement is the CPU's: idle processes would take from it
        if key in (BUILD, COMPILE):
            return 0 if self.one_shot else min(1, self.cfg.staged_builders) if cpu else self.cfg.staged_builders
        return 1 if self.one_shot or cpu else max(1, self.cfg.idle_runners)

    async def _add_idle(self, key: tuple) -> None:
        p = None
        try:
            p = await self.start_idle(key)
        except Exception as e:  # noqa: BLE001 (logged: the evaluation that needs one starts its own)
            log.error("could not start a %s process: %s", key[0], e)
        finally:
            self._starting[key] -= 1
            if p is not None:
                self.idle[key].append(p)

    async def take(self, key: tuple) -> Proc:
        """An idle process for `key` (the oldest: the furthest along in its start), else a new one; then
        the pool filled again (not before: a process started for the pool while this one starts too
        would be one more than it needs)."""
        self._adopt_loop()
        while self.idle[key]:
            p = self.idle[key].pop(0)
            if p.returncode is None:
                break
            await discard(p)
        else:
            self.started_on_demand[key] += 1
            p = await self.start_idle(key)
        if key == COMPILE:  # it serves call after call: it comes back (give_back), no other starts for it
            self._lent[key] += 1
        if not self.one_shot:
            self.fill(key)
        return p

    async def give_back(self, key: tuple, p: Proc, reusable: bool) -> None:
        """A compile process done with its call: idle again when it answered as it should (up to
        MAX_CALLS calls each), else ended (and another started for the pool). As many are kept as
        calls can be compiled at once (one per CPU build slot; one-shot too: stop() ends them), not
        only the `staged_builders` started ahead: under load every build slot compiles, and each process
        ended here would be a torch import for a later call."""
        self._lent[key] = max(0, self._lent[key] - 1)
        p.calls = getattr(p, "calls", 0) + 1
        keep = max(1, self._target(key), self.cfg.build_slots)
        if (reusable and p.returncode is None and p.loop is asyncio.get_running_loop() and p.calls < MAX_CALLS
                and len(self.idle[key]) < keep):
            self.idle[key].insert(0, p)  # warm: the next one taken
            return
        await discard(p)
        if not self.one_shot:
            self.fill(key)

    async def start_ninja(self, call_dir: Path, build_dir: str, jobs: int) -> Proc:
        """A ninja step (candidate/ninja_step.py) on `build_dir`, sandboxed like a compile process but in
        `call_dir`: the only folder it can write, the rest of the compile process's folder hidden. Each
        compiler it runs may map compile_memory_bytes besides COMPILER_OWN_BYTES (an #include of
        /dev/zero makes one read until the machine's memory runs out)."""
        cfg = self.cfg
        argv, env = await self.candidate_command(P.COMPILE, [PYTHON, "-I", "-S", NINJA_STEP, build_dir, str(jobs)],
                                                 call_dir, cfg.gpus[0], call_dir, call_dir, None)
        p = await Proc.start(argv, call_dir, env, cfg.output_cap_bytes, max_file_bytes=max_file_bytes(cfg),
                             mem_bytes=cfg.compile_memory_bytes + COMPILER_OWN_BYTES, untrusted=True,
                             nice=cfg.build_nice, idle_sched=cfg.build_sched_idle)
        p.loop, p.workdir = asyncio.get_running_loop(), call_dir
        return p

    async def start_idle(self, key: tuple) -> Proc:
        """A candidate process before its evaluation is known, in a folder of its own with its own build
        folder in it. A run or build process only reads the evaluation's build folder (fast_build's
        manifest); a compile process builds into its own, which the judge moves into the cache."""
        mode, gpu = key
        if mode in NO_GPU:
            self.build_staging.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=self.build_staging if mode in NO_GPU else self.work_root))
        try:
            (workdir / "torch_extensions").mkdir()
            # its own Triton cache, with a copy of the runner's warm-up kernel as the judge published it
            # (a copy: what the process then writes there changes nothing another one loads)
            if self.triton_warm.is_dir() and mode != P.COMPILE:  # a compile process runs no Triton
                shutil.copytree(self.triton_warm, workdir / "triton", symlinks=True)
            else:
                (workdir / "triton").mkdir()
            p = await self.start_candidate(mode, workdir, self.cfg.gpus[0] if gpu is None else gpu,
                                           workdir / "torch_extensions", workdir / "triton", None)
        except BaseException:
            remove_folder(workdir)
            raise
        p.loop, p.workdir = asyncio.get_running_loop(), workdir
        if mode == "run":
            p.warmed = asyncio.ensure_future(self._warm_up(p, gpu))
        return p

    async def _warm_up(self, p: Proc, gpu: int) -> dict:
        """A run process's start: torch imported (IMPORTED), then the CUDA context and the device code of
        the runner's own kernels, step by step (WARM_STEP), each step inside a warm window of its
        device (WARMED)."""
        msg = await p.next_message(self.cfg.reference_timeout_s)
        if msg.get("event") != P.IMPORTED:
            return msg
        p.imported = True
        # its processes, stopped if a timing on the device begins while a step is under way (devices.py)
        tree = await asyncio.to_thread(process_tree, p.proc.pid)
        for i in itertools.count():  # a step at a time, each in a warm window of its device
            async with self.slots.warm_window(gpu, tree):
                t = time.monotonic()
                if not await p.send(json.dumps({"cmd": P.WARM})):
                    return {"event": P.EOF}
                msg = await p.next_message(self.cfg.reference_timeout_s)
                self.warm_steps_s.setdefault(i, collections.deque(maxlen=200)).append(time.monotonic() - t)
            if msg.get("event") != P.WARM_STEP:
                break
        if msg.get("event") == P.WARMED:
            self._publish_warm(p.workdir / "triton")
        return msg

    def _publish_warm(self, folder: Path) -> None:
        """The Triton cache of a run process that has just warmed up, published for the next ones once: so
        far the process ran the runner's code only (its submission comes later), and it waits for its plan
        while this copies. A copy into a new folder, renamed into place: a process being seeded never sees
        half of it, and no candidate can write it afterwards (the cache is read-only to them)."""
        if self.triton_warm.exists():
            return
        try:
            if not any(folder.iterdir()):  # nothing compiled (the CPU: Triton interprets)
                return
            self.triton_warm.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.triton_warm.with_name(f".{self.triton_warm.name}.{secrets.token_hex(4)}")
            shutil.copytree(folder, tmp, symlinks=False, ignore=shutil.ignore_patterns("*.lock", "tmp.*"))
            try:
                os.rename(tmp, self.triton_warm)
            except OSError:  # another judge published it first
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as e:
            log.warning("could not publish the Triton warm-up cache: %s", e)

    async def start_candidate(self, mode: str, workdir: Path, gpu: int, ext_dir: Path, triton_dir: Path,
                              pch_dir: str | None) -> Proc:
        """A candidate process: "build" and "compile" without the GPU (its device files hidden), "run" with it."""
        cfg = self.cfg
        argv, env = await self.candidate_command(mode, [*RUNNER, mode, str(workdir)], workdir, gpu, ext_dir,
                                                 triton_dir, pch_dir)
        return await Proc.start(argv, workdir, env, cfg.output_cap_bytes, max_file_bytes=max_file_bytes(cfg),
                                mem_bytes=cfg.candidate_memory_bytes if cfg.device == "cpu" else None, untrusted=True,
                                nice=cfg.build_nice if mode in NO_GPU else 0,
                                idle_sched=cfg.build_sched_idle and mode in NO_GPU)

    async def candidate_command(self, mode: str, argv: list, workdir: Path, gpu: int, ext_dir: Path, triton_dir: Path,
                                pch_dir: str | None) -> tuple[list, dict]:
        """argv wrapped in the sandbox, and the environment, of a candidate process of `mode`."""
        hide = self.hide if mode in NO_GPU else ()
        readonly = []
        if self.bytecode:  # torch's bytecode, compiled by the judge: read, never written
            await self.bytecode.ready()
            readonly.append(self.bytecode.dir)
        # writable: its own folder, and only those of the given folders that are not the judge's
        # caches (a shared one would let it plant what another process loads)
        writable = [d for d in (ext_dir, triton_dir) if not inside_folder(d, self.cfg.cache_dir) or inside_folder(d, workdir)]
        argv = wrap(self.isolation, argv, workdir, writable, hide=hide, readonly=readonly)
        env = self.env(workdir, gpu, trusted=False, ext_dir=ext_dir, pch_dir=pch_dir, triton_dir=triton_dir)
        if self.bytecode:
            env[bytecode_cache.ENV] = str(self.bytecode.dir)
        if mode in NO_GPU:
            env["CUDA_VISIBLE_DEVICES"] = ""
        return argv, env

    async def settle(self) -> None:
        """Let the processes being started finish starting (a spawn: milliseconds), so none is left unowned."""
        await asyncio.gather(*self._bg, return_exceptions=True)

    async def stop(self) -> None:
        """End the idle processes and remove the build processes' staging folder."""
        for idle in self.idle.values():
            while idle:
                await discard(idle.pop())
        try:
            self.build_staging.rmdir()
        except OSError:
            pass


def inside_folder(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(folder))
        return True
    except ValueError:
        return False


def triton_warm_dir(cache_dir: Path) -> Path:
    """Where the judge publishes the Triton cache of the runner's warm-up kernels (its first launch,
    the input maps): one folder per Triton install and kernels' source (another of either compiles,
    and publishes, again)."""
    from importlib import metadata
    try:
        version = metadata.version("triton")
    except metadata.PackageNotFoundError:
        version = ""
    root = Path(__file__).resolve().parent.parent
    text = b""
    for source in (root / "candidate" / "triton_warm.py", root / "fused_maps.py"):
        try:
            text += source.read_bytes() + b"\0"
        except OSError:
            pass
    key = hashlib.sha256(version.encode() + b"\0" + text).hexdigest()[:16]
    return Path(cache_dir) / "triton-warm" / key
