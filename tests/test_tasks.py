import shutil

import pytest

from kernel_env.tasks import BUILTIN_TASKS_DIR, TaskError, TaskSet, split_of, split_task_ids, validate_task_id

from conftest import SHARED_KB


def test_builtin_tasks_have_train_and_eval_per_level():
    ts = TaskSet()
    for lv in (1, 2, 3):
        assert ts.ids("train", [lv]) and ts.ids("eval", [lv]), lv
    assert "level1/1_Small_ReLU" in ts.ids("train", [1])
    assert set(ts.ids("train")) | set(ts.ids("eval")) == set(ts.ids())
    assert not set(ts.ids("train")) & set(ts.ids("eval"))


def test_split_is_a_rule_on_the_id_not_on_list_positions(tmp_path):
    full = TaskSet(BUILTIN_TASKS_DIR)
    # a folder holding only some of the problems, plus a new one: every shared id keeps its split
    for lv in (1, 2):
        (tmp_path / f"level{lv}").mkdir()
    keep = ["level1/2_Small_Matmul", "level1/4_Small_LayerNorm", "level2/2_Small_Scale_Add_Clamp"]
    for tid in keep:
        shutil.copy(full.get(tid).path, tmp_path / f"{tid}.py")
    shutil.copy(full.get("level1/1_Small_ReLU").path, tmp_path / "level1" / "77_New_Problem.py")
    part = TaskSet(tmp_path)
    for tid in keep:
        assert part.get(tid).split == full.get(tid).split
    assert split_task_ids("eval", [1, 2], tmp_path) == [t for t in full.ids("eval", [1, 2]) if t in keep]
    assert split_of("level1/19_ReLU") == split_of("level1/19_ReLU")


@pytest.mark.skipif(not SHARED_KB.is_dir(), reason="KernelBench copy not present")
def test_kernelbench_split_is_about_20_percent_per_level_and_both_layouts_load(tmp_path):
    ts = TaskSet(SHARED_KB)
    assert len(ts.ids(None, [1])) == 100 and len(ts.ids(None, [3])) == 50
    for lv in (1, 2, 3):
        share = len(ts.ids("eval", [lv])) / len(ts.ids(None, [lv]))
        assert 0.1 <= share <= 0.3, (lv, share)
    # a checkout root: <root>/KernelBench/levelN
    (tmp_path / "KernelBench").symlink_to(SHARED_KB)
    assert TaskSet(tmp_path).ids() == ts.ids()


def test_bad_ids_levels_and_folders_get_clear_errors(tmp_path):
    ts = TaskSet()
    for bad in ["../etc/passwd", "level1/../../x", "level1/a/b", "", "level9/x", 5, "level1/"]:
        with pytest.raises(TaskError):
            ts.get(bad)
    with pytest.raises(TaskError, match="unknown task"):
        ts.get("level1/999_Nope")
    with pytest.raises(TaskError, match="level 4"):
        validate_task_id("level4/1_Model")
    with pytest.raises(TaskError, match="level 4"):
        ts.ids("train", [4])
    with pytest.raises(TaskError, match="not found"):
        TaskSet(tmp_path / "missing")
    with pytest.raises(TaskError, match="no level1"):
        TaskSet(tmp_path)
    with pytest.raises(TaskError, match="split"):
        ts.ids("test")
