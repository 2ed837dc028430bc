"""The Spark application of a compaction (``hms_txn.compactor.engine=SPARK``).

The metastore's compaction worker (``hms_txn/service/compactor/spark_engine.py``) claims the
requests, opens their compaction transactions, plans them with ``orc_acid.compaction`` and
then runs this program with ``spark-submit`` in client mode, as its own child process::

    spark-submit --master M --name "hms-txn compaction ..." [--conf spark.*=...] \\
        --py-files orc_acid.zip spark/compaction_job.py JOB_DIR

``JOB_DIR/job.pickle`` (written by the worker, in a directory only it can read) holds the
tasks -- one ``orc_acid.compaction_tasks.CompactionTask`` per (partition, bucket id) of every
request, each with the table location it belongs to -- and the ``fs.*`` keys of the
metastore's hive-site.xml. This program makes one Spark task of each (one RDD partition per
compaction task); an executor rebuilds the location's file system from those keys
(``orc_acid.fs``) and runs the merge with ``orc_acid.compaction.run_task``, which writes
only that bucket's output files and is idempotent, so Spark's task retries (an executor
lost, a task failed) are safe. The ``orc_acid`` package reaches the executors in
``--py-files``: they need only pyarrow and numpy.

What comes back: ``JOB_DIR/status.json`` with the application id as soon as the
SparkContext is up (the worker records it as the request's job id, as Hive records the MR
job's), then ``JOB_DIR/result.pickle`` with every task's ``TaskResult`` once the job has
succeeded; the exit status says whether it did. The worker publishes and commits only when
every task it planned has a result; anything else -- a failed job, a killed application, a
driver that died -- leaves it no result file, and the worker aborts the compaction
transactions: the output written so far is an aborted ``_vC`` directory the cleaner removes.

Why a child process and files, not a call back to the metastore: the worker needs the
results in its own process (the staged compaction lives there, and the commit must follow
from them), a child's exit is an unambiguous end, and executors then need no metastore
connection or credentials -- only the table's file system. Client mode keeps the driver on
the metastore's host, where the worker can read its files and kill it (``kill`` of its
process group ends the application).
"""

from __future__ import annotations

import json
import os
import pickle
import sys

JOB, STATUS, RESULT = "job.pickle", "status.json", "result.pickle"


def _write(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run_one(item, fs_options):
    """One compaction task, on an executor: -> (request id, TaskResult)."""
    request_id, location, task = item
    from orc_acid import fs as afs
    from orc_acid.compaction import run_task
    filesystem, _ = afs.filesystem_for(location, fs_options)
    return request_id, run_task(task, filesystem=filesystem)


def main(argv) -> int:
    if len(argv) != 2:
        print("usage: spark-submit ... compaction_job.py JOB_DIR", file=sys.stderr)
        return 2
    job_dir = argv[1]
    with open(os.path.join(job_dir, JOB), "rb") as f:
        job = pickle.load(f)
    from pyspark import SparkConf, SparkContext
    sc = SparkContext(conf=SparkConf())
    try:
        _write(os.path.join(job_dir, STATUS), json.dumps(
            {"app_id": sc.applicationId, "ui": sc.uiWebUrl}).encode())
        items, options = job["tasks"], job["fs_options"]
        results = sc.parallelize(items, len(items)) \
            .map(lambda item: run_one(item, options)).collect()
        _write(os.path.join(job_dir, RESULT), pickle.dumps(
            {"app_id": sc.applicationId, "results": results}))
    finally:
        sc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
