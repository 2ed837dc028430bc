"""Hive 4's notification message classes, as the tests check our messages against them."""

from __future__ import annotations

# Each event type's JSON*Message class in apache/hive
#   standalone-metastore/metastore-server/src/main/java/org/apache/hadoop/hive/metastore/
#   messaging/json/<class>.java
# and its @JsonProperty fields in declaration order (the order Jackson writes them), with
# their Java types. "tjson:X" is a String holding the TJSONProtocol text of Thrift struct X
# (MessageBuilder.create*ObjJson); "[tjson:X]" a List<String> of them; "bool" a String
# "true"/"false" (Boolean.toString). DROP_FUNCTION's and ADD_PRIMARYKEY/UNIQUE/NOT_NULL/
# DEFAULT's fields are from /work/notes/events/hive4-messages.md; the others were read in
# the class files.
S, L = "String", "Long"
HIVE4: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "CREATE_DATABASE": ("JSONCreateDatabaseMessage", [
        ("server", S), ("servicePrincipal", S), ("cat", S), ("db", S), ("dbJson", "tjson:Database"),
        ("timestamp", L)]),
    "ALTER_DATABASE": ("JSONAlterDatabaseMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("dbObjBeforeJson", "tjson:Database"),
        ("dbObjAfterJson", "tjson:Database"), ("timestamp", L)]),
    "DROP_DATABASE": ("JSONDropDatabaseMessage", [
        ("server", S), ("servicePrincipal", S), ("cat", S), ("db", S), ("dbJson", "tjson:Database"),
        ("timestamp", L)]),
    "CREATE_TABLE": ("JSONCreateTableMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("table", S), ("tableType", S),
        ("tableObjJson", "tjson:Table"), ("timestamp", L), ("files", "List<String>")]),
    "ALTER_TABLE": ("JSONAlterTableMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("table", S), ("tableType", S),
        ("tableObjBeforeJson", "tjson:Table"), ("tableObjAfterJson", "tjson:Table"),
        ("locOwner", S), ("isTruncateOp", "bool"), ("timestamp", L), ("writeId", L)]),
    "DROP_TABLE": ("JSONDropTableMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("table", S), ("tableType", S),
        ("tableObjJson", "tjson:Table"), ("timestamp", L)]),
    "ADD_PARTITION": ("JSONAddPartitionMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("table", S), ("tableType", S),
        ("tableObjJson", "tjson:Table"), ("locOwner", S), ("timestamp", L),
        ("partitions", "List<Map<String,String>>"), ("partitionListJson", "[tjson:Partition]"),
        ("partitionFiles", "List<PartitionFiles>")]),
    "ALTER_PARTITION": ("JSONAlterPartitionMessage", [
        ("server", S), ("servicePrincipal", S), ("cat", S), ("db", S), ("table", S),
        ("tableType", S), ("tableObjJson", "tjson:Table"), ("isTruncateOp", "bool"),
        ("timestamp", L), ("writeId", L), ("keyValues", "Map<String,String>"),
        ("partitionObjBeforeJson", "tjson:Partition"),
        ("partitionObjAfterJson", "tjson:Partition")]),
    "ALTER_PARTITIONS": ("JSONAlterPartitionsMessage", [
        ("server", S), ("servicePrincipal", S), ("cat", S), ("db", S), ("table", S),
        ("tableType", S), ("tableObjJson", "tjson:Table"), ("isTruncateOp", "bool"),
        ("timestamp", L), ("writeId", L), ("partitions", "List<Map<String,String>>"),
        ("partitionListJson", "[tjson:Partition]")]),
    "DROP_PARTITION": ("JSONDropPartitionMessage", [
        ("server", S), ("servicePrincipal", S), ("cat", S), ("db", S), ("table", S),
        ("tableType", S), ("tableObjJson", "tjson:Table"), ("timestamp", L),
        ("partitions", "List<Map<String,String>>")]),
    "INSERT": ("JSONInsertMessage", [
        ("server", S), ("servicePrincipal", S), ("cat", S), ("db", S), ("table", S),
        ("tableType", S), ("tableObjJson", "tjson:Table"), ("ptnObjJson", "tjson:Partition"),
        ("timestamp", L), ("replace", "bool"), ("files", "List<String>")]),
    "RELOAD": ("JSONReloadMessage", [
        ("timestamp", L), ("server", S), ("servicePrincipal", S), ("db", S), ("table", S),
        ("tableObjJson", "tjson:Table"), ("ptnObjJson", "tjson:Partition"),
        ("refreshEvent", "bool"), ("partitionListJson", "[tjson:Partition]")]),
    "CREATE_FUNCTION": ("JSONCreateFunctionMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("functionObjJson", "tjson:Function"),
        ("timestamp", L)]),
    "DROP_FUNCTION": ("JSONDropFunctionMessage", [
        ("server", S), ("servicePrincipal", S), ("db", S), ("functionName", S), ("timestamp", L)]),
    "ADD_PRIMARYKEY": ("JSONAddPrimaryKeyMessage", [
        ("server", S), ("servicePrincipal", S), ("timestamp", L),
        ("primaryKeyListJson", "[tjson:SQLPrimaryKey]")]),
    "ADD_FOREIGNKEY": ("JSONAddForeignKeyMessage", [
        ("server", S), ("servicePrincipal", S), ("timestamp", L),
        ("foreignKeyListJson", "[tjson:SQLForeignKey]")]),
    "ADD_UNIQUECONSTRAINT": ("JSONAddUniqueConstraintMessage", [
        ("server", S), ("servicePrincipal", S), ("timestamp", L),
        ("uniqueConstraintListJson", "[tjson:SQLUniqueConstraint]")]),
    "ADD_NOTNULLCONSTRAINT": ("JSONAddNotNullConstraintMessage", [
        ("server", S), ("servicePrincipal", S), ("timestamp", L),
        ("notNullConstraintListJson", "[tjson:SQLNotNullConstraint]")]),
    "ADD_DEFAULTCONSTRAINT": ("JSONAddDefaultConstraintMessage", [
        ("server", S), ("servicePrincipal", S), ("timestamp", L),
        ("defaultConstraintListJson", "[tjson:SQLDefaultConstraint]")]),
    "ADD_CHECKCONSTRAINT": ("JSONAddCheckConstraintMessage", [
        ("server", S), ("servicePrincipal", S), ("timestamp", L),
        ("checkConstraintListJson", "[tjson:SQLCheckConstraint]")]),
    "DROP_CONSTRAINT": ("JSONDropConstraintMessage", [
        ("server", S), ("servicePrincipal", S), ("catName", S), ("dbName", S), ("tableName", S),
        ("constraintName", S), ("timestamp", L)]),
    "UPDATE_TBL_COL_STAT_EVENT": ("JSONUpdateTableColumnStatMessage", [
        ("writeId", L), ("timestamp", L), ("validWriteIds", S), ("server", S),
        ("servicePrincipal", S), ("database", S), ("colStatsJson", "tjson:ColumnStatistics"),
        ("parameters", "Map<String,String>"), ("tableObjJson", "tjson:Table")]),
    "DELETE_TBL_COL_STAT_EVENT": ("JSONDeleteTableColumnStatMessage", [
        ("timestamp", L), ("server", S), ("servicePrincipal", S), ("database", S), ("colName", S)]),
    "UPDATE_PART_COL_STAT_EVENT": ("JSONUpdatePartitionColumnStatMessage", [
        ("writeId", L), ("timestamp", L), ("server", S), ("servicePrincipal", S), ("catalog", S),
        ("database", S), ("colStatsJson", "tjson:ColumnStatistics"),
        ("parameters", "Map<String,String>"), ("partVals", "List<String>"),
        ("tableObjJson", "tjson:Table")]),
    "DELETE_PART_COL_STAT_EVENT": ("JSONDeletePartitionColumnStatMessage", [
        ("timestamp", L), ("server", S), ("servicePrincipal", S), ("catalog", S), ("database", S),
        ("colName", S), ("partName", S), ("partValues", "List<String>")]),
    "OPEN_TXN": ("JSONOpenTxnMessage", [
        ("txnIds", "List<Long>"), ("timestamp", L), ("fromTxnId", L), ("toTxnId", L),
        ("server", S), ("servicePrincipal", S)]),
    "COMMIT_TXN": ("JSONCommitTxnMessage", [
        ("txnid", L), ("timestamp", L), ("server", S), ("servicePrincipal", S),
        ("writeIds", "List<Long>"), ("databases", "List<String>"), ("tables", "List<String>"),
        ("partitions", "List<String>"), ("tableObjs", "List<String>"),
        ("partitionObjs", "List<String>"), ("files", "List<String>")]),
    "ABORT_TXN": ("JSONAbortTxnMessage", [
        ("txnid", L), ("timestamp", L), ("server", S), ("servicePrincipal", S),
        ("dbsUpdated", "List<String>")]),
    "ALLOC_WRITE_ID_EVENT": ("JSONAllocWriteIdMessage", [
        ("server", S), ("servicePrincipal", S), ("catName", S), ("dbName", S), ("tableName", S),
        ("txnIdList", "List<Long>"), ("writeIdList", "List<Long>"), ("timestamp", L)]),
    "COMMIT_COMPACTION_EVENT": ("JSONCommitCompactionMessage", [
        ("txnid", L), ("timestamp", L), ("server", S), ("servicePrincipal", S),
        ("compactionId", L), ("type", "CompactionType"), ("dbname", S), ("tableName", S),
        ("partName", S)]),
    "ACID_WRITE_EVENT": ("JSONAcidWriteMessage", [
        ("txnid", L), ("writeId", L), ("timestamp", L), ("server", S), ("servicePrincipal", S),
        ("database", S), ("table", S), ("partition", S), ("tableObjJson", "tjson:Table"),
        ("partitionObjJson", "tjson:Partition"), ("files", "List<String>")]),
}

# Fields of the classes above that Hive 4.0.x does not write (see the event_messages docstring).
NOT_IN_40 = {"ALTER_TABLE": {"locOwner"}, "ADD_PARTITION": {"locOwner"},
             "RELOAD": {"partitionListJson"}, "ALLOC_WRITE_ID_EVENT": {"catName"}}
# Keys we write that the Hive 4 class does not have (ignored by every Hive reader).
EXTRA = {"INSERT": ["partKeyVals"]}


def check_type(key: str, jtype: str, value) -> None:
    """``value`` has the JSON shape Jackson writes for a field of Java type ``jtype``."""
    where = f"{key}={value!r} ({jtype})"
    if value is None:
        return                       # Jackson writes an unset field as null
    if jtype == S:
        assert isinstance(value, str), where
    elif jtype == L:
        assert isinstance(value, int) and not isinstance(value, bool), where
    elif jtype == "bool":
        assert value in ("true", "false"), where
    elif jtype == "CompactionType":
        assert value in ("MINOR", "MAJOR", "REBALANCE", "SMART_OPTIMIZE"), where
    elif jtype.startswith("tjson:"):
        assert isinstance(value, str) and value.startswith("{"), where
    elif jtype.startswith("[tjson:") or jtype == "List<String>":
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), where
    elif jtype == "List<Long>":
        assert isinstance(value, list) and all(type(v) is int for v in value), where
    elif jtype == "Map<String,String>":
        assert isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in value.items()), where
    elif jtype == "List<Map<String,String>>":
        assert isinstance(value, list), where
        for m in value:
            check_type(key, "Map<String,String>", m)
    elif jtype == "List<PartitionFiles>":     # messaging/PartitionFiles: partitionName, files
        assert isinstance(value, list), where
        for pf in value:
            assert list(pf) == ["partitionName", "files"], where
            check_type(key, S, pf["partitionName"])
            check_type(key, "List<String>", pf["files"])
    else:
        raise AssertionError(f"no check for {jtype}")


def check_message(event_type: str, message: dict, extra: tuple[str, ...] = ()) -> None:
    """``message`` has exactly the keys, in the order, that Hive 4.0's class for
    ``event_type`` writes (``HIVE4`` less ``NOT_IN_40``, plus our ``EXTRA`` and ``extra``),
    each with its field's JSON type."""
    _cls, fields = HIVE4[event_type]
    expected = [k for k, _ in fields if k not in NOT_IN_40.get(event_type, ())]
    expected += EXTRA.get(event_type, []) + [k for k in extra if k in message]
    assert list(message) == expected, (event_type, list(message))
    types = dict(fields)
    for key, value in message.items():
        if key in types:
            check_type(key, types[key], value)
