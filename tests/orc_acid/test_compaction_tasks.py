"""orc_acid.compaction's unit of work: one task per (partition, bucket id), run anywhere,
recorded, published only when all have finished; a re-run task replaces what an earlier
attempt left (whole files or hidden temporaries)."""

from __future__ import annotations

import os
import pickle

import pytest

from orc_acid import compaction as C
from tests.orc_acid.test_compaction import VIS, build, read, txns


def _files(root):
    return {os.path.relpath(os.path.join(d, n), root): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(root) for n in names}


@pytest.mark.parametrize("kind", ["minor", "major"])
def test_tasks_run_apart_and_publish_only_when_all_finished(tmp_path, kind):
    t, wids = build(tmp_path)
    before = read(t, wids, txns())
    plan = C.plan_compaction(str(t), kind, wids, visibility_txn_id=VIS, valid_txns=txns(False))
    staged = C.begin_staging(plan)
    tasks = C.plan_tasks(staged)
    assert [task.bucket_id for task in tasks] == [0, 1]
    # a task is plain data: what an engine ships to an executor
    shipped = [pickle.loads(pickle.dumps(task)) for task in tasks]
    assert shipped == tasks
    first = C.run_task(shipped[0])
    C.record_task(staged, first)
    with pytest.raises(C.CompactionError, match=r"buckets \[1\] have not finished"):
        C.publish_compaction(staged)
    # the executor of bucket 1 died mid-write: a half-written temporary and, from an attempt
    # that wrote the file but never reported, a complete one; the re-run replaces both
    out_dir = os.path.join(staged.staging_dir, tasks[1].output_files[0].split("/")[0])
    with open(os.path.join(out_dir, ".bucket_00001.dead-attempt.tmp"), "wb") as fh:
        fh.write(b"ORC half")
    C.record_task(staged, C.run_task(shipped[1]))
    once = _files(staged.staging_dir)
    second = C.run_task(shipped[1])
    assert _files(staged.staging_dir) == once              # same bytes: deterministic
    C.record_task(staged, second)
    assert staged.files == len(first.files) + len(second.files)
    C.publish_compaction(staged)
    assert not any(n.startswith(".") for n in os.listdir(t / plan.outputs[0]))
    assert read(t, wids, txns()) == before


def test_a_result_of_another_compaction_is_refused(tmp_path):
    t, wids = build(tmp_path)
    plan = C.plan_compaction(str(t), "minor", wids, visibility_txn_id=VIS)
    staged = C.begin_staging(plan)
    C.plan_tasks(staged)
    with pytest.raises(C.CompactionError, match="bucket 7 is not a task"):
        C.record_task(staged, C.TaskResult(7, (), 0, 0, 0, 0.0))
    C.discard_staged(staged)
    assert not os.path.exists(staged.staging_dir)
