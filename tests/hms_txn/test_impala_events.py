"""Impala's event processor reading our notification events (issue 35).

A replay in Python of what catalogd does with each event type it handles, on the messages
our builders make (``hms_txn.domain.event_messages``): which row columns and message getters
it uses, which it requires (``Preconditions.checkNotNull``), and the metastore call it
makes for COMMIT_TXN. Hive 4's getters are mimicked as Jackson binds the ``JSON*Message``
classes (a missing key reads as null), and ``MessageBuilder.getTObj`` reads a TJSON text
(a null one is a NullPointerException).

Source: apache/impala at b21595276c6c (/work/notes/events/impala.md),
``fe/src/main/java/org/apache/impala/catalog/events/MetastoreEvents.java`` ("ME") and
``fe/src/compat-hive-3/java/org/apache/impala/compat/MetastoreShim.java`` ("Shim"), with
the lines cited at each step.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from hms_txn.domain import event_messages as em
from hms_txn.domain.event_messages import formats
from tests.support.hive_messages.workload import (
    ACID, ACID_PART, CTX, DATABASE, DATABASE_AFTER, P1, P1_AFTER, P2, RENAMED, TABLE,
    UNPARTITIONED, WRITE, WRITE_UNPARTITIONED, cases, read_tjson, wire_doc)

CASES = {c.id: c for c in cases()}
FORMATS = ("json-0.2", "gzip(json-2.0)")


class NullPointerException(Exception):
    pass


def check_not_null(value, what: str):
    """Guava's Preconditions.checkNotNull."""
    if value is None:
        raise NullPointerException(what)
    return value


def get_tobj(text: str | None, kind: str) -> dict[str, Any]:
    """MessageBuilder.getTObj: TDeserializer + TJSONProtocol; a null text throws."""
    if text is None:
        raise NullPointerException(f"getTObj({kind}) of null")
    return read_tjson(kind, text)


class Deserializer:
    """The deserializer catalogd uses for every event: ``MessageFactory.getDefaultInstance(
    MetastoreConf.newMetastoreConf()).getDeserializer()`` (Shim:223-231), i.e. the format
    of catalogd's own ``metastore.event.message.factory``, whatever the row's
    MESSAGE_FORMAT says. The gzip one base64-decodes and gunzips first."""

    def __init__(self, configured_format: str):
        self.format = configured_format

    def message(self, text: str) -> dict[str, Any]:
        return json.loads(formats.decode_text(text, self.format))


def _bool(value) -> bool:          # Boolean.parseBoolean of the JSON string
    return str(value).lower() == "true"


def _write_id(body) -> int:        # getWriteId(): null reads as 0
    return 0 if body.get("writeId") is None else body["writeId"]


def _part_spec(table: dict, partition: dict) -> list[tuple[str, str]]:
    """ME:1371-1383 getTPartitionSpecFromHmsPartition."""
    keys = table.get("partitionKeys") or []
    values = check_not_null(partition.get("values"), "partVals")
    assert len(keys) == len(values), "Preconditions.checkState(fsList.size() == partVals.size())"
    return [(k["name"], v) for k, v in zip(keys, values)]


TABLE_TYPES = {"CREATE_TABLE", "DROP_TABLE", "ALTER_TABLE", "ADD_PARTITION", "DROP_PARTITION",
               "ALTER_PARTITION", "ALTER_PARTITIONS", "RELOAD", "INSERT", "COMMIT_COMPACTION_EVENT",
               "ALLOC_WRITE_ID_EVENT"}
DATABASE_TYPES = {"CREATE_DATABASE", "DROP_DATABASE", "ALTER_DATABASE"}


def impala_reads(row: dict[str, Any], de: Deserializer,
                 get_all_write_event_info: Callable[[int], list[dict]]) -> dict[str, Any]:
    """What catalogd takes from one NotificationEvent (MetastoreEventFactory.get, ME:200-243),
    or ``{"ignored": True}`` for a type it does not handle."""
    t = row["eventType"]
    # ME:650-663 the event's catalog, database and table are the row's columns
    seen: dict[str, Any] = {"cat": row["catName"], "db": row["dbName"], "table": row["tableName"]}
    # ME:289 an event on a catalog other than the default one is filtered out
    seen["filtered"] = row["catName"] is not None and row["catName"] != "hive"
    if t in TABLE_TYPES:
        check_not_null(row["dbName"], "Database name cannot be null")           # ME:1288
    if t in DATABASE_TYPES:
        check_not_null(row["dbName"], "Database name cannot be null")           # ME:1736
    m = de.message(check_not_null(row["message"], "Event message is null"))
    if t == "CREATE_TABLE":                                                     # ME:1814-1819
        seen["msTbl"] = get_tobj(m.get("tableObjJson"), "Table")
    elif t == "ALTER_TABLE":                                                    # ME:2100-2108
        seen["before"] = check_not_null(get_tobj(m.get("tableObjBeforeJson"), "Table"), "before")
        seen["after"] = check_not_null(get_tobj(m.get("tableObjAfterJson"), "Table"), "after")
        seen["isTruncateOp"] = _bool(m.get("isTruncateOp"))
        seen["writeId"] = _write_id(m)
    elif t == "DROP_TABLE":                                                     # ME:2572-2575
        seen["msTbl"] = check_not_null(get_tobj(m.get("tableObjJson"), "Table"), "table")
    elif t in ("CREATE_DATABASE", "DROP_DATABASE"):                 # ME:2653-2657, 2803-2808
        seen["database"] = check_not_null(get_tobj(m.get("dbJson"), "Database"), "database")
    elif t == "ALTER_DATABASE":                                                 # ME:2714-2718
        seen["database"] = check_not_null(get_tobj(m.get("dbObjAfterJson"), "Database"), "db")
    elif t == "ADD_PARTITION":                                                  # ME:2907-2918
        listed = check_not_null(m.get("partitionListJson"), "getTObjs of null")
        seen["partitions"] = [get_tobj(p, "Partition") for p in listed]
        seen["msTbl"] = get_tobj(m.get("tableObjJson"), "Table")
        seen["specs"] = [_part_spec(seen["msTbl"], p) for p in seen["partitions"]]
    elif t == "ALTER_PARTITION":                                                # ME:3022-3040
        seen["before"] = check_not_null(get_tobj(m.get("partitionObjBeforeJson"), "Partition"), "b")
        seen["after"] = check_not_null(get_tobj(m.get("partitionObjAfterJson"), "Partition"), "a")
        seen["isTruncateOp"] = _bool(m.get("isTruncateOp"))
        seen["msTbl"] = get_tobj(m.get("tableObjJson"), "Table")
        seen["spec"] = _part_spec(seen["msTbl"], seen["after"])
        seen["writeId"] = _write_id(m)
    elif t == "ALTER_PARTITIONS":                                               # Shim:628-650
        listed = check_not_null(m.get("partitionListJson"), "getTObjs of null")
        seen["partitions"] = [get_tobj(p, "Partition") for p in listed]
        seen["msTbl"] = check_not_null(get_tobj(m.get("tableObjJson"), "Table"), "table")
        seen["isTruncateOp"] = _bool(m.get("isTruncateOp"))
        seen["writeId"] = _write_id(m)
    elif t == "DROP_PARTITION":                                                 # ME:3440-3447
        seen["msTbl"] = check_not_null(get_tobj(m.get("tableObjJson"), "Table"), "table")
        seen["dropped"] = check_not_null(m.get("partitions"), "partitions")
    elif t == "INSERT":                                                         # ME:1937-1941
        seen["msTbl"] = check_not_null(get_tobj(m.get("tableObjJson"), "Table"), "table")
        ptn = m.get("ptnObjJson")
        seen["partition"] = None if ptn is None else get_tobj(ptn, "Partition")
        if seen["partition"] is not None:                                       # ME:1988
            seen["spec"] = _part_spec(seen["msTbl"], seen["partition"])
    elif t == "RELOAD":                                               # ME:3611, Shim:602-613
        seen["msTbl"] = check_not_null(get_tobj(m.get("tableObjJson"), "Table"), "table")
        ptn = m.get("ptnObjJson")
        seen["partition"] = None if ptn is None else get_tobj(ptn, "Partition")
        seen["isRefresh"] = _bool(m.get("refreshEvent"))
    elif t == "ALLOC_WRITE_ID_EVENT":                                           # ME:3529-3537
        txns = check_not_null(m.get("txnIdList"), "txnIdList")   # getTxnToWriteIdList
        wids = m.get("writeIdList")
        seen["tableWriteIds"] = [(t_, row["dbName"], row["tableName"], wids[i])
                                 for i, t_ in enumerate(txns)]
    elif t == "COMMIT_TXN":                                      # Shim:952-966, 1207-1217
        seen["txnId"] = m.get("txnid")
        writes = []
        for info in get_all_write_event_info(seen["txnId"]) or []:
            table = get_tobj(info.get("tableObj"), "Table")
            part = None
            if info.get("partitionObj") is not None:
                part = get_tobj(info["partitionObj"], "Partition")
            writes.append((info["writeId"], table, part))
        seen["writes"] = writes
    elif t == "ABORT_TXN":                                                      # ME:3798-3802
        seen["txnId"] = m.get("txnid")
    elif t == "COMMIT_COMPACTION_EVENT":                          # ME:3961-3965, Shim:662-666
        seen["partName"] = m.get("partName")
    else:
        return {"ignored": True}                                                # ME:241-242
    return seen


def _row(entry: em.LogEntry, fmt: str) -> dict[str, Any]:
    return {"eventType": entry.event_type, "catName": entry.cat_name, "dbName": entry.db_name,
            "tableName": entry.tbl_name, "messageFormat": fmt,
            "message": formats.encode(entry.message, fmt)}


WRITES = {55: [WRITE], 56: [WRITE_UNPARTITIONED]}


def _write_event_info(txn_id: int) -> list[dict]:
    """Our get_all_write_event_info: the write records of the transaction."""
    return [em.write_event_info(w) for w in WRITES.get(txn_id, [])]


def read(case_id: str, fmt: str) -> dict[str, Any]:
    seen = impala_reads(_row(CASES[case_id].entry, fmt), Deserializer(fmt), _write_event_info)
    assert not seen.get("filtered")
    return seen


def w(kind: str, doc: dict) -> dict:
    return wire_doc(kind, doc)


SPEC_P1 = [("ds", "2024-01-01"), ("region", "eu")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_database_events(fmt):
    assert read("create_database", fmt)["database"] == w("Database", DATABASE)
    assert read("alter_database", fmt)["database"] == w("Database", DATABASE_AFTER)
    seen = read("drop_database", fmt)
    assert (seen["db"], seen["database"]) == ("sales_db", w("Database", DATABASE))


@pytest.mark.parametrize("fmt", FORMATS)
def test_table_events(fmt):
    seen = read("create_table", fmt)
    assert (seen["db"], seen["table"], seen["msTbl"]) == ("sales_db", "sales", w("Table", TABLE))
    seen = read("alter_table", fmt)
    assert (seen["isTruncateOp"], seen["writeId"]) == (False, -1)
    # a rename: one event; Impala sees old and new names in the objects
    seen = read("rename_table", fmt)
    assert (seen["before"]["tableName"], seen["after"]["tableName"]) == ("sales", "sales_2024")
    assert seen["after"] == w("Table", RENAMED) and seen["table"] == "sales_2024"
    seen = read("truncate_table", fmt)
    assert (seen["isTruncateOp"], seen["writeId"]) == (True, 9)
    assert read("drop_table", fmt)["msTbl"] == w("Table", TABLE)


@pytest.mark.parametrize("fmt", FORMATS)
def test_partition_events(fmt):
    seen = read("add_partition", fmt)
    assert seen["partitions"] == [w("Partition", P1), w("Partition", P2)]
    assert seen["specs"] == [SPEC_P1, [("ds", "2024-01-02"), ("region", "us:west")]]
    seen = read("alter_partition", fmt)
    assert (seen["before"], seen["after"]) == (w("Partition", P1), w("Partition", P1_AFTER))
    assert (seen["spec"], seen["isTruncateOp"], seen["msTbl"]) == \
        (SPEC_P1, False, w("Table", TABLE))
    seen = read("alter_partitions", fmt)
    assert seen["partitions"] == [w("Partition", P1_AFTER), w("Partition", P2)]
    seen = read("drop_partition", fmt)
    # removePartitionsIfNotAddedLater matches these maps by partition column name (ME:3488-3490)
    assert seen["dropped"] == [dict(SPEC_P1), {"ds": "2024-01-02", "region": "us:west"}]
    assert seen["msTbl"] == w("Table", TABLE)


@pytest.mark.parametrize("fmt", FORMATS)
def test_insert_and_reload(fmt):
    seen = read("insert_partition", fmt)
    assert (seen["msTbl"], seen["partition"], seen["spec"]) == \
        (w("Table", TABLE), w("Partition", P1), SPEC_P1)
    assert read("insert_table", fmt)["partition"] is None
    seen = read("reload", fmt)
    assert (seen["partition"], seen["isRefresh"]) == (w("Partition", P1), True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_transaction_events(fmt):
    assert read("alloc_write_id", fmt)["tableWriteIds"] == [
        (55, "sales_db", "orders", 5), (56, "sales_db", "orders", 6)]
    seen = read("commit_txn", fmt)
    assert seen["txnId"] == 55
    assert seen["writes"] == [(5, w("Table", ACID), w("Partition", ACID_PART))]
    seen = read("commit_txn_key_value", fmt)           # our extra key changes nothing here
    assert (seen["txnId"], seen["writes"]) == (57, [])
    assert read("abort_txn", fmt)["txnId"] == 56
    assert read("commit_compaction", fmt)["partName"] == "ds=2024-01-01/region=eu"


def test_unpartitioned_write_has_no_partition_object():
    seen = impala_reads(_row(em.commit_txn(CTX, 56), "json-0.2"), Deserializer("json-0.2"),
                        _write_event_info)
    assert seen["writes"] == [(1, w("Table", UNPARTITIONED), None)]


@pytest.mark.parametrize("case_id", ["open_txn", "add_primarykey", "add_foreignkey",
                                     "add_uniqueconstraint", "drop_constraint",
                                     "update_table_col_stats", "update_part_col_stats",
                                     "delete_table_col_stats", "delete_part_col_stats",
                                     "create_function", "drop_function"])
def test_types_impala_ignores(case_id):
    seen = impala_reads(_row(CASES[case_id].entry, "json-0.2"), Deserializer("json-0.2"),
                        _write_event_info)
    assert seen == {"ignored": True}


def test_every_handled_type_is_replayed():
    handled = TABLE_TYPES | DATABASE_TYPES | {"COMMIT_TXN", "ABORT_TXN"}
    assert handled <= {c.entry.event_type for c in CASES.values()}


def test_catalogd_reads_only_its_configured_format():
    """A json-0.2 row under a catalogd configured for gzip (and the other way round) does not
    decode: catalogd's factory must name the format we write (README, configuration)."""
    entry = CASES["create_table"].entry
    with pytest.raises(Exception):
        impala_reads(_row(entry, "json-0.2"), Deserializer("gzip(json-2.0)"), _write_event_info)
    with pytest.raises(Exception):
        impala_reads(_row(entry, "gzip(json-2.0)"), Deserializer("json-0.2"), _write_event_info)


def test_old_shapes_fail_impala():
    """What issue 35 reported, replayed: a CREATE_DATABASE without dbJson and the old
    commit-time ALTER_TABLE without table objects stop Impala's event processor."""
    old_db = em.LogEntry("CREATE_DATABASE", {"server": "", "servicePrincipal": "",
                                             "db": "sales_db", "location": "file:/w"},
                         "sales_db", None, "hive")
    old_alter = em.LogEntry("ALTER_TABLE", {"db": "sales_db", "table": "sales",
                                            "isTruncateOp": "false", "writeId": -1},
                            "sales_db", "sales", "hive")
    for entry in (old_db, old_alter):
        with pytest.raises(NullPointerException):
            impala_reads(_row(entry, "json-0.2"), Deserializer("json-0.2"), _write_event_info)
