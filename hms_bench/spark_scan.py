"""Benchmark: Spark hive_acid scans/appends vs Spark's native ORC on the same data.

    python -m hms_bench.spark_scan [--rows 2000000] [--repeat 3] [--metastore thrift://...]
                                   [--out f.json]

Starts a temporary ``hms-txn serve`` unless ``--metastore`` is given, and a local[2] Spark
session. Measures (two warm-up runs of each side, then ``--repeat`` rounds in which the
native and the hive_acid run alternate, so that load from other work on the machine hits
both sides alike; the best time of each side is reported):

* append: ``df.write.format("hive_acid").mode("append")`` vs ``df.write.orc(dir)``
  (same DataFrame, cached, same number of tasks, same codec: ``--codec``, default snappy,
  Spark's default; the ACID table gets ``orc.compress``). The ACID tables are created
  before the clock starts (the native side has no DDL either);
* scan: ``spark.read.format("hive_acid").load(t)`` (the Python data source) and
  ``with hive_acid.snapshot(spark, t) as df`` (the JVM path: Spark's ORC reader; each run
  takes the lock and snapshot and lists the files) vs ``spark.read.orc(dir)``, every column
  aggregated (so no column is pruned away), with no deletes and after deleting 5% of the
  rows (one delete delta); the three run in turn in each round. The 5% case is compared
  with a native scan of a copy of the data without the deleted rows (the same result;
  slightly faster than the full native scan, so the stricter comparison).

and prints the ratios native/acid (throughput of hive_acid relative to native: 1.0 = as
fast; the issue's target is >= 0.5) and the 1-minute load average before and after. On
Linux it also reports the CPU time of each side (this process and its descendants: the
Spark JVM, its Python workers, the metastore server), least over the rounds, and the
ratios of those (``cpu_ratio_*``): on a shared machine they vary much less than wall times.

:func:`local_spark` (a local Spark session on a temporary metastore, torn down at exit) is
also what ``examples/pipeline.py`` runs in.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, Optional, Tuple


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_metastore(work: str) -> Tuple[subprocess.Popen, str]:
    """``hms-txn serve`` on a free port with its data in ``work`` -> (process, URI)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "hms_txn.cli", "serve", "--port", str(port),
                             "--data-dir", os.path.join(work, "ms")], cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return proc, f"thrift://127.0.0.1:{port}"
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("the metastore did not start")
            time.sleep(0.2)


@contextlib.contextmanager
def local_spark(app_name: str, metastore: Optional[str] = None,
                conf: Optional[Dict[str, str]] = None, log_level: Optional[str] = None
                ) -> Iterator[Tuple[object, str]]:
    """``with local_spark("app") as (spark, work):`` a local[2] Spark session whose
    metastore is ``metastore``, or else a temporary ``hms-txn serve``, and a scratch
    directory. At exit hive_acid's transactions of this process end, Spark stops, the
    temporary metastore stops and the directory is removed."""
    work = tempfile.mkdtemp(prefix=f"{app_name}-")
    server = None
    try:
        if metastore is None:
            server, metastore = _start_metastore(work)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession
        builder = (SparkSession.builder.master("local[2]").appName(app_name)
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.hadoop.hive.metastore.uris", metastore))
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        if log_level:
            spark.sparkContext.setLogLevel(log_level)
        try:
            yield spark, work
        finally:
            from spark import hive_acid
            hive_acid.shutdown()
            spark.stop()
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def _tree_cpu_s() -> float:
    """CPU seconds used so far by this process and all its descendants (the Spark JVM, its
    Python workers, the metastore server we started), from Linux's /proc; nan elsewhere.
    Unlike wall time this hardly depends on what else runs on the machine."""
    procs = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return float("nan")
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as fh:
                st = fh.read()
        except OSError:
            continue
        f = st[st.rindex(")") + 2:].split()
        # ppid; utime + stime + cutime + cstime (children already reaped count in cutime)
        procs[int(e)] = (int(f[1]), sum(int(x) for x in f[11:15]))
    children: dict = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [os.getpid()]
    while todo:
        p = todo.pop()
        total += procs.get(p, (0, 0))[1]
        todo += children.get(p, [])
    return total / os.sysconf("SC_CLK_TCK")


WARMUP = 2


def _best(fns, repeat: int):
    """``WARMUP`` warm-up runs of each function, then ``repeat`` rounds running them in turn
    -> ([best wall time of each], [least CPU time of each]) in seconds."""
    for _ in range(WARMUP):
        for fn in fns:
            fn()
    wall = [[] for _ in fns]
    cpu = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            c = _tree_cpu_s()
            t = time.perf_counter()
            fn()
            wall[i].append(time.perf_counter() - t)
            cpu[i].append(_tree_cpu_s() - c)
    return [min(w) for w in wall], [min(c) for c in cpu]


def _best_pair(native, acid, repeat: int):
    """``WARMUP`` warm-up runs each, then ``repeat`` alternating rounds -> ((best native wall
    time, best acid wall time), (least native CPU time, least acid CPU time)) in seconds."""
    wall, cpu = _best([native, acid], repeat)
    return tuple(wall), tuple(cpu)


AGG = ["count(*) AS n", "sum(id) AS a", "sum(k) AS b", "sum(length(s)) AS c", "sum(d) AS e"]


def run(spark, rows: int, repeat: int, work: str, codec: str = "snappy") -> dict:
    from spark import hive_acid
    hive_acid.register(spark)
    # the same codec on both sides: Spark's ORC default is snappy, Hive's ZLIB
    spark.conf.set("spark.sql.orc.compression.codec", codec)
    props = {"orc.compress": {"snappy": "SNAPPY", "zlib": "ZLIB", "none": "NONE"}[codec]}
    parts = spark.sparkContext.defaultParallelism
    df = spark.range(0, rows, numPartitions=parts).selectExpr(
        "id", "CAST(id % 1000 AS INT) AS k", "concat('value-', CAST(id % 9973 AS STRING)) AS s",
        "CAST(id AS DOUBLE) / 7 AS d").cache()
    df.count()
    res = {"rows": rows, "partitions": parts, "codec": codec}

    # appends: each run writes a fresh table / directory; the ACID tables are created
    # before timing (DDL is not part of an append, and the native side has none)
    n = [0]
    tables = []
    for i in range(repeat + WARMUP):
        t = f"default.bench_append_{os.getpid()}_{i}"
        hive_acid.create_table(spark, t, "id BIGINT, k INT, s STRING, d DOUBLE",
                               properties=props)
        tables.append(t)

    def acid_append():
        df.write.format("hive_acid").mode("append").save(tables.pop())

    def native_append():
        n[0] += 1
        df.write.mode("overwrite").orc(os.path.join(work, f"native_append_{n[0]}"))

    (res["append_native_s"], res["append_acid_s"]), \
        (res["append_native_cpu_s"], res["append_acid_cpu_s"]) = \
        _best_pair(native_append, acid_append, repeat)

    # scans of the same data
    table = f"default.bench_scan_{os.getpid()}"
    hive_acid.create_table(spark, table, "id BIGINT, k INT, s STRING, d DOUBLE",
                           properties=props)
    df.write.format("hive_acid").mode("append").save(table)
    native_dir = os.path.join(work, "native_scan")
    df.write.mode("overwrite").orc(native_dir)

    def acid_scan():
        return spark.read.format("hive_acid").load(table).selectExpr(*AGG).collect()

    def snapshot_scan():
        # the JVM path: snapshot + lock + file listing per run, as a query would do
        snap = hive_acid.snapshot(spark, table)
        with snap as sdf:
            assert snap.native, snap.fallback_reason
            return sdf.selectExpr(*AGG).collect()

    def native_scan():
        return spark.read.orc(native_dir).selectExpr(*AGG).collect()

    assert acid_scan() == native_scan() == snapshot_scan()
    (res["scan_native_s"], res["scan_acid_s"], res["scan_snapshot_s"]), \
        (res["scan_native_cpu_s"], res["scan_acid_cpu_s"], res["scan_snapshot_cpu_s"]) = \
        _best([native_scan, acid_scan, snapshot_scan], repeat)

    hive_acid.delete(spark, table, "id % 20 = 0")        # 5% of the rows
    native_del = os.path.join(work, "native_scan_5pct")
    df.where("id % 20 <> 0").write.mode("overwrite").orc(native_del)

    def native_del_scan():
        return spark.read.orc(native_del).selectExpr(*AGG).collect()

    got = acid_scan()
    assert got == native_del_scan() == snapshot_scan()
    assert got[0].n == rows - (rows + 19) // 20
    (res["scan_native_of_same_rows_s"], res["scan_acid_5pct_deleted_s"],
     res["scan_snapshot_5pct_deleted_s"]), \
        (res["scan_native_of_same_rows_cpu_s"], res["scan_acid_5pct_deleted_cpu_s"],
         res["scan_snapshot_5pct_deleted_cpu_s"]) = \
        _best([native_del_scan, acid_scan, snapshot_scan], repeat)
    res["ratio_scan"] = res["scan_native_s"] / res["scan_acid_s"]
    res["ratio_scan_5pct_deleted"] = (res["scan_native_of_same_rows_s"]
                                      / res["scan_acid_5pct_deleted_s"])
    res["ratio_scan_snapshot"] = res["scan_native_s"] / res["scan_snapshot_s"]
    res["ratio_scan_snapshot_5pct_deleted"] = (res["scan_native_of_same_rows_s"]
                                               / res["scan_snapshot_5pct_deleted_s"])
    res["ratio_scan_5pct_deleted_vs_full_native"] = (res["scan_native_s"]
                                                     / res["scan_acid_5pct_deleted_s"])
    res["ratio_append"] = res["append_native_s"] / res["append_acid_s"]
    for k in ("append", "scan", "scan_5pct_deleted", "scan_snapshot",
              "scan_snapshot_5pct_deleted"):
        nat = "scan_native_of_same_rows" if "5pct" in k else \
            "scan_native" if k.startswith("scan") else f"{k}_native"
        acid = {"scan_5pct_deleted": "scan_acid_5pct_deleted",
                "scan_snapshot": "scan_snapshot",
                "scan_snapshot_5pct_deleted": "scan_snapshot_5pct_deleted"}.get(k, f"{k}_acid")
        res[f"cpu_ratio_{k}"] = (res[f"{nat}_cpu_s"] / res[f"{acid}_cpu_s"]
                                 if res[f"{acid}_cpu_s"] else float("nan"))
    df.unpersist()
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="hive_acid vs native ORC on local[2]")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--metastore")
    ap.add_argument("--codec", default="snappy", choices=["snappy", "zlib", "none"])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g"}
    with local_spark("hive-acid-bench", args.metastore, conf, log_level="ERROR") as (spark, work):
        load_before = os.getloadavg()[0]
        res = run(spark, args.rows, args.repeat, work, args.codec)
        res["load_average_1m_before"] = load_before
        res["load_average_1m"] = os.getloadavg()[0]
        print(json.dumps(res, indent=2))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
