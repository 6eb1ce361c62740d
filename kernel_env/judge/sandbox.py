"""TRUSTED: starting, watching and reaping the processes the judge runs.

Each process gets its own session (process group) so that a timeout kills it with all its children,
a scrubbed environment (no tokens or secrets), its own folder as HOME and TMPDIR, resource limits, and
two channels: stdout+stderr (kept up to a cap, whatever it prints) and a protocol pipe for JSON lines.

Candidate processes are also wrapped, where the OS allows it (`isolation()` picks the best that works):
  bwrap    bubblewrap: read-only view of the file system except its own folder (the judge's caches
           included: it reads them, never writes them), other evaluations' folders hidden (an empty tmpfs over the folder holding them), no
           network, own PID namespace (nothing it forks outlives it; it cannot signal the judge), no
           capabilities, killed with its parent.
  unshare  util-linux unshare (root): the same view made with mounts in its own mount namespace (every
           mount read-only but its own folder and /proc; the folder holding the evaluation folders
           covered), no network, own PID namespace, and (with setpriv) no
           capabilities: root in name only, it cannot mount, load modules or reset the GPU.
  none     process group, limits and scrubbed environment only.

`hide` makes files unreadable or empty to the process: the GPU's device nodes for the build process,
so candidate code never touches the GPU outside its device slot (bwrap and unshare; under `none`
only CUDA_VISIBLE_DEVICES="" stands in the way, which native code can undo).

`private_ipc` (both sandboxes): a `/dev/shm` of its own (an empty tmpfs, gone with the process) and an
IPC namespace of its own (System V segments, semaphores and message queues go with it), so nothing it
leaves in shared memory outlives it. A CUDA run process too: torch's CUDA IPC, through which the
reference worker hands out the output slots, keeps each shared block's count of users in a file of the
host's /dev/shm, which the candidate never gets the name of (harness.make_slots: the worker releases
the candidate's use itself once it has exited).
Nor can a root candidate leave files in /dev: bwrap gives it a /dev of its own (a tmpfs with the usual
nodes and the GPU's bound in), unshare makes the host's read-only (a read-only mount refuses new
files, not writes to a device node).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import shutil
import signal
import stat
import sys
from pathlib import Path

import kernel_env

PACKAGE_PARENT = str(Path(kernel_env.__file__).resolve().parent.parent)
# Variables a candidate may see. Everything else (tokens, cloud keys, the server's own settings) is dropped.
_PASS_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "CC", "CXX", "TORCH_CUDA_ARCH_LIST", "LD_LIBRARY_PATH",
             "NVIDIA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
             "PYTHONPATH")
MAX_PROTOCOL_LINE = 4 * 1024 * 1024
# protocol messages a process may have sent that the judge has not read yet; past them, its protocol
# pipe is not read (it blocks writing) until the judge reads. A process flooding the pipe with lines
# would otherwise hold the judge's event loop parsing them and its memory growing, until its deadline.
MAX_QUEUED_MESSAGES = 32


def child_env(workdir: Path, extra: dict) -> dict:
    env = {k: os.environ[k] for k in _PASS_ENV if k in os.environ}
    pp = env.get("PYTHONPATH", "")
    env.update({
        "HOME": str(workdir), "TMPDIR": str(workdir), "PYTHONPATH": PACKAGE_PARENT + (os.pathsep + pp if pp else ""),
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _limits(max_file_bytes: int | None, mem_bytes: int | None = None, nofile: int = 1024, untrusted: bool = False,
            nice: int = 0, idle_sched: bool = False):
    def apply():
        os.setsid()  # new session: one killpg reaches every child it forks
        if nice:
            os.nice(nice)
        if idle_sched:  # CPU time only when nothing else wants it (inherited by its compilers)
            try:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            except (AttributeError, OSError):
                pass
        if untrusted:  # no way back to a better priority or policy: RLIMIT_NICE 0 allows none
            resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        if max_file_bytes:
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
        if mem_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        if untrusted:  # if memory runs out, the kernel's OOM killer takes a candidate, not the server
            try:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write("1000")
            except OSError:
                pass
    return apply


_ISOLATION: dict[str, str] = {}
SETPRIV = shutil.which("setpriv")
# /proc's system files, read-only in the sandbox as container runtimes mask them (sysctls, sysrq: root
# without capabilities may still write some); the rest of /proc stays writable: a read-only /proc fails
# CUDA's cuInit (error 304, seen on the H200 box)
PROC_SYSTEM = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
# Run as root in a mount namespace of its own (unshare), before the real command drops its capabilities:
#   own:DIR  its own folder: the folder holding it is covered by an empty one (it sees no other
#            evaluation's folder), and it is bound back in through /proc/self/cwd (its path is covered)
#   rw:DIR   bound onto itself: a mount of its own, which stays writable below
#   ro:DIR   bound onto itself: read-only below even inside a writable folder
#   proc:P   a file or folder of the new /proc, made read-only now (the pass below leaves /proc alone)
#   devro:M  a mount of /dev (or /dev itself) made read-only now, its other flags kept (the pass below
#            leaves /dev alone)
#   shm:N    an empty tmpfs of its own, N bytes at most, over /dev/shm
#   FILE     becomes /dev/null (a device node the process must not reach)
# then every mount but /dev's and /proc's is made read-only, /sys included: root without capabilities
# still owns the files there and on disk. Per-mount flags are kept (a container may lock them).
_MASK_SH = r"""
keep=/dev
while [ "$1" != "--" ]; do
  case "$1" in
    ro:*) d="${1#ro:}"; mount --bind "$d" "$d" || exit 97;;
    rw:*) d="${1#rw:}"; mount --bind "$d" "$d" || exit 97; keep="$keep
$d";;
    own:*) d="${1#own:}"; { cd "$d" && mount -t tmpfs -o size=64k,mode=755 kernel_env "${d%/*}" && mkdir "$d" &&
           mount --no-canonicalize --bind /proc/self/cwd "$d" && cd "$d"; } || exit 97; keep="$keep
$d";;
    proc:*) d="${1#proc:}"; [ ! -e "$d" ] || { mount --bind "$d" "$d" &&
            mount -o remount,bind,ro,nosuid,nodev,noexec "$d" "$d"; } || exit 97;;
    devro:*) d="${1#devro:}"; o=$(cut -d" " -f5,6 /proc/self/mountinfo | while read -r mp op; do
             [ "$mp" != "$d" ] || echo "$op"; done | tail -n 1)
             mount -o "remount,bind,ro${o#r[ow]}" "$d" "$d" || exit 97;;
    shm:*) mount -t tmpfs -o "size=${1#shm:},mode=1777,nosuid,nodev" kernel_env_shm /dev/shm || exit 97;;
    *) mount --bind /dev/null "$1" || exit 97;;
  esac
  shift
done
shift
mounts=$(cut -d" " -f5,6 /proc/self/mountinfo)
while read -r mp opts; do
  case "$mp" in
    /dev|/dev/*|/proc|/proc/*) continue;;  # /proc: PROC_SYSTEM; /proc/*: the old /proc's, covered by the new
    *\\*) mp=$(printf "%b" "$(printf %s "$mp" | sed 's/\\/\\0/g')");;  # octal escapes: \040 is a space
  esac
  case "$keep
" in *"
$mp
"*) continue;; esac
  mount -o "remount,bind,ro${opts#r[ow]}" "$mp" "$mp" || exit 97
done <<EOF
$mounts
EOF
exec "$@"
"""


def gpu_device_nodes() -> list[str]:
    """The files through which a process reaches an NVIDIA GPU (/dev/nvidia*, /dev/nvidia-caps/*)."""
    found = []
    for p in sorted(Path("/dev").glob("nvidia*")) + sorted(Path("/dev/nvidia-caps").glob("*")):
        if p.exists() and not p.is_dir():
            found.append(str(p))
    return found


def _dev_mounts() -> list[str]:
    """/dev and the mounts below it that a process could create files in (not devpts, not /dev/shm:
    that one is either replaced by a tmpfs of its own or shared on purpose)."""
    try:
        with open("/proc/self/mountinfo") as f:
            mps = {line.split()[4] for line in f}
    except OSError:
        return []
    return sorted(m for m in mps if (m == "/dev" or m.startswith("/dev/")) and m not in ("/dev/pts", "/dev/shm")
                  and "\\" not in m)


SHM_BYTES = 1 << 30  # a private /dev/shm: room for a submission's own use, not for filling memory


def wrap(mode: str, argv: list, workdir: Path, writable: list, hide: list | tuple = (),
         readonly: list | tuple = (), private_ipc: bool = True) -> list:
    """argv run inside the chosen isolation. `writable`: folders the candidate may write besides its own.
    The folder holding all evaluation folders is replaced by an empty one, so a candidate sees only its
    own; everything else (the Python install, the project, /sys, /proc/sys) is visible read-only, /dev as it is.
    `hide`: files that cannot be opened (bwrap: a nodev /dev/null) or read as /dev/null (unshare) inside.
    `readonly`: folders the candidate reads but must not write, even inside a writable one.
    `private_ipc`: its own /dev/shm and IPC namespace (see the module's docstring).
    `none` enforces none of these."""
    if mode == "bwrap":
        # a /dev of its own (null, zero, random, tty, pts...: bwrap's --dev, a tmpfs gone with it) with
        # the GPU's device nodes bound in
        args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", str(workdir.parent)]
        for n in gpu_device_nodes():
            args += ["--dev-bind", n, n]
        for w in [workdir, *writable]:
            args += ["--bind", str(w), str(w)]
        for r in readonly:
            args += ["--ro-bind", str(r), str(r)]
        for p in PROC_SYSTEM:
            args += ["--ro-bind-try", p, p]
        for h in hide:
            args += ["--ro-bind", "/dev/null", str(h)]
        if private_ipc:
            args += ["--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--unshare-ipc"]
        else:
            args += ["--bind", "/dev/shm", "/dev/shm"]
        # the tmpfs over the evaluation folders and bwrap's /dev are file systems in memory, writable (up
        # to half the machine's memory each) and in no quota: read-only once every mount point is made
        args += ["--remount-ro", str(workdir.parent), "--remount-ro", "/dev"]
        # --cap-drop ALL: bwrap started by root keeps every capability otherwise (remount, undo `hide`)
        return args + ["--cap-drop", "ALL", "--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session",
                       "--chdir", str(workdir), "--", *argv]
    if mode == "unshare":
        inner = list(argv)
        if SETPRIV:  # drop every capability: no mount (so no undoing `hide`), no mknod, no module loading
            inner = [SETPRIV, "--bounding-set", "-all", "--inh-caps", "-all", "--no-new-privs", "--", *inner]
        real = os.path.realpath  # mountinfo names mounts by their real paths
        inner = ["sh", "-c", _MASK_SH, "sh", f"own:{real(workdir)}", *(f"rw:{real(d)}" for d in writable),
                 *(f"ro:{real(d)}" for d in readonly), *(f"proc:{p}" for p in PROC_SYSTEM), *map(str, hide),
                 *(f"devro:{m}" for m in _dev_mounts()), *([f"shm:{SHM_BYTES}"] if private_ipc else []),
                 "--", *inner]
        return ["unshare", "--net", "--pid", *(["--ipc"] if private_ipc else []), "--fork", "--kill-child",
                "--mount-proc", "--", *inner]
    return list(argv)


def isolation(requested: str = "auto") -> str:
    """The strongest isolation that works here (probed once: a sandboxed Python must start, find no
    network, see a hidden file as empty, write its own folder and nothing else). An explicitly requested
    mode that does not work is an error."""
    if requested == "none":
        return "none"
    if requested in _ISOLATION:
        return _ISOLATION[requested]
    import subprocess
    import tempfile
    # a new network namespace has nothing but its own (down) loopback; the hidden file reads as
    # /dev/null; the file system outside its own folder cannot be written
    probe = ("import os, socket, sys\nnet = [n for _, n in socket.if_nameindex()] == ['lo']\n"
             "try:\n    seen = open(sys.argv[1]).read()\nexcept PermissionError:\n    seen = ''\n"
             "try:\n    open(os.path.join(os.path.dirname(sys.argv[1]), 'planted'), 'w').close()\n    ro = False\n"
             "except OSError:\n    ro = True\n"
             "open('mine', 'w').close()\n"
             "raise SystemExit(0 if net and seen == '' and ro else 3)")
    chosen = "none"
    for mode in (["bwrap", "unshare"] if requested == "auto" else [requested]):
        if mode not in ("bwrap", "unshare"):
            raise ValueError(f"unknown sandbox {mode!r}: use auto, bwrap, unshare or none")
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as h:
            (Path(d) / "probe").mkdir()
            hidden = Path(h) / "hidden"
            hidden.write_text("visible")
            try:
                r = subprocess.run(wrap(mode, [PYTHON, "-c", probe, str(hidden)], Path(d) / "probe", [],
                                        hide=[hidden]), capture_output=True, timeout=60)
                ok = r.returncode == 0 and (Path(d) / "probe" / "mine").exists()
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        if ok:
            chosen = mode
            break
        if requested != "auto":
            raise RuntimeError(f"sandbox {mode!r} does not work on this machine")
    _ISOLATION[requested] = chosen
    return chosen


FOLDER_CHECK_S = 0.5  # how often a watched folder's size is read (judge/config.py: folder_quota_bytes)


def folder_usage(folder: Path, max_entries: int) -> tuple[int, int]:
    """(bytes on disk, entries) under `folder`, links not followed; the walk stops past `max_entries`
    (a folder of millions of empty files is over any limit, and costly to walk). Bytes are the blocks
    a file holds: a sparse file counts what it uses."""
    used, n, stack, again = 0, 0, [str(folder)], set()
    while stack and n <= max_entries:
        path = stack.pop()
        try:
            it = os.scandir(path)
        except OSError:
            continue
        here, files, folders = 0, 0, []
        try:
            with it:
                for e in it:
                    files += 1
                    if n + files > max_entries:
                        break
                    try:
                        if e.is_dir(follow_symlinks=False):
                            folders.append(e.path)
                        else:
                            here += e.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        pass
        except OSError:
            # the listing's own descriptor closed under it (EBADF: another thread closing a number it no
            # longer owns, as uvloop's pipes did before ProtocolPipe): the folder is read once more
            if path not in again:
                again.add(path)
                stack.append(path)
            continue
        used, n = used + here, n + files
        stack += folders
    return used, n


class ProtocolPipe:
    """The read end of a child's protocol pipe, fed into a StreamReader through the loop's add_reader;
    its descriptor is closed here, once. Not loop.connect_read_pipe: under uvloop (uvicorn's loop when
    installed) its transport and the file object it keeps both close the descriptor
    (MagicStack/uvloop#763), and the second close can hit a file another thread has opened under the
    same number since (a folder listing or removal of the judge's, which then fails with EBADF)."""

    def __init__(self, fd: int):
        self._fd: int | None = fd
        self.reader = asyncio.StreamReader(limit=MAX_PROTOCOL_LINE)
        self._loop = asyncio.get_running_loop()
        self._paused = False
        os.set_blocking(fd, False)
        self.reader.set_transport(self)  # the reader pauses us while its buffer is full (pause_reading)
        self._loop.add_reader(fd, self._ready)

    def _ready(self) -> None:
        try:
            data = os.read(self._fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.reader.feed_data(data)
        else:
            self.reader.feed_eof()
            self.close()

    def pause_reading(self) -> None:
        if self._fd is not None and not self._paused:
            self._paused = True
            self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if self._fd is not None and self._paused:
            self._paused = False
            self._loop.add_reader(self._fd, self._ready)

    def close(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if not self._paused:
            self._loop.remove_reader(fd)  # before the close: the loop must not watch a number it no longer owns
        os.close(fd)


class Proc:
    """One child process: protocol messages as a queue, output kept up to a cap."""

    def __init__(self, proc: asyncio.subprocess.Process, pipe: ProtocolPipe, out_cap: int):
        self.proc = proc
        self.answer_lost = False  # a request's answer will never be read: its wait was cancelled (reference.ask)
        self.ask_lock = asyncio.Lock()  # one request at a time (reference.ask)
        self.messages: asyncio.Queue = asyncio.Queue()
        self._taken = asyncio.Event()  # next_message took one: room to read the next line
        self._pipe = pipe
        self._cap = out_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self.over_quota: str | None = None  # why watch_folder ended the process
        self._watched: tuple | None = None  # watch_folder's folder and limits
        self._tasks = [asyncio.ensure_future(self._read_output()), asyncio.ensure_future(self._read_protocol())]

    @classmethod
    async def start(cls, argv: list, workdir: Path, env: dict, out_cap: int, max_file_bytes: int | None = None,
                    mem_bytes: int | None = None, untrusted: bool = False, nice: int = 0, idle_sched: bool = False):
        rfd, wfd = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, str(wfd), cwd=str(workdir), env=env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, pass_fds=(wfd,),
                preexec_fn=_limits(max_file_bytes, mem_bytes, untrusted=untrusted, nice=nice,
                                                   idle_sched=idle_sched))
        except BaseException:
            os.close(rfd)
            os.close(wfd)
            raise
        os.close(wfd)
        return cls(proc, ProtocolPipe(rfd), out_cap)

    async def _read_output(self):
        half = self._cap // 2
        while True:
            chunk = await self.proc.stdout.read(65536)
            if not chunk:
                return
            if len(self._head) < half:
                take = half - len(self._head)
                self._head += chunk[:take]
                chunk = chunk[take:]
            if chunk:
                self._tail += chunk
                if len(self._tail) > half:
                    self._dropped += len(self._tail) - half
                    del self._tail[: len(self._tail) - half]

    async def _read_protocol(self):
        try:
            while True:
                while self.messages.qsize() >= MAX_QUEUED_MESSAGES:
                    self._taken.clear()
                    await self._taken.wait()
                line = await self._pipe.reader.readline()
                if not line:
                    break
                try:
                    msg = json.loads(line)
                except (ValueError, RecursionError):  # RecursionError: `[[[[...` nested too deeply
                    msg = None
                await self.messages.put(msg if isinstance(msg, dict) else {"event": "garbage"})
        except (ValueError, asyncio.LimitOverrunError):
            await self.messages.put({"event": "garbage", "message": "protocol line too long"})
        finally:
            await self.messages.put({"event": "eof"})

    def clear_output(self) -> None:
        """Forget the output kept so far: a process that serves one request after another (a compile
        process) is then read for the last one only."""
        self._head.clear()
        self._tail.clear()
        self._dropped = 0

    def output(self) -> str:
        text = self._head.decode("utf-8", "replace")
        if self._tail:
            if self._dropped:
                text += f"\n[... {self._dropped} bytes of output dropped ...]\n"
            text += self._tail.decode("utf-8", "replace")
        return text

    async def next_message(self, timeout: float) -> dict:
        """The next protocol message; {"event": "timeout"} after `timeout` s; {"event": "eof"} when it closed.
        Not asyncio.wait_for: on Python 3.11 it returns a message that arrives in the same turn of the
        event loop as a cancel and drops the cancel (a cancelled evaluation went on driving its candidate)."""
        try:
            async with asyncio.timeout(timeout):
                msg = await self.messages.get()
            self._taken.set()
            return msg
        except TimeoutError:
            return {"event": "timeout"}

    async def send(self, line: str) -> bool:
        try:
            self.proc.stdin.write((line + "\n").encode())
            await self.proc.stdin.drain()
            return True
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            return False

    async def wait(self, timeout: float) -> int | None:
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see next_message
                return await self.proc.wait()
        except TimeoutError:
            return None

    def watch_folder(self, folder: Path, max_bytes: int, max_files: int, base: tuple | None = None) -> None:
        """From now on, end the process once more than `max_bytes` or `max_files` have been written into
        `folder` beyond `base` ((bytes, files), folder_usage; default: what is there now, the judge's
        files), saying so in `over_quota`. The folder is on the server's disk, which other
        evaluations' builds need too; each file is capped anyway (RLIMIT_FSIZE), the number of files is not."""
        base, files = base or folder_usage(folder, max_files)
        self._watched = (folder, base + max_bytes, files + max_files, max_bytes, max_files)
        self._tasks.append(asyncio.ensure_future(self._watch()))

    async def over_quota_now(self) -> str | None:
        """over_quota, with the watched folder measured once more now: a process that wrote past the
        limit and exited between two of the watch's looks was never seen over it. Called before what
        the process wrote is published."""
        if self.over_quota is None and self._watched:
            await self._over_limit()
        return self.over_quota

    async def _watch(self) -> None:
        while self.proc.returncode is None:
            if await self._over_limit():
                self.kill()
                return
            await asyncio.sleep(FOLDER_CHECK_S)

    async def _over_limit(self) -> bool:
        """Measure the watched folder; over a limit, say so in over_quota."""
        folder, limit, limit_files, max_bytes, max_files = self._watched
        used, n = await asyncio.to_thread(folder_usage, folder, limit_files)
        if used > limit or n > limit_files:
            self.over_quota = (f"it wrote more into its folder than a submission may ({max_bytes / 2**30:.3g} GiB, "
                               f"{max_files} files): {used / 2**30:.3g} GiB in {n}{'+' if n > limit_files else ''} "
                               "files")
            return True
        return False

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    async def close(self) -> None:
        """Kill the whole group and wait for the reader tasks: nothing is left running."""
        self.kill()
        await self.wait(10)
        # a wrapper (unshare) can exit before the process it started: that one is still giving its
        # GPU memory back; wait until no process of the group is left
        for _ in range(100):
            if not _group_running(self.proc.pid):
                break
            await asyncio.sleep(0.05)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._pipe.close()

    @property
    def returncode(self):
        return self.proc.returncode


def _group_running(pgid: int) -> bool:
    """Whether a process of this process group is still running (zombies whose threads have all exited
    do not count: their memory is given back, and in a container nobody may reap them)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and not (fields[0] in ("Z", "X") and threads_exited(pid)):
            return True
    return False


def threads_exited(pid: int | str) -> bool:
    """Whether every thread of a process whose main thread has exited (a zombie) has exited too. Its
    main thread is a zombie as soon as it is killed, while its other threads are still exiting: they
    hold its memory and its open files, a GPU context among them (on an H100, a killed CUDA process
    holding 0.1-25 GB: a zombie after < 1 ms, its device memory back after 45-61 ms, every thread gone
    after 74-131 ms; experiments/bench_process_exit.py)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            return False
    return True


def remove_folder(path: Path) -> None:
    """Remove a candidate process's folder, whatever it did to it. A candidate running as the judge's
    own user (an unprivileged server) can take the permissions off the folders it made (chmod 000),
    which rmtree can then neither list nor empty: give them back, never through a link, and again."""
    _rmtree(path)
    if not os.path.lexists(path):
        return
    _own_folder(path)
    for top, dirs, _ in os.walk(path, onerror=lambda e: None):  # a folder's folders, before they are opened
        for d in dirs:
            _own_folder(os.path.join(top, d))
    _rmtree(path)


def _rmtree(path) -> None:
    """rmtree that raises nothing into its caller (a shutdown or an evaluation's cleanup): ignore_errors
    does not cover Python 3.11's close of the folder's own descriptor, which raises EBADF when that
    descriptor was closed under it. What is left is tried again, or goes with the judge's work folder."""
    try:
        shutil.rmtree(path, ignore_errors=True)
    except OSError as e:
        logging.getLogger("kernel_env.judge").warning("removing %s: %s", path, e)


def _own_folder(path) -> None:
    """Owner's permissions back on `path` if it is a real folder, not a link to one."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, 0o700)
    except OSError:
        pass


def describe_exit(rc: int | None) -> str:
    if rc is None:
        return "did not exit"
    sig = -rc if rc < 0 else rc - 128 if 128 < rc < 128 + 65 else 0  # wrappers report a signal as 128 + n
    if sig:
        try:
            return f"was killed by signal {signal.Signals(sig).name}"
        except ValueError:
            return f"was killed by signal {sig}"
    return f"exited with status {rc}"


PYTHON = sys.executable
