"""The transaction calls on PostgreSQL, in-process: our CPU and the statements per call.

    python -m hms_bench.pg_calls                   # every call, 2,000 per sample, best of 5
    python -m hms_bench.pg_calls --calls open_commit,writer --count 500

A durable PostgreSQL cluster of its own (fsync, synchronous_commit and full_page_writes
on: ``hms_bench.servers.BenchPostgres``) and one ``Metastore`` in this process, called
through its service objects (Thrift's decoding and encoding left out: they are the same
on either path). For each call it prints, per operation: process CPU (our side only: the
database server is another process; the calling thread's CPU, ``time.thread_time``: the
call runs entirely in it, and the process's would add the background threads' polling,
which grows with the wall time), wall time, and the round trips to the database: the
statements sent (each one a round trip) plus the BEGIN and COMMIT of every database
transaction that was not in autocommit. CPU is what this shared machine measures best;
the wall times need a quiet machine.

Operations (one client, one at a time):

* ``open_commit``: ``open_txns(1)`` + ``commit_txn`` (a read-only query's pair);
* ``writer``: ``open_txns`` + ``allocate_table_write_ids`` + ``lock(SHARED_WRITE)`` +
  ``commit_txn`` (an INSERT's calls);
* ``abort``: ``open_txns`` + ``abort_txn``;
* ``heartbeat``, ``get_open_txns``, ``check_lock`` (of an acquired lock),
  ``heartbeat_txn_range`` (10 open transactions): one call;
* ``valid_write_ids``: ``get_valid_write_ids`` of 10 tables with the reader's ValidTxnList
  (what HiveServer2, Trino and Impala send), ``valid_write_ids_nosnap`` without it.
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import threading
import time

from sqlalchemy import event

# abort last: the transactions it aborts stay in every later snapshot
OPERATIONS = ("open_commit", "writer", "heartbeat", "get_open_txns", "check_lock",
              "heartbeat_txn_range", "valid_write_ids", "valid_write_ids_nosnap", "abort")


class _RoundTrips:
    """Counts this thread's statements and the BEGIN/COMMIT of its non-autocommit
    transactions on the store's engine."""

    def __init__(self, engine):
        self.count = 0
        self._me = threading.get_ident()
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)
        event.listen(engine, "rollback", self._commit)

    def _statement(self, conn, *_args) -> None:
        if threading.get_ident() == self._me:
            self.count += 1

    def _commit(self, conn) -> None:
        if threading.get_ident() == self._me and not conn.connection.driver_connection.autocommit:
            self.count += 2          # the BEGIN psycopg sent before the first statement, and this


def _operations(ms):
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
    txn = ms.txn_service
    locks = ms.lock_service
    tables = [f"bench.t{i}" for i in range(10)]

    def open1():
        return txn.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]

    def commit(txn_id):
        txn.commit_txn(t.CommitTxnRequest(txnid=txn_id))

    def writer():
        txn_id = open1()
        txn.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="bench", tableName="w", txnIds=[txn_id]))
        locks.lock(t.LockRequest(component=[t.LockComponent(
            type=t.LockType.SHARED_WRITE, level=t.LockLevel.TABLE, dbname="bench",
            tablename="w", operationType=t.DataOperationType.INSERT, isTransactional=True)],
            txnid=txn_id, user="u", hostname="h"))
        commit(txn_id)

    # history for the snapshot calls: 20 committed, 2 aborted and 1 open write id per table
    for name in tables:
        db, table = name.split(".")
        for i in range(23):
            txn_id = open1()
            txn.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                dbName=db, tableName=table, txnIds=[txn_id]))
            if i < 20:
                commit(txn_id)
            elif i < 22:
                txn.abort_txn(t.AbortTxnRequest(txnid=txn_id))
    snapshot = txn.get_open_txns()
    opened = sorted(snapshot.open_txns)
    aborted = [x for i, x in enumerate(opened)
               if snapshot.abortedBits and i // 8 < len(snapshot.abortedBits)
               and snapshot.abortedBits[i // 8] >> (i % 8) & 1]
    still_open = [x for x in opened if x not in aborted]
    valid_txns = (f"{snapshot.txn_high_water_mark}:{min(still_open) if still_open else 9**18}:"
                  f"{','.join(map(str, still_open))}:{','.join(map(str, aborted))}")
    held = open1()
    lock_id = locks.lock(t.LockRequest(component=[t.LockComponent(
        type=t.LockType.SHARED_READ, level=t.LockLevel.TABLE, dbname="bench", tablename="r",
        operationType=t.DataOperationType.SELECT, isTransactional=True)],
        txnid=held, user="u", hostname="h")).lockid
    ranged = txn.open_txns(t.OpenTxnRequest(num_txns=10, user="u", hostname="h")).txn_ids

    return {
        "open_commit": (2, lambda: commit(open1())),
        "writer": (4, writer),
        "abort": (2, lambda: txn.abort_txn(t.AbortTxnRequest(txnid=open1()))),
        "heartbeat": (1, lambda: txn.heartbeat(t.HeartbeatRequest(txnid=held))),
        "get_open_txns": (1, txn.get_open_txns),
        "check_lock": (1, lambda: locks.check_lock(t.CheckLockRequest(lockid=lock_id))),
        "heartbeat_txn_range": (1, lambda: txn.heartbeat_txn_range(
            t.HeartbeatTxnRangeRequest(min=ranged[0], max=ranged[-1]))),
        "valid_write_ids": (1, lambda: txn.get_valid_write_ids(t.GetValidWriteIdsRequest(
            fullTableNames=tables, validTxnList=valid_txns))),
        "valid_write_ids_nosnap": (1, lambda: txn.get_valid_write_ids(
            t.GetValidWriteIdsRequest(fullTableNames=tables))),
    }


def _measure(ms, names, count: int, rounds: int, out: dict) -> None:
    ops = _operations(ms)
    trips = _RoundTrips(ms.store.engine)
    for name in names:
        calls, op = ops[name]
        for _ in range(min(count, 300)):      # warm: psycopg prepares after 5 runs
            op()
        gc.collect()
        best_wall = best_cpu = float("inf")
        per_op = 0.0
        for _ in range(rounds):
            trips.count = 0
            w0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(count):
                op()
            best_wall = min(best_wall, (time.perf_counter() - w0) / count * 1e6)
            best_cpu = min(best_cpu, (time.thread_time() - c0) / count * 1e6)
            per_op = trips.count / count
        out[name] = {"calls": calls, "cpu_us": round(best_cpu), "wall_us": round(best_wall),
                     "round_trips": round(per_op, 2)}
        print(f"{name:24} {calls} call(s)  CPU {best_cpu:7.0f} us  wall {best_wall:7.0f} us"
              f"  round trips {per_op:5.2f}", flush=True)


def measure(names, count: int, rounds: int) -> dict:
    from hms_bench.servers import BenchPostgres
    from hms_txn.common.config import Config
    from hms_txn.server.metastore import Metastore
    pg = BenchPostgres().start()
    out = {}
    try:
        data = tempfile.mkdtemp(prefix="hms-pg-calls-")
        ms = Metastore(Config({"hive.metastore.warehouse.dir": data + "/wh",
                               "javax.jdo.option.ConnectionURL": pg.create_database(),
                               "javax.jdo.option.ConnectionUserName": pg.user,
                               "hive.compactor.initiator.on": "false"}), data_dir=data)
        ms.start()
        try:
            _measure(ms, names, count, rounds, out)
        finally:
            ms.close()
    finally:
        pg.stop()
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", default=",".join(OPERATIONS))
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    names = [n for n in args.calls.split(",") if n]
    unknown = set(names) - set(OPERATIONS)
    if unknown:
        parser.error(f"unknown calls {sorted(unknown)}; known: {', '.join(OPERATIONS)}")
    results = measure(names, args.count, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
