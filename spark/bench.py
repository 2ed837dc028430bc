"""Benchmark: Spark hive_acid scans/appends vs Spark's native ORC on the same data.

    python -m spark.bench [--rows 2000000] [--repeat 3] [--metastore thrift://...] [--out f.json]

Starts a temporary ``hms-txn serve`` unless ``--metastore`` is given, and a local[2] Spark
session. Measures (best of ``--repeat`` after one warm-up):

* append: ``df.write.format("hive_acid").mode("append")`` vs ``df.write.orc(dir)``
  (same DataFrame, cached, same number of tasks, same codec: ``--codec``, default snappy,
  Spark's default; the ACID table gets ``orc.compress``);
* scan: ``spark.read.format("hive_acid").load(t)`` vs ``spark.read.orc(dir)`` with every
  column aggregated (so no column is pruned away), with no deletes and after deleting 5% of
  the rows (one delete delta);

and prints the ratios native/acid (throughput of hive_acid relative to native: 1.0 = as
fast; the issue's target is >= 0.5).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_metastore(work: str):
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
                raise SystemExit("metastore did not start")
            time.sleep(0.2)


def _best(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


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

    # appends: each run writes a fresh table / directory
    n = [0]

    def acid_append():
        n[0] += 1
        t = f"default.bench_append_{os.getpid()}_{n[0]}"
        hive_acid.create_table(spark, t, "id BIGINT, k INT, s STRING, d DOUBLE",
                               properties=props)
        df.write.format("hive_acid").mode("append").save(t)

    def native_append():
        n[0] += 1
        df.write.mode("overwrite").orc(os.path.join(work, f"native_append_{n[0]}"))

    res["append_native_s"] = _best(native_append, repeat)
    res["append_acid_s"] = _best(acid_append, repeat)

    # scans of the same data
    table = f"default.bench_scan_{os.getpid()}"
    hive_acid.create_table(spark, table, "id BIGINT, k INT, s STRING, d DOUBLE",
                           properties=props)
    df.write.format("hive_acid").mode("append").save(table)
    native_dir = os.path.join(work, "native_scan")
    df.write.mode("overwrite").orc(native_dir)

    def acid_scan():
        return spark.read.format("hive_acid").load(table).selectExpr(*AGG).collect()

    def native_scan():
        return spark.read.orc(native_dir).selectExpr(*AGG).collect()

    assert acid_scan() == native_scan()
    res["scan_native_s"] = _best(native_scan, repeat)
    res["scan_acid_s"] = _best(acid_scan, repeat)

    hive_acid.delete(spark, table, "id % 20 = 0")        # 5% of the rows
    native_del = os.path.join(work, "native_scan_5pct")
    df.where("id % 20 <> 0").write.mode("overwrite").orc(native_del)
    got = acid_scan()
    assert got == spark.read.orc(native_del).selectExpr(*AGG).collect()
    assert got[0].n == rows - (rows + 19) // 20
    res["scan_acid_5pct_deleted_s"] = _best(acid_scan, repeat)
    res["scan_native_of_same_rows_s"] = _best(
        lambda: spark.read.orc(native_del).selectExpr(*AGG).collect(), repeat)
    res["ratio_scan"] = res["scan_native_s"] / res["scan_acid_s"]
    res["ratio_scan_5pct_deleted"] = res["scan_native_s"] / res["scan_acid_5pct_deleted_s"]
    res["ratio_append"] = res["append_native_s"] / res["append_acid_s"]
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
    work = tempfile.mkdtemp(prefix="hive-acid-bench-")
    server = None
    uri = args.metastore
    if uri is None:
        server, uri = _start_metastore(work)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("hive-acid-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.memory", "2g")
             .config("spark.hadoop.hive.metastore.uris", uri).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        res = run(spark, args.rows, args.repeat, work, args.codec)
        res["load_average_1m"] = os.getloadavg()[0]
        print(json.dumps(res, indent=2))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=2)
    finally:
        from spark import hive_acid
        hive_acid.shutdown()
        spark.stop()
        if server is not None:
            server.terminate()
            server.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
