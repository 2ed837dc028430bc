"""Notification messages that Hive's own classes read (issue 35).

(a) The keys, key order and value types of every message our builders make
    (``hms_txn.domain.events.event_messages``) against the ``@JsonProperty`` fields of Hive 4's
    ``JSON*Message`` class for its event type (``tests/support/hive_messages/hive4_classes``,
    which cites the classes), the TJSON objects they carry read back, and the
    NOTIFICATION_LOG columns DbNotificationListener sets.
(b) Every message decoded inside the JVM with Hive 2.3's ``JSONMessageDeserializer``
    (PySpark's hive-metastore-2.3.10.jar), calling every getter and comparing the decoded
    objects with the objects the messages were built from; in json-0.2 and in gzip(json-2.0).
(c) The control: the same harness fed with the messages Hive 2.3's own
    ``JSONMessageFactory`` builds for the same objects, checked by the same expectations.
"""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from hms_txn.common import config
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events.event_messages import formats
from tests.support.hive_messages import jvm
from tests.support.hive_messages.hive23 import (
    HIVE23_TYPES, OBJECT_INPUT, check_control, check_decoded, check_objects, control_input,
    harness_errors)
from tests.support.hive_messages.hive4_classes import HIVE4, check_message
from tests.support.hive_messages.workload import (
    ACID, ACID_PART, CTX, FILES, NOW, P1, P1_FILES, P2, TABLE, UNPARTITIONED, WRITE,
    WRITE_UNPARTITIONED, cases, read_tjson, wire_doc)

CASES = {c.id: c for c in cases()}

# ---------------------------------------------------------------- (a) Hive 4's message classes

@pytest.mark.parametrize("case_id", sorted(CASES))
def test_keys_and_types_are_those_of_hive4_message_class(case_id):
    message = CASES[case_id].entry.message
    check_message(CASES[case_id].entry.event_type, message, (em.ALTERED_TABLES_KEY,))
    # the message encodes to JSON and back unchanged
    assert json.loads(formats.encode(message)) == message


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_objects_are_tjson_of_the_inputs(case_id):
    """Every TJSON key reads back (MessageBuilder.getTObj, here with the Python Thrift
    library) as exactly the object the message was built from."""
    case = CASES[case_id]
    _cls, fields = HIVE4[case.entry.event_type]
    checked = 0
    for key, jtype in fields:
        value = case.entry.message.get(key)
        if not jtype.lstrip("[").startswith("tjson:") or value is None:
            continue
        kind = jtype.strip("[]").split(":")[1]
        source = case.inputs[OBJECT_INPUT.get(key, "list")]
        if jtype.startswith("["):
            assert [read_tjson(kind, v) for v in value] == [wire_doc(kind, d) for d in source]
        else:
            assert read_tjson(kind, value) == wire_doc(kind, source)
        checked += 1
    present = [k for k, t in fields if "tjson" in t and case.entry.message.get(k) is not None]
    assert checked == len(present)


# DB_NAME, TBL_NAME, CAT_NAME of the row, as DbNotificationListener sets them.
ROWS = {
    "create_database": ("sales_db", None, "hive"), "alter_database": ("sales_db", None, "hive"),
    "drop_database": ("sales_db", None, "hive"),
    "create_table": ("sales_db", "sales", "hive"), "alter_table": ("sales_db", "sales", "hive"),
    "rename_table": ("sales_db", "sales_2024", "hive"),      # the new name; the message: old
    "drop_table": ("sales_db", "sales", "hive"), "add_partition": ("sales_db", "sales", "hive"),
    "alter_partition": ("sales_db", "sales", "hive"),
    "drop_partition": ("sales_db", "sales", "hive"),
    "insert_partition": ("sales_db", "sales", "hive"), "reload": ("sales_db", "sales", "hive"),
    "create_function": ("sales_db", None, "hive"), "drop_function": ("sales_db", None, "hive"),
    "add_primarykey": ("sales_db", "sales", "hive"),
    "add_foreignkey": ("sales_db", "sales", "hive"),       # the parent (pktable) table
    "drop_constraint": ("sales_db", "sales", "hive"),
    "update_table_col_stats": ("sales_db", "sales", "hive"),
    "delete_table_col_stats": ("sales_db", "sales", "hive"),
    "update_part_col_stats": ("sales_db", "sales", "hive"),
    "delete_part_col_stats": ("sales_db", "sales", "hive"),
    "open_txn": (None, None, None), "commit_txn": (None, None, None),
    "abort_txn": (None, None, None),
    "alloc_write_id": ("sales_db", "orders", None),
    "commit_compaction": ("sales_db", "orders", None),
}


@pytest.mark.parametrize("case_id", sorted(ROWS))
def test_row_columns_are_hives(case_id):
    entry = CASES[case_id].entry
    assert (entry.db_name, entry.tbl_name, entry.cat_name) == ROWS[case_id]


def test_common_fields():
    for case in CASES.values():
        message = case.entry.message
        assert message["timestamp"] == NOW                      # seconds, a number
        assert message["server"] == "thrift://metastore-1:9083"
        assert message["servicePrincipal"] == "hive/_HOST@EXAMPLE.COM"


def test_table_and_partition_values():
    m = CASES["rename_table"].entry.message
    assert (m["db"], m["table"], m["isTruncateOp"], m["writeId"]) == \
        ("sales_db", "sales", "false", -1)
    m = CASES["truncate_table"].entry.message
    assert (m["isTruncateOp"], m["writeId"]) == ("true", 9)
    assert CASES["create_table"].entry.message["files"] == [FILES[0] + "###"]
    assert CASES["create_external_table"].entry.message["files"] == []
    m = CASES["add_partition"].entry.message
    assert m["partitions"] == [{"ds": "2024-01-01", "region": "eu"},
                               {"ds": "2024-01-02", "region": "us:west"}]
    assert m["partitionFiles"] == [
        {"partitionName": "ds=2024-01-01/region=eu", "files": [f + "###" for f in P1_FILES]},
        {"partitionName": "ds=2024-01-02/region=us%3Awest", "files": []}]
    assert CASES["add_partition_external"].entry.message["partitionFiles"] == []
    assert CASES["add_partition_acid"].entry.message["partitionFiles"] == [
        {"partitionName": "ds=2024-01-01/region=eu", "files": []}]
    m = CASES["alter_partition"].entry.message
    assert (m["keyValues"], m["writeId"], m["cat"]) == \
        ({"ds": "2024-01-01", "region": "eu"}, -1, "hive")
    m = CASES["drop_partition"].entry.message
    assert m["partitions"] == [dict(zip(["ds", "region"], p["values"])) for p in (P1, P2)]
    m = CASES["insert_partition"].entry.message
    assert (m["replace"], m["partKeyVals"]) == ("false", {"ds": "2024-01-01", "region": "eu"})
    m = CASES["insert_table"].entry.message
    assert (m["replace"], m["ptnObjJson"], m["partKeyVals"]) == ("true", None, {})
    assert m["files"] == ["file:/w/sales_db.db/totals/f###sub"]
    assert CASES["reload"].entry.message["refreshEvent"] == "true"
    assert CASES["drop_function"].entry.message["functionName"] == "to_eur"
    assert CASES["drop_constraint"].entry.message["catName"] is None


def test_nothing_to_report_writes_no_event():
    assert em.add_partitions(CTX, TABLE, []) is None
    assert em.drop_partitions(CTX, TABLE, []) is None
    assert em.alter_partitions(CTX, TABLE, []) is None
    assert em.add_primary_keys(CTX, []) is None
    assert em.alloc_write_ids(CTX, "db", "t", []) is None


def test_transaction_messages():
    m = CASES["open_txn"].entry.message
    assert (m["txnIds"], m["fromTxnId"], m["toTxnId"]) == (None, 55, 57)
    m = CASES["commit_txn"].entry.message
    assert m["txnid"] == 55
    assert all(m[k] is None for k in ("writeIds", "databases", "tables", "partitions",
                                      "tableObjs", "partitionObjs", "files"))
    assert em.ALTERED_TABLES_KEY not in m
    assert CASES["commit_txn_key_value"].entry.message[em.ALTERED_TABLES_KEY] == [
        {"db": "sales_db", "table": "orders"}]
    m = CASES["abort_txn"].entry.message
    assert (m["txnid"], m["dbsUpdated"]) == (56, None)
    m = CASES["alloc_write_id"].entry.message
    assert (m["dbName"], m["tableName"], m["txnIdList"], m["writeIdList"]) == \
        ("sales_db", "orders", [55, 56], [5, 6])
    m = CASES["commit_compaction"].entry.message
    assert (m["type"], m["compactionId"], m["partName"]) == ("MAJOR", 3, "ds=2024-01-01/region=eu")


def test_write_notifications():
    """ACID writes: the TXN_WRITE_NOTIFICATION_LOG record, what get_all_write_event_info
    answers for it, and Hive's JSONAcidWriteMessage of it."""
    assert (WRITE.txn_id, WRITE.write_id, WRITE.database, WRITE.table, WRITE.partition) == \
        (55, 5, "sales_db", "orders", "ds=2024-01-01/region=eu")
    assert WRITE.files == ACID_PART["sd"]["location"] + \
        "/delta_0000005_0000005_0000/bucket_00000###delta_0000005_0000005_0000"
    assert read_tjson("Table", WRITE.table_obj) == wire_doc("Table", ACID)
    assert read_tjson("Partition", WRITE.partition_obj) == wire_doc("Partition", ACID_PART)
    info = em.write_event_info(WRITE)
    assert list(info) == ["writeId", "database", "table", "files", "partition", "tableObj",
                          "partitionObj"]
    # an unpartitioned table's write: partition "" (HMSHandler), no partition object
    assert WRITE_UNPARTITIONED.partition == "" and WRITE_UNPARTITIONED.partition_obj is None
    assert "partitionObj" not in em.write_event_info(WRITE_UNPARTITIONED)
    two = em.write_notification(CTX, 1, 1, UNPARTITIONED, None, ["a", "b"])
    assert two.files == "a###]b###"
    assert em.acid_write_message(CTX, two)["files"] == ["a###", "b###"]
    # a commit's writeEventInfos: files relative to (or named anywhere), moved under the
    # table or partition location with their subdirectory, as HMSHandler.commit_txn does
    got = em.commit_write_notification(CTX, 9, {
        "writeId": 4, "database": "sales_db", "table": "orders",
        "files": "bucket_00000 ] hdfs://other/orders/delta_4_4/bucket_00001###delta_4_4",
        "partition": "ds=2024-01-01/region=eu"}, ACID, ACID_PART)
    loc = ACID_PART["sd"]["location"]
    assert got.files == f"{loc}/bucket_00000###]{loc}/delta_4_4/bucket_00001###delta_4_4"
    assert (got.txn_id, got.write_id, got.partition) == (9, 4, "ds=2024-01-01/region=eu")


# ---------------------------------------------------------------- message formats


def test_formats():
    message = CASES["create_table"].entry.message
    text = formats.encode(message)
    assert text == json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    assert formats.decode(text, "json-0.2") == message
    assert formats.decode(text, None) == message
    zipped = formats.encode(message, "gzip(json-2.0)")
    assert gzip.decompress(base64.b64decode(zipped)).decode("utf-8") == text
    assert "\n" not in zipped and zipped.startswith("H4sI")
    assert formats.decode(zipped, "gzip(json-2.0)") == message
    assert formats.decode(zipped, "GZIP") == message        # MessageFactory's "gzip" alias
    with pytest.raises(ValueError):
        formats.encode(message, "avro")
    with pytest.raises(ValueError):
        formats.decode(text, "avro")
    odd = {"db": "ventes_é", "table": "t\u2603"}
    assert formats.decode(formats.encode(odd, "gzip(json-2.0)"), "gzip(json-2.0)") == odd
    assert "é" in formats.encode(odd)                        # as Jackson writes it


def test_message_factory_configuration():
    assert config.Config().event_message_format() == "json-0.2"
    assert config.Config().lookup_string("hive.metastore.event.message.factory") == \
        "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageEncoder"
    gz = config.Config({"metastore.event.message.factory":
                        "org.apache.hadoop.hive.metastore.messaging.json.gzip.GzipJSONMessageEncoder"})
    assert gz.event_message_format() == "gzip(json-2.0)"
    hive2 = config.Config({"hive.metastore.event.message.factory":
                           "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageFactory"})
    assert hive2.event_message_format() == "json-0.2"
    with pytest.raises(config.ConfigError, match="hive.metastore.event.message.factory"):
        config.Config({"hive.metastore.event.message.factory": "com.example.Avro"})


# ---------------------------------------------------------------- (b), (c) Hive 2.3 in the JVM

KNOWN = sorted(i for i, c in CASES.items() if c.entry.event_type in HIVE23_TYPES)
UNKNOWN = sorted(i for i, c in CASES.items() if c.entry.event_type not in HIVE23_TYPES)
FORMATS = ("json-0.2", "gzip(json-2.0)")


# hms-txn's old commit-time ALTER_TABLE (issue 35): no tableObj*Json
OLD_ALTER_TABLE = {"server": "", "servicePrincipal": "", "db": "sales_db", "table": "sales",
                   "tableType": "MANAGED_TABLE", "isTruncateOp": "false", "writeId": -1,
                   "timestamp": NOW}


@pytest.fixture(scope="module")
def decoded(tmp_path_factory):
    """Every case in both formats, and the controls, decoded in one JVM."""
    classes = jvm.compile_harness(str(tmp_path_factory.mktemp("hive_messages")))
    lines = []
    for case in CASES.values():
        for fmt in FORMATS:
            lines.append({"id": f"{case.id}@{fmt}", "eventType": case.entry.event_type,
                          "messageFormat": fmt, "message": formats.encode(case.entry.message, fmt),
                          "objects": case.objects})
        if case.id in KNOWN:
            lines.append({"id": f"{case.id}@control", "control": control_input(case),
                          "objects": case.objects})
    lines.append({"id": "old_alter_table", "eventType": "ALTER_TABLE", "messageFormat": "json-0.2",
                  "message": json.dumps(OLD_ALTER_TABLE)})
    return jvm.run_harness(classes, lines)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case_id", KNOWN)
def test_hive23_decodes_our_message(decoded, case_id, fmt):
    """(b) Hive 2.3's deserializer and every getter of its message class, on our message
    (a gzip one first gunzipped as Hive 4's gzip DeSerializer does)."""
    check_decoded(CASES[case_id], decoded[f"{case_id}@{fmt}"],
                  (CTX.server, CTX.service_principal, NOW))


@pytest.mark.parametrize("case_id", KNOWN)
def test_control_hive23_decodes_its_own_message(decoded, case_id):
    """(c) The same checks on the message Hive 2.3's JSONMessageFactory builds for the same
    objects: they hold for Hive's own message, so they test the decoding, not our format."""
    check_control(CASES[case_id], decoded[f"{case_id}@control"])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case_id", UNKNOWN)
def test_hive23_does_not_know_the_newer_types(decoded, case_id, fmt):
    """Hive 2.3 has no class for ALTER_DATABASE, the transaction, constraint, statistics,
    compaction and RELOAD/ALTER_PARTITIONS types: its getEventMessage refuses the type (a
    2.3 reader must skip them, e.g. with eventTypeSkipList)."""
    result = decoded[f"{case_id}@{fmt}"]
    assert result["known"] is False
    assert "No enum constant" in result["dispatch"]["error"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case_id", sorted(i for i, c in CASES.items() if c.objects))
def test_objects_decode_in_the_jvm(decoded, case_id, fmt):
    """Every Thrift object of every message, read by TDeserializer(TJSONProtocol) into Hive
    2.3's classes (MessageBuilder.getTObj), equals the object it was built from."""
    check_objects(CASES[case_id], decoded[f"{case_id}@{fmt}"])


def test_harness_sees_missing_keys(decoded):
    """The harness reports what a reader gets from a message without its objects: hms-txn's
    old commit-time ALTER_TABLE throws in getTableObjBefore/After."""
    errors = harness_errors(decoded["old_alter_table"]["getters"])
    assert any(e.startswith(".getTableObjBefore") and "NullPointerException" in e
               for e in errors), errors
    assert any(e.startswith(".getTableObjAfter") for e in errors), errors
