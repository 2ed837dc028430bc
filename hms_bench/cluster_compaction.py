"""``engine=SPARK`` for the compaction benchmark: one compaction run as a Spark application on
the test cluster (``hms_bench.cluster``), the way the metastore's worker runs it.

    python -m hms_bench.compaction_memory --rows 20000000 \\
        --engine hms_bench.cluster_compaction:compact

:func:`compact` has the benchmark's engine signature: it plans the compaction of a table
directory with ``orc_acid.compaction`` (``plan_compaction``, ``begin_staging``,
``plan_tasks``: one task per bucket id), runs the tasks through the worker's own
``SparkApplication`` (``hms_txn.service.compactor.spark_engine``: ``spark-submit`` of
``spark/compaction_job.py``, ``orc_acid`` in ``--py-files``), records the results, and then
discards the staged output, as the benchmark does with the local engine. The table directory
is on the local disk: the cluster's workers are network namespaces of this machine, so they
read and write it where it is.

The cluster: the one ``python -m hms_bench.cluster up`` started, named by
``HMS_BENCH_CLUSTER=<its workdir>/cluster.json``; else one started for the call (its start is
not part of the figures) and stopped after.
"""

from __future__ import annotations

import json
import os
import time
from typing import Optional
from urllib.parse import urlsplit


def _settings(master: str, host: str, executor_memory: str):
    from hms_txn.common.config import Config
    from hms_txn.service.compactor.spark_engine import SparkSettings
    return SparkSettings(Config({
        "hms_txn.compactor.engine": "SPARK", "spark.master": master,
        "spark.driver.host": host, "spark.driver.bindAddress": host,
        "spark.executor.memory": executor_memory, "spark.ui.enabled": "false"}))


def compact(table_dir: str, kind: str, valid_write_ids: str, visibility_txn_id: int,
            valid_txns: Optional[str] = None, batch_rows: Optional[int] = None,
            *, executor_memory: str = "512m") -> dict:
    """Compact ``table_dir`` (``kind``: minor | major) on the cluster; -> rows, deletes,
    files, tasks, the application's id and its wall seconds (from spark-submit's start to
    its end, the application's own start included). ``batch_rows`` is not passed on: the
    executors merge with ``run_task``'s default, as the metastore's worker has them do."""
    from orc_acid.compaction import (begin_staging, discard_staged, plan_compaction,
                                     plan_tasks, record_task)
    from hms_txn.service.compactor.spark_engine import SparkApplication

    cluster = None
    described = os.environ.get("HMS_BENCH_CLUSTER")
    if described:
        with open(described) as f:
            master = json.load(f)["master"]
        host = urlsplit(master).hostname
    else:
        from hms_bench.cluster import SparkCluster
        cluster = SparkCluster(workers=2, cores=1).start()
        master, host = cluster.master_url, cluster.host
    try:
        plan = plan_compaction(table_dir, kind, valid_write_ids,
                               visibility_txn_id=int(visibility_txn_id), valid_txns=valid_txns)
        if plan is None:
            raise RuntimeError(f"nothing to compact ({kind}) in {table_dir}")
        staged = begin_staging(plan)
        try:
            tasks = plan_tasks(staged)
            app = SparkApplication(_settings(master, host, executor_memory),
                                   f"hms-txn compaction benchmark ({kind})",
                                   [(0, os.path.abspath(table_dir), t) for t in tasks])
            start = time.perf_counter()
            results = app.run(lambda _app_id: None, lambda: False)
            seconds = time.perf_counter() - start
            for r in results.get(0, []):
                record_task(staged, r)
            return {"rows": staged.rows, "deletes": staged.deletes, "files": staged.files,
                    "tasks": len(tasks), "app_id": app.app_id,
                    "application_seconds": round(seconds, 2),
                    "task_seconds": round(sum(r.seconds for r in results.get(0, [])), 2)}
        finally:
            discard_staged(staged)
    finally:
        if cluster is not None:
            cluster.stop()
