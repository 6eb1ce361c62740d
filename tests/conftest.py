"""Shared test setup: one build cache for the whole session (a C++ load_inline build costs ~25 s
on CI; every CPU test submission shares one extension, so it is built once), and helpers."""
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from cases import submission  # noqa: F401  (the test submissions as the judge gets them: tests/cases.py)

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
SHARED_KB = ROOT.parent / "shared" / "kernelbench"

# Before anything imports kernel_env: every temp folder of the session (judges' work folders, servers'
# TMPDIR, Ray's session, the build cache) goes under one folder, removed at the end. Judges a test
# kills, or leaves to a lost node, cannot remove their own folders (~57 MB each).
SESSION_TMP = tempfile.mkdtemp(prefix="kernel_env_tests_")
os.environ["TMPDIR"] = tempfile.tempdir = SESSION_TMP
# servers and judges started by tests inherit this cache
os.environ.setdefault("KERNEL_ENV_CACHE", tempfile.mkdtemp(prefix="cache_"))
# The tests' judges use the built-in small tasks: a KERNELBENCH_DIR left in the environment would send
# them to KernelBench's. A GPU test that needs one of KernelBench's tasks takes it from here.
KERNELBENCH_DIR = os.environ.pop("KERNELBENCH_DIR", "")
# The test submissions compile with -O2: one precompiled header (judge/prebuild.py), not three.
os.environ.setdefault("KERNEL_ENV_PCH_VARIANTS", "O2")


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return Path(os.environ["KERNEL_ENV_CACHE"])


@pytest.fixture(scope="session", autouse=True)
def _session_precompiled_header(request):
    """The session's precompiled torch/extension.h (judge/prebuild.py), made before the first test when
    any test that builds C++ (a slow one) is to run. A judge that finds none builds it beside its own
    first builds, which then go without it (~2x the CPU each)."""
    if any(item.get_closest_marker("slow") for item in request.session.items):
        from kernel_env.judge import prebuild
        prebuild.build(Path(os.environ["KERNEL_ENV_CACHE"]), with_cuda=False, variants=("O2",))


def sharing_the_precompiled_header(cache: Path) -> Path:
    """`cache`, a judge cache of a test's own, pointed at the session's precompiled header (the
    pointer file judge/prebuild.py leaves), so that its judge uses that one instead of making another
    (a CPU-minute each on this machine's 2 cores). Nothing to point at: nothing written."""
    for pointer in (Path(os.environ["KERNEL_ENV_CACHE"]) / "pch").glob("latest-*.json"):
        (cache / "pch").mkdir(parents=True, exist_ok=True)
        shutil.copy(pointer, cache / "pch" / pointer.name)
    return cache


def pytest_sessionfinish(session, exitstatus):
    """The session's temp folders go with it (the cache too, unless it was given: builds and a ~0.8 GB
    precompiled header)."""
    shutil.rmtree(SESSION_TMP, ignore_errors=True)


def waits_for_the_loop(real):
    """A stand-in for `real` (a screen, which runs in a thread) that answers only once the event loop
    has run something else meanwhile: (stand-in, screening, loop_ran). The test's coroutine waits for
    `screening`, then sets `loop_ran`; a screen run on the loop itself never sees it and fails."""
    screening, loop_ran = threading.Event(), threading.Event()

    def stand_in(*args, **kw):
        screening.set()
        if not loop_ran.wait(20):
            raise AssertionError("the event loop did not run while the screen worked")
        return real(*args, **kw)
    return stand_in, screening, loop_ran
