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
    "get_table_column_statistics": (
        "no result when the column has no statistics (a Java client raises "
        "TApplicationException MISSING_RESULT), as Hive 4"),
    "get_partition_column_statistics": (
        "no result when the column has no statistics (a Java client raises "
        "TApplicationException MISSING_RESULT), as Hive 4"),
    "get_aggr_stats_for": (
        "no result when a ValidWriteIdList is sent and some partition's statistics are not "
        "valid for it, as Hive 4 (HiveServer2 then plans without them)"),
    "add_write_ids_to_min_history": (
        "accepted, nothing recorded: our Cleaner already keeps every file a transaction "
        "opened before the compaction committed may read, which covers what Hive records "
        "for its Cleaner here"),
    "update_transaction_statistics": (
        "accepted, nothing updated: Hive adds the counts to the materialized views that "
        "use the table, and hms-txn has none"),
    "get_type_all": "always MetaException \"Not yet implemented\", as Hive",
    "list_privileges": (
        "a data connector object answers nothing (MISSING_RESULT), as Hive's handler, which "
        "has no branch for it"),
    "get_privilege_set": (
        "a data connector object answers nothing (MISSING_RESULT), as Hive's handler, which "
        "has no branch for it"),
    "create_function": (
        "the name is stored lower-cased (Hive keeps it as sent, and then never finds a name "
        "with capitals, since its lookups lower-case)"),
    "drop_constraint": (
        "NoSuchObjectException for a missing constraint, with Hive's text (Hive turns it "
        "into an undeclared InvalidObjectException: TApplicationException INTERNAL_ERROR)"),
}
# Hive's store throws InvalidObjectException (missing table or column, a taken name), which
# these calls do not declare: Hive's clients get INTERNAL_ERROR without the text, and retry.
for _method in ("add_primary_key", "add_foreign_key", "add_unique_constraint",
                "add_not_null_constraint", "add_default_constraint", "add_check_constraint"):
    IMPLEMENTED[_method] = (
        "a missing table or column or a taken name is the declared MetaException with "
        "Hive's text (Hive's undeclared InvalidObjectException reaches clients as "
        "TApplicationException INTERNAL_ERROR)")

# Methods answered "not supported" whose answer a client treats specially.
_OUR_COMPACTOR = (
    "compactions run inside hms-txn (`hive.compactor.worker.threads`); a Hive Worker running "
    "elsewhere (HiveServer2 with `hive.metastore.runworker.in=hs2`) logs the refusal and "
    "leaves the queue to ours. Serving it would need Hive's commit-time bookkeeping of "
    "compaction transactions, which our compactor does differently")
NOT_SUPPORTED: dict[str, str] = {
    "find_next_compact": _OUR_COMPACTOR,
    "find_next_compact2": _OUR_COMPACTOR,
    "get_partitions_by_expr": (
        "Hive's client prunes partitions itself only when this call answers "
        "TApplicationException UNKNOWN_METHOD; the MetaException fails pruned queries"),
    "get_partitions_spec_by_expr": (
        "Hive's client prunes partitions itself only when this call answers "
        "TApplicationException UNKNOWN_METHOD; the MetaException fails pruned queries"),
}
