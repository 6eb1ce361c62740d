"""Shared test setup: one build cache for the whole session (a C++ load_inline build costs ~25 s
on CI; every CPU test submission shares one extension, so it is built once), and helpers."""
import os
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SUBMISSIONS = ROOT / "tests" / "submissions"
SHARED_KB = ROOT.parent / "shared" / "kernelbench"

# Before anything imports kernel_env: servers and judges started by tests inherit this cache.
os.environ.setdefault("KERNEL_ENV_CACHE", tempfile.mkdtemp(prefix="kernel_env_test_cache_"))


def submission(name: str) -> str:
    return (SUBMISSIONS / name).read_text()


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    return Path(os.environ["KERNEL_ENV_CACHE"])
