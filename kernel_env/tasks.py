"""KernelBench problems: where they are, their ids, and the train/eval split.

A task id is `level<N>/<file stem>` (e.g. `level1/19_ReLU`). The problems come from a folder that
holds `level1/ level2/ level3/` directly, or from a KernelBench checkout root whose problems live in
`<root>/KernelBench/levelN`. With no folder given, the small CPU-sized problems shipped with this
package are used (`kernel_env/data/small_tasks`).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SUPPORTED_LEVELS = (1, 2, 3)
EVAL_PERCENT = 20  # share of each level held out for evaluation
BUILTIN_TASKS_DIR = Path(__file__).parent / "data" / "small_tasks"
_TASK_ID = re.compile(r"^level([0-9]+)/([A-Za-z0-9_][A-Za-z0-9_.\-]{0,120})$")


class TaskError(ValueError):
    """A bad task id, folder or level: the message is safe to show to a client."""


@dataclass(frozen=True)
class Task:
    task_id: str
    level: int
    name: str
    path: Path

    @property
    def source(self) -> str:
        return self.path.read_text()

    @property
    def split(self) -> str:
        return split_of(self.task_id)


def split_of(task_id: str) -> str:
    """The one rule for the split: a hash of the id, so adding or removing other tasks never moves one."""
    h = int.from_bytes(hashlib.sha256(task_id.encode()).digest()[:8], "big")
    return "eval" if h % 100 < EVAL_PERCENT else "train"


def resolve_root(kernelbench_dir: str | os.PathLike | None) -> Path:
    """The folder that holds the `levelN/` folders. Empty / None: $KERNELBENCH_DIR, else the built-in set."""
    raw = str(kernelbench_dir) if kernelbench_dir else os.environ.get("KERNELBENCH_DIR", "")
    if not raw:
        return BUILTIN_TASKS_DIR
    root = Path(raw).expanduser()
    if not root.is_dir():
        raise TaskError(f"KernelBench folder not found: {raw}")
    for cand in (root, root / "KernelBench"):
        if any((cand / f"level{n}").is_dir() for n in SUPPORTED_LEVELS):
            return cand.resolve()
    raise TaskError(f"no level1/ level2/ level3/ folders in {raw} (nor in {raw}/KernelBench)")


def task_folder(task_ids, kernelbench_dir: str | os.PathLike | None) -> Path:
    """A new folder with the small tasks plus the KernelBench files of `task_ids` that are not small
    tasks, for a TaskSet that needs both (the device checks, the corpus judge)."""
    folder = Path(tempfile.mkdtemp(prefix="kernel_env_tasks_"))
    shutil.copytree(BUILTIN_TASKS_DIR, folder, dirs_exist_ok=True)
    kb = resolve_root(kernelbench_dir) if kernelbench_dir else None
    for tid in sorted(task_ids):
        dst = folder / f"{tid}.py"
        if not dst.exists():
            if kb is None or not (kb / f"{tid}.py").exists():
                raise TaskError(f"task {tid} is not a small task: pass --kernelbench-dir (or $KERNELBENCH_DIR)")
            shutil.copy(kb / f"{tid}.py", dst)
    return folder


def _check_levels(levels) -> tuple[int, ...]:
    out = []
    for lv in levels:
        lv = int(lv)
        if lv == 4:
            raise TaskError("level 4 is not supported: its problems download models from a hub at import time")
        if lv not in SUPPORTED_LEVELS:
            raise TaskError(f"unknown level {lv}: supported levels are 1, 2, 3")
        out.append(lv)
    return tuple(sorted(set(out)))


def _id_sort_key(task_id: str):
    level, stem = task_id.split("/", 1)
    num = re.match(r"^(\d+)", stem)
    return (level, int(num.group(1)) if num else 10**9, stem)


@lru_cache(maxsize=16)
def _scan(root: Path) -> dict[str, Task]:
    tasks = {}
    for lv in SUPPORTED_LEVELS:
        folder = root / f"level{lv}"
        if not folder.is_dir():
            continue
        for p in folder.glob("*.py"):
            if p.name.startswith("_"):
                continue
            tid = f"level{lv}/{p.stem}"
            if _TASK_ID.match(tid):
                tasks[tid] = Task(tid, lv, p.stem, p)
    return dict(sorted(tasks.items(), key=lambda kv: _id_sort_key(kv[0])))


class TaskSet:
    """The problems of one folder."""

    def __init__(self, kernelbench_dir: str | os.PathLike | None = None):
        self.root = resolve_root(kernelbench_dir)
        self.tasks = _scan(self.root)
        if not self.tasks:
            raise TaskError(f"no problems found under {kernelbench_dir or self.root}")

    def ids(self, split: str | None = None, levels=SUPPORTED_LEVELS) -> list[str]:
        if split not in (None, "train", "eval"):
            raise TaskError(f"unknown split {split!r}: use 'train' or 'eval'")
        lv = set(_check_levels(levels))
        return [t for t, task in self.tasks.items() if task.level in lv and (split is None or task.split == split)]

    def get(self, task_id: str) -> Task:
        validate_task_id(task_id)
        task = self.tasks.get(task_id)
        if task is None:
            raise TaskError(f"unknown task {task_id!r} (try `kernel-env tasks`)")
        return task


def validate_task_id(task_id) -> str:
    """Syntax check for a client-supplied id: no path parts, no traversal, a supported level."""
    if not isinstance(task_id, str) or not _TASK_ID.match(task_id):
        shown = task_id[:80] if isinstance(task_id, str) else type(task_id).__name__
        raise TaskError(f"malformed task id {shown!r}: expected level<N>/<problem name>, e.g. level1/19_ReLU")
    _check_levels([int(task_id.split("/")[0][5:])])
    return task_id


def split_task_ids(split: str, levels=(1,), kernelbench_dir: str | os.PathLike | None = None) -> list[str]:
    """Task ids of one split, in problem order. The seed's baseline_eval.split_task_ids calls this."""
    return TaskSet(kernelbench_dir).ids(split, levels)
