"""The errors of the ACID table clients: ``spark.hive_acid`` and ``hms_txn.tables`` raise
these same classes. No imports: Spark's Python workers raise them too."""


class HiveAcidError(Exception):
    """Something a client of ACID tables cannot do (bad table, bad request, lock timeout)."""


class WriteConflictError(HiveAcidError):
    """The transaction lost a write-write conflict and was aborted by the metastore."""
