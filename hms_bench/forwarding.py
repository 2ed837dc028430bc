"""Extension mode's forwarding overhead: per-call latency through hms-txn vs direct.

    python -m hms_bench.forwarding [--upstream thrift://host:port] [--calls 2000]
                                       [--workdir DIR] [--json OUT]

Without ``--upstream`` the reference Java metastore 2.3 is started (PySpark's jars, about a
minute). hms-txn runs as its own ``hms-txn serve`` process in extension mode in front of
it (never in this process: sharing a GIL with the load generator would distort both).
One client per side makes the same calls one at a time, in interleaved blocks (direct,
through us, direct, ...) so drift hits both sides alike; the report gives p50/p90 per
method and the added latency at p50. Calls marked "(our cache)" are answered from our
read-through cache of upstream objects (tables, databases, functions, partitions) rather
than forwarded; "(memo)" from the upstream's own earlier answer to the same read, kept on
the table's cache entry; "(forwarded)" ones go to the upstream every time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time


DB, TABLE = "bench_fwd", "parts"


def _connect(port: int):
    from hms_txn.wire.client import Endpoint, connect
    return connect(Endpoint("127.0.0.1", port), timeout=120)


def _start_ours(upstream: str, workdir: str) -> tuple[subprocess.Popen, int]:
    data = os.path.join(workdir, "hms-txn")
    os.makedirs(data, exist_ok=True)
    conf = {"hms_txn.upstream.uris": upstream,
            "hive.metastore.warehouse.dir": os.path.join(data, "warehouse")}
    site = os.path.join(data, "hive-site.xml")
    with open(site, "w") as f:
        f.write('<?xml version="1.0"?>\n<configuration>\n' + "".join(
            f"<property><name>{k}</name><value>{v}</value></property>\n" for k, v in conf.items())
            + "</configuration>\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hms_txn.cli", "--log-level", "WARNING", "serve", "--conf", site,
         "--data-dir", data, "--port", "0", "--host", "127.0.0.1"],
        stdout=subprocess.PIPE, stderr=open(os.path.join(data, "serve.log"), "ab"), cwd=data, env=env)
    line = proc.stdout.readline().decode()
    match = re.search(r"listening on thrift://[\d.]+:(\d+)", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"hms-txn did not start: {line!r} (see {data}/serve.log)")
    return proc, int(match.group(1))


def _setup(client) -> None:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
    if DB in client.get_all_databases():
        client.drop_database(DB, True, True)
    client.create_database(t.Database(name=DB))
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema(f"c{i}", "string", None) for i in range(10)],
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat", compressed=False,
        numBuckets=-1, serdeInfo=t.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                                             parameters={}),
        bucketCols=[], sortCols=[], parameters={})
    client.create_table(t.Table(tableName=TABLE, dbName=DB, owner="bench", sd=sd,
                                partitionKeys=[t.FieldSchema("dt", "string", None)],
                                parameters={}, tableType="MANAGED_TABLE"))
    table = client.get_table(DB, TABLE)
    client.add_partitions([t.Partition(values=[f"2024-01-{d:02d}"], dbName=DB, tableName=TABLE,
                                       sd=table.sd, parameters={}) for d in range(1, 11)])
    for name in ("bench_upper", "bench_lower", "bench_hash"):
        client.create_function(t.Function(
            functionName=name, dbName=DB, className=f"com.example.udf.{name}", ownerName="bench",
            ownerType=t.PrincipalType.USER, createTime=int(time.time()),
            functionType=t.FunctionType.JAVA,
            resourceUris=[t.ResourceUri(resourceType=t.ResourceType.JAR, uri="file:///tmp/udf.jar")]))


# "(our cache)": answered from our read-through cache of upstream objects, not forwarded.
CALLS = {
    "get_all_databases (our cache)": lambda c: c.get_all_databases(),
    "get_database (our cache)": lambda c: c.get_database(DB),
    "get_table (our cache)": lambda c: c.get_table(DB, TABLE),
    "get_tables (our cache)": lambda c: c.get_tables(DB, "*"),
    "get_functions (our cache)": lambda c: c.get_functions(DB, "*"),
    "get_function (our cache)": lambda c: c.get_function(DB, "bench_upper"),
    "get_partition_names (our cache)": lambda c: c.get_partition_names(DB, TABLE, -1),
    "get_partitions(10) (our cache)": lambda c: c.get_partitions(DB, TABLE, -1),
    "get_partitions_ps_with_auth(1) (our cache)": lambda c: c.get_partitions_ps_with_auth(
        DB, TABLE, ["2024-01-05"], -1, "bench", []),
    "get_partitions_by_filter(1) (our cache)": lambda c: c.get_partitions_by_filter(
        DB, TABLE, "dt = '2024-01-05'", -1),
    "get_fields (our cache)": lambda c: c.get_fields(DB, TABLE),
    "get_partitions_ps(10) (memo)": lambda c: c.get_partitions_ps(DB, TABLE, [""], -1),
    "get_partition_with_auth(1) (forwarded)": lambda c: c.get_partition_with_auth(
        DB, TABLE, ["2024-01-05"], "bench", []),
}


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(direct, ours, calls: int, block: int = 20, warmup: int = 200) -> dict:
    out = {}
    for name, fn in CALLS.items():
        for _ in range(warmup):
            fn(direct)
            fn(ours)
        times = {"direct": [], "hms-txn": []}
        done = 0
        while done < calls:
            for side, client in (("direct", direct), ("hms-txn", ours)):
                samples = times[side]
                for _ in range(block):
                    start = time.perf_counter()
                    fn(client)
                    samples.append(time.perf_counter() - start)
            done += block
        d50, o50 = _pct(times["direct"], 0.5), _pct(times["hms-txn"], 0.5)
        out[name] = {
            "direct_p50_us": round(d50 * 1e6, 1), "ours_p50_us": round(o50 * 1e6, 1),
            "direct_p90_us": round(_pct(times["direct"], 0.9) * 1e6, 1),
            "ours_p90_us": round(_pct(times["hms-txn"], 0.9) * 1e6, 1),
            "direct_mean_us": round(statistics.fmean(times["direct"]) * 1e6, 1),
            "ours_mean_us": round(statistics.fmean(times["hms-txn"]) * 1e6, 1),
            "added_p50_us": round((o50 - d50) * 1e6, 1),
            "added_p50_pct": round(100 * (o50 - d50) / d50, 1),
        }
    return out


def report(results: dict) -> str:
    lines = [f"{'call':44} {'direct p50':>11} {'via us p50':>11} {'added':>9} {'added %':>8}"
             f" {'direct p90':>11} {'via us p90':>11}"]
    for name, r in results.items():
        lines.append(f"{name:44} {r['direct_p50_us']:>9.0f}us {r['ours_p50_us']:>9.0f}us "
                     f"{r['added_p50_us']:>7.0f}us {r['added_p50_pct']:>7.1f}% "
                     f"{r['direct_p90_us']:>9.0f}us {r['ours_p90_us']:>9.0f}us")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", help="thrift://host:port of a running metastore")
    parser.add_argument("--calls", type=int, default=2000, help="calls per method and side")
    parser.add_argument("--workdir", help="working directory (default: a temporary one)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="hms-fwd-bench-")
    java = None
    ours = None
    try:
        if args.upstream:
            upstream = args.upstream
        else:
            import socket

            from hms_bench.javahms import start_java_metastore
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                free = s.getsockname()[1]
            print("starting the Java metastore 2.3 ...", file=sys.stderr)
            java = start_java_metastore(free, os.path.join(workdir, "java"))
            upstream = java.uri
        port = int(upstream.rsplit(":", 1)[1])
        ours, our_port = _start_ours(upstream, workdir)
        direct, via = _connect(port), _connect(our_port)
        _setup(via)
        results = measure(direct, via, args.calls)
        via.drop_database(DB, True, True)
        print(report(results))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"upstream": upstream, "calls": args.calls, "results": results}, f, indent=1)
    finally:
        if ours is not None and ours.poll() is None:
            ours.send_signal(signal.SIGTERM)
            ours.wait(30)
        if java is not None:
            java.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
