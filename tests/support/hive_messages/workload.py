"""The objects of an everyday workload and the notification messages our builders make for
them (``hms_txn.domain.events.event_messages``), shared by the message tests: the Hive 4 key and
type checks, the decoding inside the JVM with Hive 2.3's classes, and Impala's reading.

Documents are complete the way the catalog stores them (create and access times,
``compressed``/``numBuckets`` set), so that a Thrift object read back carries exactly the
fields that were written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.Thrift import TType
from thrift.TSerialization import deserialize

from hms_txn.domain.events import event_messages as em
from hms_txn.wire.codec import from_doc, object_json, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes

NOW = 1_764_000_000
CTX = em.MessageContext(object_json, server="thrift://metastore-1:9083",
                        service_principal="hive/_HOST@EXAMPLE.COM", clock=lambda: NOW + 0.75)

DATABASE = {"name": "sales_db", "description": "sales data", "locationUri": "file:/w/sales_db.db",
            "parameters": {"owner.team": "finance"}, "ownerName": "alice", "ownerType": 1,
            "catalogName": "hive", "createTime": 1_700_000_000}
DATABASE_AFTER = {**DATABASE, "description": "sales data, audited",
                  "parameters": {"owner.team": "finance", "audited": "yes"}}


def _sd(location: str) -> dict[str, Any]:
    return {"cols": [{"name": "id", "type": "bigint"},
                     {"name": "amount", "type": "double", "comment": "in EUR"}],
            "location": location,
            "inputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
            "outputFormat": "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
            "compressed": False, "numBuckets": -1,
            "serdeInfo": {"serializationLib": "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                          "parameters": {"serialization.format": "1"}},
            "bucketCols": [], "sortCols": [], "parameters": {}}


def _table(name: str, params: dict[str, str], table_type: str = "MANAGED_TABLE") -> dict[str, Any]:
    return {"tableName": name, "dbName": "sales_db", "owner": "alice", "createTime": 1_700_000_100,
            "lastAccessTime": 0, "retention": 0, "sd": _sd(f"file:/w/sales_db.db/{name}"),
            "partitionKeys": [{"name": "ds", "type": "string"},
                              {"name": "region", "type": "string"}],
            "parameters": {"transient_lastDdlTime": "1700000100", **params},
            "tableType": table_type, "catName": "hive", "id": 7}


TABLE = _table("sales", {})                                   # managed, not transactional
TABLE_AFTER = {**TABLE, "parameters": {**TABLE["parameters"], "comment": "daily sales"}}
RENAMED = {**TABLE, "tableName": "sales_2024", "sd": _sd("file:/w/sales_db.db/sales_2024")}
EXTERNAL = _table("raw_sales", {"EXTERNAL": "TRUE"}, "EXTERNAL_TABLE")
ACID = _table("orders", {"transactional": "true"})
UNPARTITIONED = {**_table("totals", {}), "partitionKeys": []}


def _partition(table: dict[str, Any], ds: str, region: str) -> dict[str, Any]:
    loc = f"{table['sd']['location']}/ds={ds}/region={region}"
    return {"values": [ds, region], "dbName": table["dbName"], "tableName": table["tableName"],
            "createTime": 1_700_000_200, "lastAccessTime": 0, "sd": _sd(loc),
            "parameters": {"numFiles": "1"}, "catName": "hive", "writeId": -1}


P1 = _partition(TABLE, "2024-01-01", "eu")
P2 = _partition(TABLE, "2024-01-02", "us:west")                # a value Hive escapes in names
P1_AFTER = {**P1, "parameters": {"numFiles": "2"}}
ACID_PART = _partition(ACID, "2024-01-01", "eu")
EXTERNAL_PART = _partition(EXTERNAL, "2024-01-01", "eu")

FUNCTION = {"functionName": "to_eur", "dbName": "sales_db", "className": "com.example.ToEur",
            "ownerName": "alice", "ownerType": 1, "createTime": 1_700_000_300, "functionType": 1,
            "resourceUris": [{"resourceType": 1, "uri": "file:/w/jars/to_eur.jar"}],
            "catName": "hive"}

PRIMARY_KEY = {"table_db": "sales_db", "table_name": "sales", "column_name": "id", "key_seq": 1,
               "pk_name": "sales_pk", "enable_cstr": True, "validate_cstr": False,
               "rely_cstr": False, "catName": "hive"}
FOREIGN_KEY = {"pktable_db": "sales_db", "pktable_name": "sales", "pkcolumn_name": "id",
               "fktable_db": "sales_db", "fktable_name": "orders", "fkcolumn_name": "id",
               "key_seq": 1, "update_rule": 0, "delete_rule": 0, "fk_name": "orders_fk",
               "pk_name": "sales_pk", "enable_cstr": True, "validate_cstr": False,
               "rely_cstr": False, "catName": "hive"}
UNIQUE = {"catName": "hive", "table_db": "sales_db", "table_name": "sales", "column_name": "id",
          "key_seq": 1, "uk_name": "sales_uk", "enable_cstr": True, "validate_cstr": False,
          "rely_cstr": False}
NOT_NULL = {"catName": "hive", "table_db": "sales_db", "table_name": "sales",
            "column_name": "amount", "nn_name": "amount_nn", "enable_cstr": True,
            "validate_cstr": False, "rely_cstr": False}
DEFAULT = {"catName": "hive", "table_db": "sales_db", "table_name": "sales",
           "column_name": "amount", "default_value": "0", "dc_name": "amount_dc",
           "enable_cstr": True, "validate_cstr": False, "rely_cstr": False}
CHECK = {"catName": "hive", "table_db": "sales_db", "table_name": "sales", "column_name": "amount",
         "check_expression": "amount >= 0", "dc_name": "amount_ck", "enable_cstr": True,
         "validate_cstr": False, "rely_cstr": False}


def _stats(part_name: str | None) -> dict[str, Any]:
    desc = {"isTblLevel": part_name is None, "dbName": "sales_db", "tableName": "sales",
            "lastAnalyzed": 1_700_000_400, "catName": "hive"}
    if part_name is not None:
        desc["partName"] = part_name
    return {"statsDesc": desc, "statsObj": [{
        "colName": "amount", "colType": "double",
        "statsData": {"doubleStats": {"lowValue": 0.5, "highValue": 99.25, "numNulls": 0,
                                      "numDVs": 42}}}], "engine": "hive"}


TABLE_STATS = _stats(None)
PART_STATS = _stats("ds=2024-01-01/region=eu")

FILES = ["file:/w/sales_db.db/sales/000000_0"]
P1_FILES = [f"{P1['sd']['location']}/000000_0", f"{P1['sd']['location']}/000001_0"]
INSERT_FILES = [f"{P1['sd']['location']}/000002_0"]
ACID_FILES = [f"{ACID_PART['sd']['location']}/delta_0000005_0000005_0000/bucket_00000"]

WRITE = em.write_notification(CTX, 55, 5, ACID, ACID_PART, ACID_FILES,
                              ["delta_0000005_0000005_0000"])
WRITE_UNPARTITIONED = em.write_notification(CTX, 56, 1, UNPARTITIONED, None,
                                            ["file:/w/sales_db.db/totals/delta_1_1/bucket_0"],
                                            ["delta_1_1"])


@dataclass
class Case:
    """One event of the workload: our entry, the Thrift struct of each object key in its
    message, and the objects it was built from (the control builds Hive 2.3's message from
    the same ones)."""
    id: str
    entry: em.LogEntry
    objects: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)


def cases() -> list[Case]:
    """Every event type we write, plus ALTER_PARTITIONS and the ACID write message."""
    c = CTX
    out = [
        Case("create_database", em.create_database(c, DATABASE), {"dbJson": "Database"},
             {"database": DATABASE}),
        Case("alter_database", em.alter_database(c, DATABASE, DATABASE_AFTER),
             {"dbObjBeforeJson": "Database", "dbObjAfterJson": "Database"},
             {"before": DATABASE, "after": DATABASE_AFTER}),
        Case("drop_database", em.drop_database(c, DATABASE), {"dbJson": "Database"},
             {"database": DATABASE}),
        Case("create_table", em.create_table(c, TABLE, FILES), {"tableObjJson": "Table"},
             {"table": TABLE, "files": FILES}),
        Case("create_external_table", em.create_table(c, EXTERNAL, FILES),
             {"tableObjJson": "Table"}, {"table": EXTERNAL, "files": []}),
        Case("alter_table", em.alter_table(c, TABLE, TABLE_AFTER),
             {"tableObjBeforeJson": "Table", "tableObjAfterJson": "Table"},
             {"before": TABLE, "after": TABLE_AFTER}),
        Case("rename_table", em.alter_table(c, TABLE, RENAMED),
             {"tableObjBeforeJson": "Table", "tableObjAfterJson": "Table"},
             {"before": TABLE, "after": RENAMED}),
        Case("truncate_table", em.alter_table(c, ACID, ACID, is_truncate=True, write_id=9),
             {"tableObjBeforeJson": "Table", "tableObjAfterJson": "Table"},
             {"before": ACID, "after": ACID}),
        Case("drop_table", em.drop_table(c, TABLE), {"tableObjJson": "Table"}, {"table": TABLE}),
        Case("add_partition", em.add_partitions(c, TABLE, [P1, P2],
                                                {"ds=2024-01-01/region=eu": P1_FILES}),
             {"tableObjJson": "Table", "partitionListJson": "Partition"},
             {"table": TABLE, "partitions": [P1, P2]}),
        Case("add_partition_external", em.add_partitions(c, EXTERNAL, [EXTERNAL_PART]),
             {"tableObjJson": "Table", "partitionListJson": "Partition"},
             {"table": EXTERNAL, "partitions": [EXTERNAL_PART]}),
        Case("add_partition_acid", em.add_partitions(c, ACID, [ACID_PART],
                                                     {"ds=2024-01-01/region=eu": ACID_FILES}),
             {"tableObjJson": "Table", "partitionListJson": "Partition"},
             {"table": ACID, "partitions": [ACID_PART]}),
        Case("alter_partition", em.alter_partition(c, TABLE, P1, P1_AFTER),
             {"tableObjJson": "Table", "partitionObjBeforeJson": "Partition",
              "partitionObjAfterJson": "Partition"},
             {"table": TABLE, "before": P1, "after": P1_AFTER}),
        Case("alter_partitions", em.alter_partitions(c, TABLE, [P1_AFTER, P2]),
             {"tableObjJson": "Table", "partitionListJson": "Partition"},
             {"table": TABLE, "partitions": [P1_AFTER, P2]}),
        Case("drop_partition", em.drop_partitions(c, TABLE, [P1["values"], P2["values"]]),
             {"tableObjJson": "Table"}, {"table": TABLE, "partitions": [P1, P2]}),
        Case("insert_partition", em.insert(c, TABLE, P1, INSERT_FILES, replace=False),
             {"tableObjJson": "Table", "ptnObjJson": "Partition"},
             {"table": TABLE, "partition": P1, "files": INSERT_FILES}),
        Case("insert_table", em.insert(c, UNPARTITIONED, None, ["file:/w/sales_db.db/totals/f"],
                                       subdirs=["sub"]),
             {"tableObjJson": "Table", "ptnObjJson": "Partition"},
             {"table": UNPARTITIONED, "partition": None}),
        Case("reload", em.reload(c, TABLE, P1, refresh=True),
             {"tableObjJson": "Table", "ptnObjJson": "Partition"},
             {"table": TABLE, "partition": P1}),
        Case("create_function", em.create_function(c, FUNCTION), {"functionObjJson": "Function"},
             {"function": FUNCTION}),
        Case("drop_function", em.drop_function(c, FUNCTION), {}, {"function": FUNCTION}),
        Case("add_primarykey", em.add_primary_keys(c, [PRIMARY_KEY]),
             {"primaryKeyListJson": "SQLPrimaryKey"}, {"list": [PRIMARY_KEY]}),
        Case("add_foreignkey", em.add_foreign_keys(c, [FOREIGN_KEY]),
             {"foreignKeyListJson": "SQLForeignKey"}, {"list": [FOREIGN_KEY]}),
        # Hive 2.3 has no Thrift class for these four: decoded in Python only
        Case("add_uniqueconstraint", em.add_unique_constraints(c, [UNIQUE]), {},
             {"list": [UNIQUE]}),
        Case("add_notnullconstraint", em.add_not_null_constraints(c, [NOT_NULL]), {},
             {"list": [NOT_NULL]}),
        Case("add_defaultconstraint", em.add_default_constraints(c, [DEFAULT]), {},
             {"list": [DEFAULT]}),
        Case("add_checkconstraint", em.add_check_constraints(c, [CHECK]), {}, {"list": [CHECK]}),
        Case("drop_constraint", em.drop_constraint(c, "sales_db", "sales", "sales_pk")),
        Case("update_table_col_stats",
             em.update_table_column_stats(c, TABLE_STATS, TABLE, {"COLUMN_STATS_ACCURATE": "{}"},
                                          write_id=3),
             {"colStatsJson": "ColumnStatistics", "tableObjJson": "Table"},
             {"stats": TABLE_STATS, "table": TABLE}),
        Case("delete_table_col_stats",
             em.delete_table_column_stats(c, "sales_db", "sales", "amount")),
        Case("update_part_col_stats",
             em.update_partition_column_stats(c, PART_STATS, P1["values"], TABLE,
                                              {"numRows": "10"}),
             {"colStatsJson": "ColumnStatistics", "tableObjJson": "Table"},
             {"stats": PART_STATS, "table": TABLE}),
        Case("delete_part_col_stats",
             em.delete_partition_column_stats(c, "sales_db", "sales", "ds=2024-01-01/region=eu",
                                              P1["values"], "amount")),
        Case("open_txn", em.open_txns(c, 55, 57)),
        Case("alloc_write_id", em.alloc_write_ids(c, "sales_db", "orders", [(55, 5), (56, 6)])),
        Case("commit_txn", em.commit_txn(c, 55)),
        Case("commit_txn_key_value", em.commit_txn(c, 57, [("sales_db", "orders")])),
        Case("abort_txn", em.abort_txn(c, 56)),
        Case("commit_compaction", em.commit_compaction(c, 60, 3, "major", "sales_db", "orders",
                                                       "ds=2024-01-01/region=eu")),
        # not a log entry (Hive keeps ACID writes out of the log): the message Hive builds
        Case("acid_write", em.LogEntry("ACID_WRITE_EVENT", em.acid_write_message(c, WRITE),
                                       None, None, None),
             {"tableObjJson": "Table", "partitionObjJson": "Partition"},
             {"table": ACID, "partition": ACID_PART}),
    ]
    assert all(case.entry is not None for case in out)
    return out


# ------------------------------------------------------------------ comparing objects


def wire_doc(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The document as the Thrift object our server sends (IDL defaults filled in)."""
    return to_doc(from_doc(getattr(ttypes, kind), doc))


def read_tjson(kind: str, text: str) -> dict[str, Any]:
    """``MessageBuilder.getTObj`` in Python: the document of a TJSON text."""
    obj = deserialize(getattr(ttypes, kind)(), text.encode("utf-8"), TJSONProtocolFactory())
    return to_doc(obj)


def project(kind: str, doc: dict[str, Any], known: dict[str, dict[str, int]]) -> dict[str, Any]:
    """``doc`` (a wire document of struct ``kind``) reduced to the fields of the Hive 2.3
    classes (``known``: class name -> {field name: field id}, as the JVM harness reports
    them). A field counts only with the same name and id: Hive 2.3.10's Table has a
    ``catName`` too, under another id than Hive 4's, so it never reads ours."""
    return _project_struct(getattr(ttypes, kind), doc, known)


def _project_struct(cls: type, doc: dict[str, Any],
                    known: dict[str, dict[str, int]]) -> dict[str, Any]:
    ids = known[cls.__name__]
    out = {}
    for spec in cls.thrift_spec:
        if spec is None or ids.get(spec[2]) != spec[0] or doc.get(spec[2]) is None:
            continue
        out[spec[2]] = _project_value(spec[1], spec[3], doc[spec[2]], known)
    return out


def _project_value(ttype: int, targs: Any, value: Any, known: dict[str, dict[str, int]]) -> Any:
    if ttype == TType.STRUCT:
        return _project_struct(targs[0], value, known)
    if ttype in (TType.LIST, TType.SET):
        return [_project_value(targs[0], targs[1], v, known) for v in value]
    if ttype == TType.MAP:
        return {str(k): _project_value(targs[2], targs[3], v, known) for k, v in value.items()}
    return value
