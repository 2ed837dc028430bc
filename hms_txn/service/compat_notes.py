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
NOT_SUPPORTED: dict[str, str] = {}

# A Hive compactor running elsewhere on our queue (domain/compaction/external_compactor.py).
_ONE_CLAIM = (
    "claims through the claim our own compactor uses (compaction_bookkeeping.claim_next), "
    "so a Hive Worker in HiveServer2 (`hive.metastore.runworker.in=hs2`) and ours never "
    "take the same request")
_ONLY_WORKING = (
    "only an entry the calling worker still holds (the struct find_next_compact2 answered "
    "names it; Hive moves any entry): a request revoked from a timed-out worker is never "
    "moved by its late calls")
IMPLEMENTED.update({
    "find_next_compact": _ONE_CLAIM,
    "find_next_compact2": _ONE_CLAIM + "; pools as Hive (`hive.compactor.worker.pool.timeout`)",
    "update_compactor_state": (
        _ONLY_WORKING + "; no TXN_COMPONENTS row is written for the compaction "
        "transaction (our housekeeping keeps aborted compaction transactions anyway)"),
    "mark_compacted": (
        _ONLY_WORKING + "; the Cleaner waits for the compaction transaction's commit, "
        "as Hive's"),
    "mark_failed": _ONLY_WORKING,
    "mark_refused": _ONLY_WORKING,
    "submit_for_cleanup": (
        "the entry is cleaned by our Cleaner under the table's or partition's current "
        "location once its transaction is over; the request's `location` property (the "
        "directory of a table no longer in the catalog) is not used"),
    "get_lock_materialization_rebuild": (
        "a lock whose transaction is no longer open is released by the next request for the "
        "view (Hive releases it at the commit, and after an abort once its housekeeper ran)"),
})

# Catalogs, partition and table calls, truncate and the features kept off (issue 28;
# service.catalog.catalog_names, catalogs, partition_calls, table_calls, features_off).
_JAVA_EXPRESSION = (
    "always TApplicationException UNKNOWN_METHOD, answered by the dispatcher: the request's "
    "Kryo-serialized Hive expression can only be read by Java code, and on this answer "
    "Hive's client (HiveMetaStoreClient, PartitionPruner) prunes partitions itself")
_OTHER_CATALOG = ("; hms-txn keeps databases in the `hive` catalog only "
                  "(service/catalog/catalog_names.py)")
_WM = ("as Hive with no resource plan: NoSuchObjectException \"There is no resource plan "
       "named: <plan>\" (creating plans is refused, so none exists)")
_NO_SCHEMA = "as Hive with an empty schema registry: NoSuchObjectException with Hive's text"
IMPLEMENTED.update({
    "get_partitions_by_expr": _JAVA_EXPRESSION,
    "get_partitions_spec_by_expr": _JAVA_EXPRESSION,
    "get_partition_names_req": (
        "every partition name in the order asked; with a non-empty expression "
        "TApplicationException UNKNOWN_METHOD (a Kryo-serialized Hive expression)"),
    "drop_partitions_req": (
        "by names; with expressions TApplicationException UNKNOWN_METHOD (Kryo-serialized "
        "Hive expressions)"),
    "create_catalog": "the catalog is a record holding no databases" + _OTHER_CATALOG,
    "drop_catalog": (
        "never `hive` (MetaException \"Can not drop hive catalog\"); Hive deletes the "
        "catalog's directory, hms-txn only when it is empty"),
    "create_database": (
        "in another catalog: InvalidObjectException \"No such catalog\", or MetaException "
        "when it exists" + _OTHER_CATALOG),
    "create_database_req": (
        "as create_database; a REMOTE database is stored, its tables are not fetched "
        "through the data connector"),
    "create_dataconnector": "stored; hms-txn fetches no tables through a connector",
    "translate_table_dryrun": (
        "the table as sent: hms-txn has no metadata transformer (as Hive with "
        "`metastore.metadata.transformer.class` empty)"),
    "get_table": (
        "an ACID table in the plain form for a client that has not declared it understands "
        "it (hms_txn/domain/catalog/plain_form.py; Hive hands a full-ACID table as stored and "
        "refuses an insert-only one)"),
    "get_table_req": (
        "as get_table for a client that declared too little; processor capabilities get "
        "Hive 4's translation (service/catalog/table_access.py)"),
    "get_table_objects_by_name": "ACID tables as get_table gives them",
    "get_table_objects_by_name_req": "ACID tables as get_table_req gives them, untranslated",
    "get_tables_ext": (
        "empty without processor capabilities or with MANAGERAWMETADATA, as Hive; the access "
        "type and required capabilities are Hive 4's default translation's "
        "(service/catalog/table_access.py)"),
    "truncate_table": (
        "on a transactional table refused with MetaException: it needs the write id of "
        "truncate_table_req (Hive would write a base_-000001)"),
    "truncate_table_req": (
        "a transactional table gets an empty base_<writeId> (Hive's layout), others lose "
        "their files after the commit; environmentContext truncateSkipDataDeletion honoured"),
    "update_creation_metadata": (
        "also writes an ALTER_TABLE event of the view (Hive writes none) so that every "
        "metadata cache drops it"),
    "get_materialization_invalidation_info": (
        "no result (Hive's null) when the view names no source, has Iceberg snapshots or "
        "its snapshot lacks a source, as Hive"),
    "get_type_all": "always MetaException \"Not yet implemented\", as Hive",
    "cm_recycle": "does nothing: change management is off (Hive's default)",
    "get_file_metadata": "isSupported false and no metadata, as Hive's ObjectStore",
    "get_file_metadata_by_expr": "isSupported false and no metadata, as Hive's ObjectStore",
    "cache_file_metadata": "isSupported false, as Hive's ObjectStore",
    "put_file_metadata": "does nothing, as Hive's ObjectStore (file metadata unsupported)",
    "clear_file_metadata": (
        "TApplicationException INTERNAL_ERROR, as Hive (its ObjectStore throws "
        "UnsupportedOperationException; the Java metastore 2.3 answers the same)"),
    "create_resource_plan": (
        "MetaException: hms-txn stores no resource plans (workload management needs "
        "HiveServer2's workload manager and LLAP)"),
    "get_active_resource_plan": "no active plan (resourcePlan unset), as Hive on a fresh metastore",
    "get_all_resource_plans": "an empty list, as Hive on a fresh metastore",
    **{name: _WM for name in (
        "get_resource_plan", "alter_resource_plan", "validate_resource_plan",
        "drop_resource_plan", "create_wm_trigger", "alter_wm_trigger", "drop_wm_trigger",
        "get_triggers_for_resourceplan", "create_wm_pool", "alter_wm_pool", "drop_wm_pool",
        "create_or_update_wm_mapping", "drop_wm_mapping",
        "create_or_drop_wm_trigger_to_pool_mapping")},
    "scheduled_query_poll": "nothing is ever due (all fields unset), as Hive with no schedules",
    "scheduled_query_maintenance": (
        "CREATE refused with MetaException (the scheduled-query executor is not supported); "
        "ALTER and DROP find no schedule: NoSuchObjectException"),
    "scheduled_query_progress": "InvalidOperationException \"invalid executionId: <id>\", as Hive for an unknown execution",
    "get_scheduled_query": "NoSuchObjectException, as Hive for an unknown schedule",
    "create_ischema": "MetaException: hms-txn has no schema registry",
    "add_serde": "MetaException: hms-txn has no schema registry",
    **{name: _NO_SCHEMA for name in (
        "alter_ischema", "get_ischema", "drop_ischema", "add_schema_version",
        "get_schema_version", "get_schema_latest_version", "get_schema_all_versions",
        "drop_schema_version", "map_schema_version_to_serde", "set_schema_version_state",
        "get_serde")},
    "get_schemas_by_cols": "an empty list, as Hive with an empty schema registry",
    "get_properties": "MetaException: hms-txn has no property store (Hive's answer for an unknown namespace)",
    "set_properties": "MetaException: hms-txn has no property store (Hive's answer for an unknown namespace)",
})
