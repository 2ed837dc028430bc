"""Timing helpers of ``hms_bench.spark_scan``: wall time, CPU time of the process tree, CPU
time of Spark's tasks, best of rounds that alternate the sides compared; and the Python
data source floor (a Python data source that reads nothing).

CPU times hardly depend on what else runs on the machine, wall times do:

* ``cpu``: the CPU seconds of this process and its descendants (the Spark JVM of a local
  master, its Python workers, a metastore the benchmark started), from Linux's /proc;
* ``task_cpu``: the CPU time Spark's task threads report (``executorCpuTime`` summed over
  the stages in the driver's status store): executors on other hosts (``--master``)
  included, Python workers not.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Dict, List, Sequence

WARMUP = 2


def _stat(pid: int):
    """(ppid, utime + stime + cutime + cstime in ticks) of a process, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            st = fh.read()
    except OSError:
        return None
    f = st[st.rindex(")") + 2:].split()
    return int(f[1]), sum(int(x) for x in f[11:15])


def tree_cpu_s() -> float:
    """CPU seconds used so far by this process and all its descendants (the Spark JVM, its
    Python workers, the metastore server we started), from Linux's /proc; nan elsewhere.

    A process that exits while the tree is read moves its time into its parent's ``cutime``
    when the parent reaps it. The times are therefore read children first (the tree as
    found by a first pass): a child gone before its turn is counted in its parent, read
    later; a child reaped between the two reads is counted twice, and one that dies with a
    parent outside the tree is lost: the benchmark takes the median of its rounds."""
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return float("nan")
    children: dict = {}
    for pid in entries:
        st = _stat(pid)
        if st is not None:
            children.setdefault(st[0], []).append(pid)
    order, todo = [], [os.getpid()]
    while todo:                      # parents before children ...
        p = todo.pop()
        order.append(p)
        todo += children.get(p, [])
    total = 0
    for pid in reversed(order):      # ... read children first
        st = _stat(pid)
        if st is not None:
            total += st[1]
    return total / os.sysconf("SC_CLK_TCK")


def task_cpu_s(spark) -> float:
    """CPU seconds of Spark's tasks so far (executorCpuTime of every stage the driver's
    status store holds; it keeps ``spark.ui.retainedStages``, 1000 by default)."""
    sc = spark.sparkContext
    stages = sc._jsc.sc().statusStore().stageList(
        None, False, False, sc._gateway.new_array(sc._jvm.double, 0), None).iterator()
    total = 0
    while stages.hasNext():
        total += stages.next().executorCpuTime()
    return total / 1e9


def settle(spark, step_s: float = 0.1, busy_s: float = 0.02, max_s: float = 3.0) -> None:
    """Collect the Spark JVM's garbage, then wait (at most ``max_s``) until this process tree
    is idle (at most ``busy_s`` CPU seconds in ``step_s``): what one side leaves running (a
    collection, Python workers exiting, the metastore finishing a commit) is not timed as
    the next side's. The sides run in turn, so each gets the same treatment."""
    spark.sparkContext._jvm.System.gc()
    deadline = time.monotonic() + max_s
    last = tree_cpu_s()
    while time.monotonic() < deadline:
        time.sleep(step_s)
        now = tree_cpu_s()
        if now - last <= busy_s:
            return
        last = now


def best(spark, fns: Sequence[Callable[[], object]], repeat: int) -> List[Dict[str, float]]:
    """``WARMUP`` warm-up runs of each function, then ``repeat`` rounds running them in turn
    (each run after :func:`settle`) -> per function {"wall": best wall time, "cpu": median
    process tree CPU time, "task_cpu": median task CPU time}, in seconds (medians: a process
    exiting while the tree is read can make one reading low; see tree_cpu_s)."""
    for _ in range(WARMUP):
        for fn in fns:
            settle(spark)
            fn()
    runs: List[List[tuple]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            settle(spark)
            t0, c0, k0 = time.perf_counter(), tree_cpu_s(), task_cpu_s(spark)
            fn()
            wall = time.perf_counter() - t0
            runs[i].append((wall, tree_cpu_s() - c0, task_cpu_s(spark) - k0))
    def median(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2

    return [{"wall": min(r[0] for r in rs), "cpu": median([r[1] for r in rs]),
             "task_cpu": median([r[2] for r in rs])} for rs in runs]


def register_floor_source(spark, rows: int, partitions: int) -> str:
    """A Python data source that returns the benchmark's rows as ready-made Arrow batches,
    built once per Python worker and kept in memory (no file read, no decoding): the least
    any Python data source costs Spark for these rows. -> its format name."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FloorReader(DataSourceReader):
        def partitions(self):
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition):
            return iter(_floor_batches(rows, partitions, partition.value))

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "hms_bench_floor"

        def schema(self):
            return "id BIGINT, k INT, s STRING, d DOUBLE"

        def reader(self, schema):
            return FloorReader()

    spark.dataSource.register(FloorSource)
    return "hms_bench_floor"


_floor_cache: dict = {}


def _floor_batches(rows: int, partitions: int, index: int):
    """The rows of input partition ``index`` as the benchmark's DataFrame has them (cached in
    the Python worker that made them)."""
    key = (rows, partitions, index)
    got = _floor_cache.get(key)
    if got is None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        lo, hi = rows * index // partitions, rows * (index + 1) // partitions
        batches = []
        for start in range(lo, hi, 262144):
            ids = np.arange(start, min(hi, start + 262144), dtype=np.int64)
            s = pc.binary_join_element_wise(
                "value-", pc.cast(pa.array(ids % 9973), pa.string()), "")
            batches.append(pa.record_batch(
                [pa.array(ids), pa.array((ids % 1000).astype(np.int32)), s,
                 pa.array(ids / 7.0)], names=["id", "k", "s", "d"]))
        got = _floor_cache[key] = batches
    return got
