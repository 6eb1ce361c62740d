"""UNTRUSTED side: ninja on one build folder of a load_inline call, in a sandbox of its own.

    python -I -S ninja_step.py BUILD_DIR JOBS PROTOCOL_FD

The compile process (runner.py compile: trusted code, torch imported, kept from one call to the next)
writes the build folder as torch's load_inline would and asks the judge to run ninja there; the judge
starts this process for it, sandboxed like a candidate without a GPU, its own folder the call's and
nothing else writable (judge/builds.py). So the compilers and the linker, the only programs that read
the candidate's sources, never run beside the compile process or another call's build.

Standard library only, no site packages: it starts in milliseconds, where a Python with torch takes
~2 CPU-seconds. Its output is ninja's, its exit status ninja's (127: no ninja), and its one protocol
line the CPU seconds of ninja and what ninja ran (a claim, for diagnosis).
"""
import json
import os
import resource
import shutil
import subprocess
import sys

NINJA_RAN = "ninja_ran"  # protocol.NINJA_RAN (this file imports nothing of the package)


def main() -> int:
    build_dir, jobs, fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # torch runs the ninja on PATH; a server started as .venv/bin/python has it beside its Python
    ninja = shutil.which("ninja") or os.path.join(os.path.dirname(sys.executable), "ninja")
    try:
        rc = subprocess.call([ninja, "-v", *(["-j", str(jobs)] if jobs > 0 else [])], cwd=build_dir)
    except OSError as e:
        print(f"ninja could not start: {e}", flush=True)
        rc = 127
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    os.write(fd, (json.dumps({"event": NINJA_RAN, "rc": rc, "cpu_s": round(ru.ru_utime + ru.ru_stime, 3)}) + "\n").encode())
    return rc


if __name__ == "__main__":
    sys.exit(main())
