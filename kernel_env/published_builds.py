"""The judge's record of the builds it published, and the check made before one is loaded.

The judge moves what a compile process built into the source's build folder in the cache and records
each module file's SHA-256 beside that folder (`.published/`, not inside it: the folder was made in a
candidate's sandbox). A module is loaded only while its file still has that hash. Both sides check:
the judge before it skips the build of a source it has built (judge/builds.py), and the build and
run processes before they load from the folder (candidate/runner.py), so what fast_build then loads
is what the judge published.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .candidate.fast_build import BUILT_MANIFEST

MAX_MANIFEST_BYTES = 1 << 20


def hashes_file(ext_dir: Path, name: str) -> Path:
    """Where the judge records the module files it published into `ext_dir/name` (file -> SHA-256)."""
    return ext_dir.parent / ".published" / ext_dir.name / f"{name}.json"


def read_hashes(ext_dir: Path, name: str) -> dict:
    try:
        rec = json.loads(hashes_file(ext_dir, name).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in rec.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(rec, dict) else {}


def sha256(path: Path) -> str:
    """The file's SHA-256, or "" if it cannot be read."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return ""
    return h.hexdigest()


def intact(ext_dir: Path, *, if_absent: bool) -> bool:
    """Every module that the manifests in `ext_dir`'s extension folders name, read as fast_build reads
    them, still has the hash recorded when it was published. A manifest that cannot be read whole, or
    names a file with no record, fails. `if_absent`: the answer when `ext_dir` does not exist."""
    try:
        folders = [d for d in ext_dir.iterdir() if d.is_dir() and not d.is_symlink()]
    except FileNotFoundError:
        return if_absent
    except OSError:
        return False
    for d in folders:
        path = d / BUILT_MANIFEST
        if not path.exists() and not path.is_symlink():
            continue  # a folder with no manifest names no module
        try:
            if path.is_symlink() or path.stat().st_size > MAX_MANIFEST_BYTES:
                return False
            hashes = read_hashes(ext_dir, d.name)
            for e in json.loads(path.read_text()).values():
                if not hashes.get(e["file"]) or sha256(d / e["file"]) != hashes[e["file"]]:
                    return False
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
    return True
