"""What docs/compatibility.md says about a method beyond its status.

``scripts/compat_doc.py`` derives each method's status from the code (implemented when a
service class defines it, else "not supported"); the notes here explain the answers that
are fixed on purpose or that a client treats specially. Each table is tied to a status:
the script refuses a note whose method no longer has it, so a note is revisited when the
method changes.
"""

from __future__ import annotations

# Implemented methods whose answer is fixed: what they answer, and why.
IMPLEMENTED: dict[str, str] = {
    "flushCache": "does nothing, as Hive's metastore without its CachedStore",
    "partition_name_has_valid_characters": (
        "always true, as Hive with its default, empty "
        "`metastore.partition.name.whitelist.pattern`; hms-txn has no such pattern"),
    "setMetaConf": (
        "always MetaException: hms-txn changes no configuration for one connection "
        "(Hive allows its few per-session keys)"),
    "get_all_functions": "an empty list: functions are not stored yet",
    "get_functions": "an empty list: functions are not stored yet",
    "get_table_column_statistics": (
        "no result when the column has no statistics (a Java client raises "
        "TApplicationException MISSING_RESULT), as Hive 4"),
    "get_partition_column_statistics": (
        "no result when the column has no statistics (a Java client raises "
        "TApplicationException MISSING_RESULT), as Hive 4"),
    "get_aggr_stats_for": (
        "no result when a ValidWriteIdList is sent and some partition's statistics are not "
        "valid for it, as Hive 4 (HiveServer2 then plans without them)"),
}

# Methods answered "not supported" whose answer a client treats specially.
NOT_SUPPORTED: dict[str, str] = {
    "get_partitions_by_expr": (
        "Hive's client prunes partitions itself only when this call answers "
        "TApplicationException UNKNOWN_METHOD; the MetaException fails pruned queries"),
    "get_partitions_spec_by_expr": (
        "Hive's client prunes partitions itself only when this call answers "
        "TApplicationException UNKNOWN_METHOD; the MetaException fails pruned queries"),
}
