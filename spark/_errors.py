"""The errors of ``spark.hive_acid`` (re-exported there). No imports: Spark's Python workers
raise them too."""


class HiveAcidError(Exception):
    """Something the hive_acid integration cannot do (bad table, bad request, lock timeout)."""


class WriteConflictError(HiveAcidError):
    """The transaction lost a write-write conflict and was aborted by the metastore."""
