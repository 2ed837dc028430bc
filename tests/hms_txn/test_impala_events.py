"""Impala's event processor reading our notification events (issue 35): the replay of
catalogd's reading (``tests/support/hive_messages/impala.py``, which cites Impala's source)
on the messages our builders make (``hms_txn.domain.events.event_messages``).
"""

from __future__ import annotations

from typing import Any

import pytest

from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events.event_messages import formats
from tests.support.hive_messages.impala import (
    DATABASE_TYPES, TABLE_TYPES, Deserializer, NullPointerException, impala_reads)
from tests.support.hive_messages.workload import (
    ACID, ACID_PART, CTX, DATABASE, DATABASE_AFTER, P1, P1_AFTER, P2, RENAMED, TABLE,
    UNPARTITIONED, WRITE, WRITE_UNPARTITIONED, cases, wire_doc)

CASES = {c.id: c for c in cases()}
FORMATS = ("json-0.2", "gzip(json-2.0)")


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
