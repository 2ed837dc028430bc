"""Domain errors.

Domain modules raise these; the Thrift handler maps each to the exception the called
method declares (see ``hms_txn.handler.errors``). Keeping them free of Thrift types lets the
domain be used and tested without the wire layer.
"""


class MetastoreError(Exception):
    """Base class. ``str(err)`` is the message the client sees."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NoSuchObject(MetastoreError):
    """A database, table, partition or function does not exist."""


class AlreadyExists(MetastoreError):
    """The object to create exists already."""


class InvalidObject(MetastoreError):
    """The object is malformed: bad name, type, missing storage descriptor, ..."""


class InvalidOperation(MetastoreError):
    """The object is fine but the operation is not allowed on it."""


class InvalidInput(MetastoreError):
    """A malformed argument (e.g. a partition filter that does not parse)."""


class Unsupported(MetastoreError):
    """A declared call or option this server does not implement."""


class Internal(MetastoreError):
    """A generic server-side failure; mapped to MetaException."""


class NoSuchTxn(MetastoreError):
    pass


class TxnAborted(MetastoreError):
    pass


class TxnOpen(MetastoreError):
    pass


class NoSuchLock(MetastoreError):
    pass


class NoSuchCompaction(MetastoreError):
    pass


class Refused(MetastoreError):
    """A request Hive's metastore refuses with a plain MetaException (a null name, a second
    primary key, dropping the ``hive`` catalog, ...): answered as the called method's
    MetaException even when the method declares more specific exceptions."""


class NoSuchNamespace(NoSuchObject):
    """An Iceberg namespace (a database, seen through the Iceberg REST catalog) does not
    exist; Thrift answers it as any ``NoSuchObject``."""


class ConcurrentModification(MetastoreError):
    """The object changed since the caller read it: a parameter no longer has the value the
    caller expected (Hive 4's ``expected_parameter_key``/``_value``), or an Iceberg commit's
    requirement does not hold. Nothing was changed; the caller may re-read and retry."""


class CommitStateUnknown(MetastoreError):
    """A write whose outcome cannot be known: the database failed while committing it (the
    commit may or may not have happened). The caller must re-read before retrying."""
