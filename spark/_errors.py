"""The errors of ``spark.hive_acid`` (re-exported there): the ACID table clients' own
(``hms_txn.clients.acid.errors``), so a caller catches the same class from Spark and from
``hms_txn.tables``."""

from hms_txn.clients.acid.errors import HiveAcidError, WriteConflictError

__all__ = ["HiveAcidError", "WriteConflictError"]
