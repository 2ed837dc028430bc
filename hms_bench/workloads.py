"""Benchmark workloads: the same client code for hms-txn and the Java metastore.

A workload has

* ``setup(client, target)`` run once per server before any measuring (databases, tables,
  partitions, history), in the benchmark's own process;
* ``worker_setup(client, target, worker)`` run in each client process after it connects;
* ``run(client, state, i)`` one timed *operation* (``calls_per_op`` Thrift calls);
* optionally ``prepare(client, state, i)``: untimed work before each operation (e.g. a fresh
  table for add_partitions).

``target`` says which server the workload talks to: ``target.java`` is True for Hive 2.3
(no write ids, lock needs operationType), and ``target.name`` tells variants apart.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from thrift.Thrift import TException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

USER = "bench"
HOST = socket.gethostname()
ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"


@dataclass
class Target:
    name: str          # e.g. "java-derby", "hms-sqlite", "hms-sqlite-nocache"
    java: bool
    backend: str       # derby, sqlite, postgres
    cache: bool = True
    rest: str | None = None   # the server's Iceberg REST catalog (http://host:port/iceberg)


# ------------------------------------------------------------------ catalog helpers

def ensure_database(client, name: str) -> None:
    try:
        client.get_database(name)
        return
    except t.NoSuchObjectException:
        pass
    try:
        client.create_database(t.Database(name=name, description="benchmark", parameters={}))
    except t.AlreadyExistsException:
        pass


def storage(cols: list[tuple[str, str]], bucketed: bool) -> t.StorageDescriptor:
    return t.StorageDescriptor(
        cols=[t.FieldSchema(n, ty, None) for n, ty in cols],
        inputFormat=ORC_IN, outputFormat=ORC_OUT, compressed=False,
        numBuckets=2 if bucketed else -1,
        serdeInfo=t.SerDeInfo(name=None, serializationLib=ORC_SERDE, parameters={}),
        bucketCols=["id"] if bucketed else [], sortCols=[], parameters={})


def make_table(db: str, name: str, *, transactional: bool = False,
               partition_keys: list[str] | None = None) -> t.Table:
    params = {"transactional": "true"} if transactional else {"EXTERNAL": "FALSE"}
    cols = [("id", "bigint"), ("name", "string"), ("amount", "decimal(10,2)"), ("ts", "timestamp")]
    return t.Table(
        tableName=name, dbName=db, owner=USER, createTime=0, lastAccessTime=0, retention=0,
        sd=storage(cols, bucketed=transactional),
        partitionKeys=[t.FieldSchema(k, "string", None) for k in (partition_keys or [])],
        parameters=params, tableType="MANAGED_TABLE")


def ensure_table(client, table: t.Table) -> bool:
    """Create ``table`` unless it exists; True when it was created."""
    try:
        client.get_table_acid_aware(table.dbName, table.tableName)
        return False
    except t.NoSuchObjectException:
        pass
    client.create_table(table)
    return True


def make_partitions(table: t.Table, values: list[str]) -> list[t.Partition]:
    parts = []
    for v in values:
        sd = storage([(c.name, c.type) for c in table.sd.cols], bucketed=False)
        parts.append(t.Partition(values=[v], dbName=table.dbName, tableName=table.tableName,
                                 createTime=0, lastAccessTime=0, sd=sd, parameters={}))
    return parts


def add_partitions_chunked(client, table: t.Table, values: list[str], chunk: int = 250) -> None:
    for i in range(0, len(values), chunk):
        client.add_partitions(make_partitions(table, values[i:i + chunk]))


# ------------------------------------------------------------------ txn helpers

def open_txn(client, n: int = 1) -> list[int]:
    return list(client.open_txns(t.OpenTxnRequest(num_txns=n, user=USER, hostname=HOST)).txn_ids)


def commit(client, txn: int) -> None:
    client.commit_txn(t.CommitTxnRequest(txnid=txn))


def valid_txn_list(client) -> str:
    """The reader's ValidTxnList string from get_open_txns (Hive 3+ shape)."""
    from orc_acid.valid_ids import ValidTxnList
    resp = client.get_open_txns()
    opens = sorted(resp.open_txns or [])
    bits = resp.abortedBits or b""
    aborted = [x for i, x in enumerate(opens) if i // 8 < len(bits) and bits[i // 8] >> (i % 8) & 1]
    open_ids = [x for x in opens if x not in set(aborted)]
    return str(ValidTxnList(resp.txn_high_water_mark, open_ids, aborted, resp.min_open_txn))


def valid_write_id_list(client, full_name: str) -> str:
    from orc_acid.valid_ids import ValidWriteIdList
    txns = valid_txn_list(client)
    resp = client.get_valid_write_ids(t.GetValidWriteIdsRequest(fullTableNames=[full_name],
                                                                validTxnList=txns))
    tv = resp.tblValidWriteIds[0]
    bits = tv.abortedBits or b""
    inv = list(tv.invalidWriteIds or [])
    aborted = [x for i, x in enumerate(inv) if i // 8 < len(bits) and bits[i // 8] >> (i % 8) & 1]
    opens = [x for x in inv if x not in set(aborted)]
    return str(ValidWriteIdList(tv.fullTableName, tv.writeIdHighWaterMark, opens, aborted,
                                tv.minOpenWriteId))


def lock_and_wait(client, req: t.LockRequest) -> int:
    resp = client.lock(req)
    while resp.state == t.LockState.WAITING:
        resp = client.check_lock(t.CheckLockRequest(lockid=resp.lockid, txnid=req.txnid))
    if resp.state != t.LockState.ACQUIRED:
        raise RuntimeError(f"lock not acquired: {resp}")
    return resp.lockid


# ------------------------------------------------------------------ workloads

class Workload:
    name = ""
    description = ""
    calls_per_op = 1
    java = True                 # also run against the Java metastore
    clients = (1, 16)           # client counts in a full run
    quick_clients = (1, 2)
    has_prepare = False
    duration_scale = 1.0        # longer rounds for slow operations
    java_calls_note = ""        # when the Java variant makes different calls
    min_ops = 1                 # each client measures at least this many ops (slow ops)

    def setup(self, client, target: Target) -> None:
        pass

    def worker_setup(self, client, target: Target, worker: int) -> Any:
        return None

    def prepare(self, client, state: Any, i: int) -> None:  # pragma: no cover - optional
        pass

    def run(self, client, state: Any, i: int) -> None:
        raise NotImplementedError


class OpenCommit(Workload):
    name = "open_commit"
    description = "open_txns(1) + commit_txn"
    calls_per_op = 2

    def run(self, client, state, i):
        txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user=USER, hostname=HOST)).txn_ids[0]
        client.commit_txn(t.CommitTxnRequest(txnid=txn))


class Writer(Workload):
    name = "writer"
    description = ("open_txns + allocate_table_write_ids + lock(SHARED_WRITE) + commit_txn "
                   "(Java 2.3: open + lock + commit, it has no write ids)")
    calls_per_op = 4
    java_calls_note = "3 calls: Hive 2.3 has no allocate_table_write_ids"
    db = "bench_writer"

    def setup(self, client, target):
        ensure_database(client, self.db)
        for w in range(16):
            ensure_table(client, make_table(self.db, f"w{w}", transactional=True))

    def worker_setup(self, client, target, worker):
        return {"table": f"w{worker % 16}", "java": target.java}

    def run(self, client, state, i):
        txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user=USER, hostname=HOST)).txn_ids[0]
        if not state["java"]:
            client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                dbName=self.db, tableName=state["table"], txnIds=[txn]))
        lock_and_wait(client, t.LockRequest(
            component=[t.LockComponent(type=t.LockType.SHARED_WRITE, level=t.LockLevel.TABLE,
                                       dbname=self.db, tablename=state["table"],
                                       operationType=t.DataOperationType.INSERT,
                                       isTransactional=True)],
            txnid=txn, user=USER, hostname=HOST))
        client.commit_txn(t.CommitTxnRequest(txnid=txn))


class ValidWriteIds(Workload):
    name = "valid_write_ids"
    description = "get_valid_write_ids for 10 tables (a reader's snapshot)"
    java = False
    db = "bench_vwi"
    tables = [f"bench_vwi.t{i}" for i in range(10)]

    def setup(self, client, target):
        ensure_database(client, self.db)
        created = False
        for i in range(10):
            created |= ensure_table(client, make_table(self.db, f"t{i}", transactional=True))
        if not created:
            return
        # Some history: 20 committed writers to every table, 2 aborted, 1 left open.
        for k in range(23):
            txn = open_txn(client)[0]
            for i in range(10):
                client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                    dbName=self.db, tableName=f"t{i}", txnIds=[txn]))
            if k < 20:
                commit(client, txn)
            elif k < 22:
                client.abort_txn(t.AbortTxnRequest(txnid=txn))

    def worker_setup(self, client, target, worker):
        return valid_txn_list(client)

    def run(self, client, state, i):
        client.get_valid_write_ids(t.GetValidWriteIdsRequest(fullTableNames=self.tables,
                                                             validTxnList=state))


class GetTable(Workload):
    name = "get_table"
    description = ("get_table_req with the table's ValidWriteIdList (ours, cache on / off); "
                   "get_table (Java)")
    clients = (1, 8, 16)
    java_calls_note = "get_table (Hive 2.3 has no ValidWriteIdList)"
    db = "bench_gt"

    def setup(self, client, target):
        ensure_database(client, self.db)
        if ensure_table(client, make_table(self.db, "acid", transactional=True)) and not target.java:
            for k in range(5):  # a few committed writes so the snapshot is not trivial
                txn = open_txn(client)[0]
                client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                    dbName=self.db, tableName="acid", txnIds=[txn]))
                commit(client, txn)

    def worker_setup(self, client, target, worker):
        if target.java:
            return None
        # as HiveServer2 3/4 ask: with Hive 3's capability (a client that declares none
        # gets a full-ACID table in the plain form, hms_txn.domain.catalog.plain_form)
        return t.GetTableRequest(dbName=self.db, tblName="acid",
                                 validWriteIdList=valid_write_id_list(client, f"{self.db}.acid"),
                                 capabilities=t.ClientCapabilities(
                                     [t.ClientCapability.INSERT_ONLY_TABLES]))

    def run(self, client, state, i):
        if state is None:
            client.get_table(self.db, "acid")
        else:
            client.get_table_req(state)


class PartitionsByNames(Workload):
    name = "partitions_by_names"
    description = "get_partitions_by_names with 1,000 partition names"
    db = "bench_pbn"
    duration_scale = 1.5

    def setup(self, client, target):
        ensure_database(client, self.db)
        table = make_table(self.db, "parts", partition_keys=["p"])
        if ensure_table(client, table):
            add_partitions_chunked(client, table, [str(i) for i in range(1000)])

    def worker_setup(self, client, target, worker):
        return [f"p={i}" for i in range(1000)]

    def run(self, client, names, i):
        parts = client.get_partitions_by_names(self.db, "parts", names)
        if len(parts) != 1000:
            raise RuntimeError(f"expected 1000 partitions, got {len(parts)}")


class AddPartitions(Workload):
    name = "add_partitions"
    description = "add_partitions of 1,000 partitions (to a fresh table, created untimed)"
    has_prepare = True
    duration_scale = 3.0
    # Java 2.3 on Derby needs ~25 s per 1,000 partitions on this machine: 16 concurrent
    # clients would need ~7 min per operation, so this workload stops at 4 clients.
    clients = (1, 4)
    db = "bench_addp"

    def setup(self, client, target):
        ensure_database(client, self.db)

    def worker_setup(self, client, target, worker):
        return {"worker": worker, "pid": os.getpid(), "n": 0, "parts": None}

    def prepare(self, client, state, i):
        state["n"] += 1
        table = make_table(self.db, f"t_{state['pid']}_{state['worker']}_{state['n']}",
                           partition_keys=["p"])
        client.create_table(table)
        state["parts"] = make_partitions(table, [str(k) for k in range(1000)])

    def run(self, client, state, i):
        client.add_partitions(state["parts"])


class SparkPlanning(Workload):
    """The call mix of a Spark 4 SQL session (Hive 2.3 client) read from the Java audit log."""

    name = "spark_planning"
    description = ("Spark query-planning call mix per op: get_table x42, get_database x25, "
                   "get_partitions_ps_with_auth, get_tables, get_partitions, get_partition_names, "
                   "get_functions, get_databases, get_all_tables (1 each); one call per op")
    db = "bench_spark"
    MIX = ([("get_table", 42), ("get_database", 25)] +
           [(c, 1) for c in ("get_partitions_ps_with_auth", "get_tables", "get_partitions",
                             "get_partition_names", "get_functions", "get_databases",
                             "get_all_tables")])

    def setup(self, client, target):
        ensure_database(client, self.db)
        for k in range(3):
            ensure_table(client, make_table(self.db, f"dim{k}"))
        fact = make_table(self.db, "sales", partition_keys=["dt"])
        if ensure_table(client, fact):
            add_partitions_chunked(client, fact, [f"2024-01-{d:02d}" for d in range(1, 31)])

    def worker_setup(self, client, target, worker):
        import random
        seq = [name for name, n in self.MIX for _ in range(n)]
        random.Random(worker).shuffle(seq)
        return seq

    def run(self, client, seq, i):
        call = seq[i % len(seq)]
        db = self.db
        if call == "get_table":
            client.get_table(db, ("sales", "dim0", "dim1", "dim2")[i % 4])
        elif call == "get_database":
            client.get_database(db)
        elif call == "get_partitions_ps_with_auth":
            client.get_partitions_ps_with_auth(db, "sales", ["2024-01-15"], -1, USER, [])
        elif call == "get_tables":
            client.get_tables(db, "*")
        elif call == "get_partitions":
            client.get_partitions(db, "sales", -1)
        elif call == "get_partition_names":
            client.get_partition_names(db, "sales", -1)
        elif call == "get_functions":
            client.get_functions(db, "*")
        elif call == "get_databases":
            client.get_databases("*")
        elif call == "get_all_tables":
            client.get_all_tables(db)


class Locks(Workload):
    name = "locks"
    description = "txn-less lock(SHARED_READ on a table) + check_lock + unlock"
    calls_per_op = 3
    db = "bench_locks"

    def setup(self, client, target):
        ensure_database(client, self.db)
        ensure_table(client, make_table(self.db, "t"))

    def run(self, client, state, i):
        resp = client.lock(t.LockRequest(
            component=[t.LockComponent(type=t.LockType.SHARED_READ, level=t.LockLevel.TABLE,
                                       dbname=self.db, tablename="t",
                                       operationType=t.DataOperationType.SELECT)],
            user=USER, hostname=HOST))
        client.check_lock(t.CheckLockRequest(lockid=resp.lockid))
        client.unlock(t.UnlockRequest(lockid=resp.lockid))


def describe_error(err: BaseException) -> str:
    if isinstance(err, TException):
        return f"{type(err).__name__}: {getattr(err, 'message', None) or err}"
    return f"{type(err).__name__}: {err}"
