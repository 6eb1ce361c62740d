"""The judge's record of the builds it published, and the check made before one is loaded.

The judge moves what a compile process built into the source's build folder in the cache and records
each module file's SHA-256 beside that folder (`.published/`, not inside it: the folder was made in a
candidate's sandbox). A module is loaded only while its file still has that hash. Both sides check:
the judge before it skips the build of a source it has built (judge/builds.py), and the build and
run processes before they load from the folder (candidate/runner.py), so what fast_build then loads
is what the judge published. The same for the binding objects it publishes, which compile processes
put in a build in place of compiling its `main.o` (candidate/binding_objects.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
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


# binding objects (candidate/binding_objects.py): <folder>/<key>.o, with its SHA-256 in <key>.sha256
MAX_BINDING_OBJECT_BYTES = 64 << 20
_KEY = re.compile(r"[0-9a-f]{64}")


def binding_object(folder: Path, key: str) -> Path | None:
    """The object the judge published under `key`, if its file still has the hash recorded then."""
    if not _KEY.fullmatch(key):
        return None
    path = folder / f"{key}.o"
    try:
        recorded = (folder / f"{key}.sha256").read_text().strip()
    except OSError:
        return None
    return path if recorded and not path.is_symlink() and sha256(path) == recorded else None


def publish_binding_object(folder: Path, key: str, built: Path) -> bool:
    """Copy a compile process's main.o into `folder` under `key` (the hash recorded first, the object
    renamed into place), unless one is there. Returns whether it was published."""
    if not _KEY.fullmatch(key) or binding_object(folder, key) is not None:
        return False
    try:
        if built.is_symlink() or not built.is_file() or built.stat().st_size > MAX_BINDING_OBJECT_BYTES:
            return False
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{secrets.token_hex(4)}"
        shutil.copyfile(built, tmp)
        digest = sha256(tmp)
        record = folder / f".{key}.sha256.{secrets.token_hex(4)}"
        record.write_text(digest)
        os.replace(record, folder / f"{key}.sha256")
        os.replace(tmp, folder / f"{key}.o")
        return True
    except OSError:
        return False
