"""Impala's event processor reading notification events, replayed in Python: what catalogd
does with each event type it handles (``impala_reads``), which row columns and message
getters it uses, which it requires (``Preconditions.checkNotNull``), and the metastore call
it makes for COMMIT_TXN. Hive 4's getters are mimicked as Jackson binds the ``JSON*Message``
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

from hms_txn.domain.events.event_messages import formats
from tests.support.hive_messages.workload import read_tjson


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
