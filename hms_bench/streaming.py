"""Streaming ingest benchmark: ``python -m hms_bench.streaming [--seconds 20]
[--rows-per-txn 10000] [--batch 10] [--uri thrift://host:port]``.

One writer (``hms_txn.streaming``) commits transactions back to back for ``--seconds``
(batches of ``--batch`` transactions, ``--rows-per-txn`` rows each: id bigint, ts bigint,
name string, payload string) while a reader *process* takes a fresh snapshot (open txns +
``get_valid_write_ids``) and reads the table's ``id`` column with ``orc_acid.read_table``
as often as it can. Reported:

* sustained ingest: committed rows/s and commits/s over the whole run (encode + append +
  intermediate footer + fsync + side file + commit_txn, plus the metastore round trips of
  each batch: open_txns, allocate_table_write_ids, one lock per transaction);
* visibility delay per transaction: first reader poll that saw it minus the time its
  commit returned (p50/p99/max), and the reader's poll period;
* delta directories created (one per batch).

Without ``--uri`` an ``hms-txn serve`` process (SQLite) is started for the run (our server
never shares the benchmark's interpreter). Not a test: numbers depend on the machine.
Prints (and with ``--out`` writes) one JSON object.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

from hms_bench.results import emit_json

TABLE = "default.stream_bench"


def _snapshot(client, full_name: str):
    from hms_txn.clients.snapshots import valid_txn_list, valid_write_id_list
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    vt = valid_txn_list(client.get_open_txns())
    tw = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=[full_name], validTxnList=str(vt))).tblValidWriteIds[0]
    return vt, valid_write_id_list(tw)


def _reader(uri: str, location: str, rows_per_txn: int, stop, out) -> None:
    import orc_acid
    from hms_txn.wire.client import connect
    client = connect(uri, timeout=600)
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("name", pa.string()),
                        ("payload", pa.string())])
    polls = []                       # (time the read finished, highest txn seq visible)
    while not stop.is_set():
        vt, wl = _snapshot(client, TABLE)
        t = orc_acid.read_table(location, wl, valid_txns=vt, schema=schema, columns=["id"])
        top = -1
        if t.num_rows:
            top = int(pa.compute.max(t.column("id")).as_py()) // rows_per_txn
        polls.append((time.time(), top))
    out.send(polls)
    out.close()


def run(uri: str, seconds: float, rows_per_txn: int, batch: int, fsync: bool = True) -> dict:
    from hms_txn.clients import streaming_ingest as streaming
    from hms_txn.wire.client import connect as connect_client
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    import orc_acid.streaming_writer  # noqa: F401  (imports outside the timed window)
    from orc_acid.layout import location_path
    import pyarrow.orc  # noqa: F401
    client = connect_client(uri, timeout=600)
    db, name = TABLE.split(".")
    try:
        client.drop_table(db, name, True)
    except T.NoSuchObjectException:
        pass
    sd = T.StorageDescriptor(
        cols=[T.FieldSchema("id", "bigint"), T.FieldSchema("ts", "bigint"),
              T.FieldSchema("name", "string"), T.FieldSchema("payload", "string")],
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=T.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde"),
        numBuckets=-1)
    client.create_table(T.Table(tableName=name, dbName=db, owner="bench", sd=sd,
                                partitionKeys=[], tableType="MANAGED_TABLE",
                                parameters={"transactional": "true"}))
    location = location_path(client.get_table_acid_aware(db, name).sd.location)

    rng = np.random.default_rng(7)
    payload = pa.array([rng.bytes(24).hex() for _ in range(rows_per_txn)])
    names = pa.array([f"user{i % 1000}" for i in range(rows_per_txn)])

    stop = mp.Event()
    recv, send = mp.Pipe(duplex=False)
    reader = mp.get_context("fork").Process(
        target=_reader, args=(uri, location, rows_per_txn, stop, send), daemon=True)
    reader.start()
    conn = streaming.connect(uri, TABLE, heartbeat_interval=30, fsync=fsync,
                             max_buffered_rows=max(rows_per_txn, 1))
    commit_done = []
    t0 = time.time()
    k = 0
    write_s = commit_s = 0.0
    while time.time() - t0 < seconds:
        if conn.batch is None or conn.batch.closed:
            conn.begin_batch(batch)
        base = k * rows_per_txn
        data = pa.table({"id": pa.array(np.arange(base, base + rows_per_txn, dtype=np.int64)),
                         "ts": pa.array(np.full(rows_per_txn, int(time.time() * 1000),
                                                dtype=np.int64)),
                         "name": names, "payload": payload})
        a = time.perf_counter()
        conn.write(data)
        b = time.perf_counter()
        conn.commit()
        commit_done.append(time.time())
        write_s += b - a
        commit_s += time.perf_counter() - b
        k += 1
    elapsed = time.time() - t0
    batches = conn.batches_done + (1 if conn.batch is not None and not conn.batch.closed else 0)
    conn.close()
    time.sleep(2.0)                  # let the reader see the last commits
    stop.set()
    polls = recv.recv()
    reader.join(30)
    delays = []
    pi = 0
    for seq, done in enumerate(commit_done):
        while pi < len(polls) and polls[pi][1] < seq:
            pi += 1
        if pi < len(polls):
            delays.append(max(0.0, polls[pi][0] - done))
    d = np.array(delays) if delays else np.array([float("nan")])
    poll_gaps = np.diff([p[0] for p in polls]) if len(polls) > 1 else np.array([float("nan")])
    deltas = len([n for n in os.listdir(location) if n.startswith("delta_")])
    client.close()
    rows = k * rows_per_txn
    return {
        "rows_per_txn": rows_per_txn, "batch": batch, "fsync": fsync,
        "seconds": round(elapsed, 2), "commits": k, "rows": rows,
        "rows_per_s": round(rows / elapsed), "commits_per_s": round(k / elapsed, 1),
        "write_ms_per_txn": round(write_s / max(k, 1) * 1000, 2),
        "flush_commit_ms_per_txn": round(commit_s / max(k, 1) * 1000, 2),
        "visibility_delay_ms": {"p50": round(float(np.percentile(d, 50)) * 1000),
                                "p99": round(float(np.percentile(d, 99)) * 1000),
                                "max": round(float(d.max()) * 1000),
                                "seen": len(delays)},
        "reader_poll_ms_p50": round(float(np.median(poll_gaps)) * 1000),
        "delta_dirs": deltas, "batches": batches,
        "bytes_on_disk": sum(os.path.getsize(os.path.join(r, f))
                             for r, _, fs in os.walk(location) for f in fs),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", help="an existing metastore (default: start hms-txn serve)")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rows-per-txn", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--no-fsync", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    tmp = None
    server = None
    uri = args.uri
    if uri is None:
        from hms_bench.servers import OurServer
        tmp = tempfile.mkdtemp(prefix="hms-stream-bench-")
        server = OurServer("hms-txn", tmp, {
            "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{tmp}/metastore.sqlite"})
        uri = f"thrift://127.0.0.1:{server.port}"
    try:
        results = [run(uri, args.seconds, n, args.batch, fsync=not args.no_fsync)
                   for n in args.rows_per_txn]
    finally:
        if server is not None:
            server.stop()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    report = {"benchmark": "streaming ingest, one writer", "cpus": os.cpu_count(),
              "runs": results}
    emit_json(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
