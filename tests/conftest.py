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
# The test submissions compile with -O2: one precompiled header (judge/prebuild.py), not three.
os.environ.setdefault("KERNEL_ENV_PCH_VARIANTS", "O2")


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return Path(os.environ["KERNEL_ENV_CACHE"])


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
