"""An everyday workload run over Thrift against a running server, recording for each
notification event the server should write what it must be about.

Databases, a partitioned table created over existing files, its partitions added (one
over existing files), altered, inserted into (``fire_listener_event``) and dropped, the
table renamed; a transactional table with ACID writes reported both ways
(``add_write_notification_log``, a commit's ``writeEventInfos``), an aborted and a
read-only transaction; in normal mode also a commit's ``keyValue`` and a compaction, in
extension mode functions; then everything dropped. The objects are read back through the
same server (``get_database``/``get_table``/``get_partition``), as a client sees them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

import orc_acid
from hms_txn.wire.codec import to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import local, make_table
from hms_txn.wire.client import table_request   # read as an ACID-aware engine does

DB = "ev_db"
KEYS = [("ds", "string"), ("region", "string")]
P1, P2 = ["2024-01-01", "eu"], ["2024-01-02", "us"]
P1_NAME, P2_NAME = "ds=2024-01-01/region=eu", "ds=2024-01-02/region=us"
MAJOR, READ_ONLY = 2, 2
ROWS = pa.table({"id": pa.array([1, 2], pa.int32()), "name": ["a", "b"]})


@dataclass
class Expected:
    """One event the server must write: its type and row columns, the objects it is about
    (``inputs``, as ``workload.Case`` has them), the Thrift struct of each object key of
    its message (``objects``) and values some keys must have (``checks``; a callable is
    given the whole message)."""
    event_type: str
    db: str | None
    table: str | None
    cat: str | None
    inputs: dict[str, Any] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)


@dataclass
class Run:
    """What ``run`` did: the events expected after ``start``, and each committed
    transaction's writes as (write id, table, partition or None, files)."""
    start: int
    expected: list[Expected]
    writes: dict[int, list[tuple[int, dict, dict | None, str]]]


def _file(path: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x")
    return path


def run(c, root: str, *, extension: bool,
        wait: Callable[[Callable[[], Any], str], Any]) -> Run:
    """The workload on client ``c``; files under ``root``. ``wait(predicate, what)`` polls
    to a deadline (the compaction is asynchronous)."""
    start = c.get_current_notificationEventId().eventId
    out: list[Expected] = []
    writes: dict[int, list] = {}

    def database():
        return to_doc(c.get_database(DB))

    def table(name):
        return to_doc(c.get_table_req(table_request(DB, name)).table)

    def part(name, values):
        return to_doc(c.get_partition(DB, name, values))

    def table_event(event_type, name, row_name=None, **kw):
        out.append(Expected(event_type, DB, row_name or name, "hive", **kw))

    # ------------------------------------------------------------------ databases
    db_loc = f"file:{root}/{DB}.db"
    c.create_database(t.Database(name=DB, description="events", locationUri=db_loc,
                                 parameters={"team": "sales"}))
    out.append(Expected("CREATE_DATABASE", DB, None, "hive", {"database": database()},
                        {"dbJson": "Database"}, {"db": DB}))
    before = database()
    c.alter_database(DB, t.Database(name=DB, description="events, audited", locationUri=db_loc,
                                    parameters={"team": "sales", "audited": "yes"}))
    out.append(Expected("ALTER_DATABASE", DB, None, "hive",
                        {"before": before, "after": database()},
                        {"dbObjBeforeJson": "Database", "dbObjAfterJson": "Database"}))

    # ------------------------------------------------------------------ a partitioned table
    loc = f"file:{root}/{DB}.db/sales"
    existing = "file:" + _file(f"{root}/{DB}.db/sales/000000_0")
    p1_loc, p2_loc = f"{loc}/{P1_NAME}", f"{loc}/{P2_NAME}"
    p1_file = "file:" + _file(f"{local(p1_loc)}/000000_0")
    c.create_table(make_table(DB, "sales", keys=KEYS, location=loc))
    table_event("CREATE_TABLE", "sales", inputs={"table": table("sales")},
                objects={"tableObjJson": "Table"},
                checks={"files": [existing + "###"], "tableType": "MANAGED_TABLE"})

    before = table("sales")
    tbl = c.get_table_req(table_request(DB, "sales")).table
    tbl.parameters["comment"] = "daily sales"
    c.alter_table(DB, "sales", tbl)
    table_event("ALTER_TABLE", "sales", inputs={"before": before, "after": table("sales")},
                objects={"tableObjBeforeJson": "Table", "tableObjAfterJson": "Table"},
                checks={"db": DB, "table": "sales", "isTruncateOp": "false", "writeId": -1})

    sd = c.get_table_req(table_request(DB, "sales")).table.sd
    c.add_partitions([t.Partition(dbName=DB, tableName="sales", values=v,
                                  sd=t.StorageDescriptor(**{**vars(sd), "location": p}))
                      for v, p in ((P1, p1_loc), (P2, p2_loc))])
    table_event("ADD_PARTITION", "sales",
                inputs={"table": table("sales"), "partitions": [part("sales", P1),
                                                                part("sales", P2)]},
                objects={"tableObjJson": "Table", "partitionListJson": "Partition"},
                checks={"partitionFiles": [
                    {"partitionName": P1_NAME, "files": [p1_file + "###"]},
                    {"partitionName": P2_NAME, "files": []}]})

    before = part("sales", P1)
    p = c.get_partition(DB, "sales", P1)
    p.parameters["checked"] = "yes"
    c.alter_partition(DB, "sales", p)
    table_event("ALTER_PARTITION", "sales",
                inputs={"table": table("sales"), "before": before, "after": part("sales", P1)},
                objects={"tableObjJson": "Table", "partitionObjBeforeJson": "Partition",
                         "partitionObjAfterJson": "Partition"},
                checks={"keyValues": dict(zip(["ds", "region"], P1)), "isTruncateOp": "false"})

    added = f"{p1_loc}/000001_0"
    c.fire_listener_event(t.FireEventRequest(
        successful=True, dbName=DB, tableName="sales", partitionVals=P1,
        data=t.FireEventRequestData(insertData=t.InsertEventRequestData(
            replace=False, filesAdded=[added]))))
    table_event("INSERT", "sales", inputs={"table": table("sales"), "partition": part("sales", P1)},
                objects={"tableObjJson": "Table", "ptnObjJson": "Partition"},
                checks={"files": [added + "###"], "replace": "false",
                        "partKeyVals": dict(zip(["ds", "region"], P1))})

    dropped, now = part("sales", P2), table("sales")
    c.drop_partition(DB, "sales", P2, False)
    table_event("DROP_PARTITION", "sales", inputs={"table": now, "partitions": [dropped]},
                objects={"tableObjJson": "Table"},
                checks={"partitions": [dict(zip(["ds", "region"], P2))]})

    before = table("sales")
    tbl = c.get_table_req(table_request(DB, "sales")).table
    tbl.tableName = "sales_2024"
    c.alter_table(DB, "sales", tbl)
    # one event: the row names the new table, the message the old one
    table_event("ALTER_TABLE", "sales", "sales_2024",
                inputs={"before": before, "after": table("sales_2024")},
                objects={"tableObjBeforeJson": "Table", "tableObjAfterJson": "Table"},
                checks={"db": DB, "table": "sales"})

    # ------------------------------------------------------------------ ACID writes
    acid = make_table(DB, "orders", params={"transactional": "true"})
    acid.sd.bucketCols, acid.sd.numBuckets = ["id"], 1        # Hive 2.3: ACID tables are bucketed
    c.create_table(acid)
    orders = table("orders")
    table_event("CREATE_TABLE", "orders", inputs={"table": orders},
                objects={"tableObjJson": "Table"}, checks={"files": []})

    def open_txn(txn_type=None):
        (txn,) = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h",
                                              txn_type=txn_type)).txn_ids
        if txn_type != READ_ONLY:
            out.append(Expected("OPEN_TXN", None, None, None,
                                checks={"txnIds": None, "fromTxnId": txn, "toTxnId": txn}))
        return txn

    def write(txn):
        wid = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName=DB, tableName="orders", txnIds=[txn])).txnToWriteIds[0].writeId
        out.append(Expected("ALLOC_WRITE_ID_EVENT", DB, "orders", None,
                            checks={"dbName": DB, "tableName": "orders", "txnIdList": [txn],
                                    "writeIdList": [wid]}))
        (path,) = orc_acid.write_delta(local(orders["sd"]["location"]), wid, 0, 0, ROWS)
        return wid, "file:" + path, os.path.basename(os.path.dirname(path))

    def committed(txn, **extra):
        c.commit_txn(t.CommitTxnRequest(txnid=txn, **extra))
        out.append(Expected("COMMIT_TXN", None, None, None,
                            checks={"txnid": txn, "writeIds": None, "files": None}))

    t1 = open_txn()
    w1, f1, d1 = write(t1)
    c.add_write_notification_log(t.WriteNotificationLogRequest(
        txnId=t1, writeId=w1, db=DB, table="orders",
        fileInfo=t.InsertEventRequestData(filesAdded=[f1], subDirectoryList=[d1])))
    committed(t1)
    writes[t1] = [(w1, orders, None, f"{f1}###{d1}")]

    t2 = open_txn()
    w2, f2, d2 = write(t2)
    committed(t2, writeEventInfos=[t.WriteEventInfo(writeId=w2, database=DB, table="orders",
                                                    files=f"{d2}/{os.path.basename(f2)}")])
    writes[t2] = [(w2, orders, None, f"{f2}###{d2}")]

    t3 = open_txn()
    write(t3)
    c.abort_txn(t.AbortTxnRequest(txnid=t3))
    out.append(Expected("ABORT_TXN", None, None, None, checks={"txnid": t3}))

    r = open_txn(READ_ONLY)                       # no events at all
    c.commit_txn(t.CommitTxnRequest(txnid=r))

    if extension:
        c.create_function(t.Function(functionName="to_eur", dbName=DB, className="x.ToEur",
                                     ownerName="alice", ownerType=1, createTime=1_700_000_000,
                                     functionType=1, resourceUris=[]))
        function = to_doc(c.get_function(DB, "to_eur"))
        out.append(Expected("CREATE_FUNCTION", DB, None, "hive", {"function": function},
                            {"functionObjJson": "Function"}))
        c.drop_function(DB, "to_eur")
        out.append(Expected("DROP_FUNCTION", DB, None, "hive", {"function": function},
                            checks={"functionName": "to_eur"}))
    else:
        before = table("orders")
        tbl = c.get_table_req(table_request(DB, "orders")).table
        tbl.parameters["_meta.progress"] = "0"
        c.alter_table(DB, "orders", tbl)
        table_event("ALTER_TABLE", "orders", inputs={"before": before, "after": table("orders")},
                    objects={"tableObjBeforeJson": "Table", "tableObjAfterJson": "Table"})
        t4 = open_txn()
        # Hive writes no ALTER_TABLE for the keyValue: COMMIT_TXN names the table for caches
        committed(t4, keyValue=t.CommitTxnKeyValue(tableId=tbl.id, key="_meta.progress",
                                                   value="7"))
        out[-1].checks["hmsTxnAlteredTables"] = [{"db": DB, "table": "orders"}]

        c.compact2(t.CompactionRequest(dbname=DB, tablename="orders", type=MAJOR))
        wait(lambda: any(e.eventType == "COMMIT_COMPACTION_EVENT" for e in
                         c.get_next_notification(t.NotificationEventRequest(
                             lastEvent=start)).events), "the compaction's commit")
        # the worker's transaction: OPEN_TXN, COMMIT_TXN, then COMMIT_COMPACTION_EVENT
        out.append(Expected("OPEN_TXN", None, None, None, checks={"txnIds": None}))
        out.append(Expected("COMMIT_TXN", None, None, None, checks={"files": None}))
        out.append(Expected("COMMIT_COMPACTION_EVENT", DB, "orders", None,
                            checks={"type": "MAJOR", "dbname": DB, "tableName": "orders",
                                    "partName": None}))

    # ------------------------------------------------------------------ drops
    for name in ("sales_2024", "orders"):
        doc = table(name)
        c.drop_table(DB, name, False)
        table_event("DROP_TABLE", name, inputs={"table": doc}, objects={"tableObjJson": "Table"})
    doc = database()
    c.drop_database(DB, False, False)
    out.append(Expected("DROP_DATABASE", DB, None, "hive", {"database": doc},
                        {"dbJson": "Database"}))
    return Run(start, out, writes)
