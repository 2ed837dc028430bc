"""Benchmark: Spark on hive_acid tables vs Spark on plain ORC files of the same rows.

    python -m hms_bench.spark_scan [--rows 2000000] [--repeat 3] [--codec snappy]
        [--metastore thrift://...] [--master spark://host:7077] [--properties-file F]
        [--conf key=value ...] [--out f.json]

Starts a temporary ``hms-txn serve`` unless ``--metastore`` is given, and a Spark session:
local[2] unless ``--master`` (and ``--properties-file``, the ``spark-defaults.conf`` that
``python -m hms_bench.cluster up`` writes, or ``--conf``) name a cluster; tables and plain
files then live in a directory every executor must see (one machine, or a shared mount).
Rows of ``id BIGINT, k INT, s STRING, d DOUBLE`` from one cached DataFrame, as many tasks on
both sides, the same ORC codec on both sides (the ACID table's ``orc.compress``). Each
measurement: two warm-up runs of each side, then ``--repeat`` rounds in which the sides run
in turn (load from other work hits them alike), each run once the JVM's garbage is collected
and the process tree is idle (``spark_measure.settle``); best wall time, median CPU times.

* append: ``hive_acid.insert(spark, t, df)`` (the JVM insert writer) and
  ``df.write.format("hive_acid").mode("append")`` (the Python data source) vs
  ``df.write.orc(dir)``; the ACID tables are created before the clock starts (the native
  side has no DDL either);
* scans, each a new DataFrame per run as a user makes it -- for the easy path
  ``hive_acid.read(spark, t)`` (lock, snapshot, listing and planning inside the time), for
  the Python data source ``spark.read.format("hive_acid").load(t)``, natively
  ``spark.read.orc(dir)``:

  - ``scan``: an aggregate of every column (nothing pruned);
  - ``projection``: an aggregate of 2 of the 4 columns (``s``, ``d``);
  - ``selective``: the full aggregate of the rows of a filter on one column (``id``) that
    keeps 1% of them (the data is sorted by ``id``: ORC's row-group statistics skip the
    rest, on both sides);
  - ``scan_5pct_deleted``: the full aggregate after deleting 5% of the rows (one delete
    delta), against a native scan of a copy without those rows;
  - ``python_floor``: the full aggregate through a Python data source that reads nothing
    (ready-made Arrow batches in the Python workers' memory): what any Python data source,
    ``format("hive_acid")`` included, costs at least.

Prints JSON: times (``*_s``: wall; ``*_cpu_s``: CPU of this process tree -- the Spark JVM of a
local master, Python workers, the metastore; ``*_task_cpu_s``: CPU of Spark's task threads,
executors of a cluster included, Python workers not) and ratios native/hive_acid
(``ratio_*`` wall, ``cpu_ratio_*``, ``task_cpu_ratio_*``; 1.0 = as fast as native), the
1-minute load average before and after, then one line per measurement.

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
from typing import Dict, Iterator, List, Optional, Tuple

from hms_bench.spark_measure import WARMUP, best, register_floor_source


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
                conf: Optional[Dict[str, str]] = None, log_level: Optional[str] = None,
                master: str = "local[2]") -> Iterator[Tuple[object, str]]:
    """``with local_spark("app") as (spark, work):`` a Spark session (local[2] unless
    ``master``) whose metastore is ``metastore``, or else a temporary ``hms-txn serve``,
    and a scratch directory. At exit hive_acid's transactions of this process end, Spark
    stops, the temporary metastore stops and the directory is removed."""
    work = tempfile.mkdtemp(prefix=f"{app_name}-")
    server = None
    try:
        if metastore is None:
            server, metastore = _start_metastore(work)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession
        builder = (SparkSession.builder.master(master).appName(app_name)
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


AGG = ["count(*) AS n", "sum(id) AS a", "sum(k) AS b", "sum(length(s)) AS c", "sum(d) AS e"]
PROJECTION = ["count(*) AS n", "sum(length(s)) AS c", "sum(d) AS e"]
DB = "hive_acid_bench"


def _record(res: dict, name: str, sides: List[str], got: List[dict]) -> None:
    for side, m in zip(sides, got):
        res[f"{name}_{side}_s"] = m["wall"]
        res[f"{name}_{side}_cpu_s"] = m["cpu"]
        res[f"{name}_{side}_task_cpu_s"] = m["task_cpu"]
    nat = got[0]
    for side, m in zip(sides[1:], got[1:]):
        suffix = "" if side in ("acid", "read") else f"_{side}"
        res[f"ratio_{name}{suffix}"] = nat["wall"] / m["wall"]
        res[f"cpu_ratio_{name}{suffix}"] = nat["cpu"] / m["cpu"] if m["cpu"] else float("nan")
        res[f"task_cpu_ratio_{name}{suffix}"] = (nat["task_cpu"] / m["task_cpu"]
                                                 if m["task_cpu"] else float("nan"))


def run(spark, rows: int, repeat: int, work: str, codec: str = "snappy") -> dict:
    from spark import hive_acid
    hive_acid.register(spark)
    # the same codec on both sides: Spark's ORC default is snappy, Hive's ZLIB
    spark.conf.set("spark.sql.orc.compression.codec", codec)
    props = {"orc.compress": {"snappy": "SNAPPY", "zlib": "ZLIB", "none": "NONE"}[codec]}
    parts = spark.sparkContext.defaultParallelism
    hive_acid.create_database(spark, DB, location="file:" + os.path.join(work, "acid"))
    df = spark.range(0, rows, numPartitions=parts).selectExpr(
        "id", "CAST(id % 1000 AS INT) AS k", "concat('value-', CAST(id % 9973 AS STRING)) AS s",
        "CAST(id AS DOUBLE) / 7 AS d").cache()
    df.count()
    res: dict = {"rows": rows, "partitions": parts, "codec": codec,
                 "master": spark.sparkContext.master}
    schema = "id BIGINT, k INT, s STRING, d DOUBLE"

    # appends: each run writes a fresh table / directory; the ACID tables are created
    # before timing (DDL is not part of an append, and the native side has none)
    n = [0]
    tables, inserted = [], []
    for i in range(2 * (repeat + WARMUP)):
        t = f"{DB}.append_{os.getpid()}_{i}"
        hive_acid.create_table(spark, t, schema, properties=props)
        tables.append(t)

    def acid_append():
        df.write.format("hive_acid").mode("append").save(tables.pop())

    def acid_insert():
        inserted.append(tables.pop())
        hive_acid.insert(spark, inserted[-1], df)

    def native_append():
        n[0] += 1
        df.write.mode("overwrite").orc(os.path.join(work, f"native_append_{n[0]}"))

    _record(res, "append", ["native", "acid", "insert"],
            best(spark, [native_append, acid_append, acid_insert], repeat))
    assert hive_acid.read(spark, inserted[-1]).selectExpr(*AGG).collect() == \
        spark.read.orc(os.path.join(work, f"native_append_{n[0]}")).selectExpr(*AGG).collect()

    # scans of the same data
    table = f"{DB}.scan_{os.getpid()}"
    hive_acid.create_table(spark, table, schema, properties=props)
    df.write.format("hive_acid").mode("append").save(table)
    native_dir = os.path.join(work, "native_scan")
    df.write.mode("overwrite").orc(native_dir)
    floor = register_floor_source(spark, rows, parts)

    def full(d):
        return d.selectExpr(*AGG)

    def projection(d):
        return d.selectExpr(*PROJECTION)

    def selective(d):
        return d.where(f"id < {rows // 100}").selectExpr(*AGG)

    def native(query, path):
        return lambda: query(spark.read.orc(path)).collect()

    def easy(query):
        return lambda: query(hive_acid.read(spark, table)).collect()

    def python_source(query):
        return lambda: query(spark.read.format("hive_acid").load(table)).collect()

    for name, query in (("scan", full), ("projection", projection), ("selective", selective)):
        assert native(query, native_dir)() == easy(query)(), name
    assert python_source(full)() == native(full, native_dir)()
    def python_floor():
        return full(spark.read.format(floor).load()).collect()

    assert python_floor() == native(full, native_dir)()
    _record(res, "scan", ["native", "read", "python_source", "python_floor"],
            best(spark, [native(full, native_dir), easy(full), python_source(full),
                         python_floor], repeat))
    _record(res, "projection", ["native", "read"],
            best(spark, [native(projection, native_dir), easy(projection)], repeat))
    _record(res, "selective", ["native", "read"],
            best(spark, [native(selective, native_dir), easy(selective)], repeat))

    hive_acid.delete(spark, table, "id % 20 = 0")        # 5% of the rows
    native_del = os.path.join(work, "native_scan_5pct")
    df.where("id % 20 <> 0").write.mode("overwrite").orc(native_del)
    got = easy(full)()
    assert got == native(full, native_del)() == python_source(full)()
    assert got[0].n == rows - (rows + 19) // 20
    _record(res, "scan_5pct_deleted", ["native", "read", "python_source"],
            best(spark, [native(full, native_del), easy(full), python_source(full)], repeat))
    df.unpersist()
    return res


SUMMARY = [("append", "hive_acid.insert", "append_insert", "ratio_append_insert"),
           ("append", "df.write.format('hive_acid')", "append_acid", "ratio_append"),
           ("scan", "hive_acid.read", "scan_read", "ratio_scan"),
           ("projection", "hive_acid.read", "projection_read", "ratio_projection"),
           ("selective", "hive_acid.read", "selective_read", "ratio_selective"),
           ("scan_5pct_deleted", "hive_acid.read", "scan_5pct_deleted_read",
            "ratio_scan_5pct_deleted"),
           ("scan", "format('hive_acid')", "scan_python_source", "ratio_scan_python_source"),
           ("scan_5pct_deleted", "format('hive_acid')", "scan_5pct_deleted_python_source",
            "ratio_scan_5pct_deleted_python_source"),
           ("scan", "Python data source floor", "scan_python_floor",
            "ratio_scan_python_floor")]


def summary(res: dict) -> str:
    """One line per measurement: native and hive_acid times (wall, CPU, task CPU), ratios."""
    out = [f"{'measurement':18} {'path':28} {'native s':>9} {'acid s':>8} {'ratio':>6} "
           f"{'cpu':>6} {'task cpu':>8}"]
    for name, path, key, ratio in SUMMARY:
        nat = f"{name}_native_s"
        cpu = ratio.replace("ratio_", "cpu_ratio_", 1)
        task = ratio.replace("ratio_", "task_cpu_ratio_", 1)
        out.append(f"{name:18} {path:28} {res[nat]:9.3f} {res[key + '_s']:8.3f} "
                   f"{res[ratio]:6.2f} {res[cpu]:6.2f} {res[task]:8.2f}")
    return "\n".join(out)


def _properties(path: str) -> Dict[str, str]:
    """A spark-defaults.conf (``key value`` lines, ``#`` comments)."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.partition(" ")
                out[key] = value.strip()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="hive_acid vs native ORC in Spark")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--metastore")
    ap.add_argument("--codec", default="snappy", choices=["snappy", "zlib", "none"])
    ap.add_argument("--master", help="Spark master URL (default local[2])")
    ap.add_argument("--properties-file", help="spark-defaults.conf of a cluster "
                    "(python -m hms_bench.cluster up writes one)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "2g"}
    if args.properties_file:
        conf.update(_properties(args.properties_file))
    conf.update(kv.split("=", 1) for kv in args.conf)
    master = args.master or conf.pop("spark.master", None) or "local[2]"
    with local_spark("hive-acid-bench", args.metastore, conf, log_level="ERROR",
                     master=master) as (spark, work):
        load_before = os.getloadavg()[0]
        res = run(spark, args.rows, args.repeat, work, args.codec)
        res["load_average_1m_before"] = load_before
        res["load_average_1m"] = os.getloadavg()[0]
        print(json.dumps(res, indent=2))
        print(summary(res))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
