"""What every builder of ``hms_txn.domain.events.event_messages`` shares: the context a message is
built in, the entry it returns, and Hive's small encodings (file URIs, partition key maps,
booleans as text)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

from hms_txn.common.config import JSON_MESSAGE_FORMAT
from hms_txn.domain.model import names

Doc = Mapping[str, Any]
# object_json(kind, doc): the TJSONProtocol text of a document as the Thrift struct ``kind``
# ("Table", "Partition", "Database", "Function", "ColumnStatistics", "SQLPrimaryKey", ...),
# which is what Hive's MessageBuilder.create*ObjJson writes (TSerializer + TJSONProtocol).
# Injected: the domain never imports Thrift (hms_txn.wire.codec.object_json is the one).
ObjectJson = Callable[[str, Doc], str]

# The catalog Hive puts on a DDL event whose object names none (Warehouse.DEFAULT_CATALOG_NAME).
DEFAULT_CATALOG = "hive"


@dataclass(frozen=True)
class MessageContext:
    """What Hive's MessageBuilder takes from its configuration.

    ``server`` is ``metastore.thrift.uris`` of the writing metastore and
    ``service_principal`` its ``metastore.kerberos.principal`` (Hive writes "" for unset
    ones); ``clock`` gives the time in seconds (``MessageBuilder.now()`` is
    ``currentTimeMillis()/1000``, a JSON number of seconds); ``message_format`` is the
    MESSAGE_FORMAT the log's rows are written in (``formats``: the encoder of
    ``hive.metastore.event.message.factory``).
    """
    object_json: ObjectJson
    server: str = ""
    service_principal: str = ""
    clock: Callable[[], float] = field(default=time.time)
    message_format: str = JSON_MESSAGE_FORMAT

    def now(self) -> int:
        return int(self.clock())

    def obj(self, kind: str, doc: Doc | None) -> str | None:
        """The TJSON text of ``doc`` as ``kind``; None for no object (Hive's null)."""
        return None if doc is None else self.object_json(kind, doc)

    def head(self) -> dict[str, Any]:
        """``server`` and ``servicePrincipal``, the first keys of most messages."""
        return {"server": self.server, "servicePrincipal": self.service_principal}


class LogEntry(NamedTuple):
    """One NOTIFICATION_LOG row to write: EVENT_TYPE, the message (a dict, encoded by
    ``formats.encode`` into MESSAGE and MESSAGE_FORMAT), and the DB_NAME, TBL_NAME and
    CAT_NAME columns exactly as Hive's DbNotificationListener sets them (None is SQL NULL:
    Hive leaves all three NULL on transaction events)."""
    event_type: str
    message: dict[str, Any]
    db_name: str | None
    tbl_name: str | None
    cat_name: str | None


def bool_text(value: bool) -> str:
    """Hive writes isTruncateOp, replace and refreshEvent as ``Boolean.toString``."""
    return "true" if value else "false"


def encode_file(path: str, subdir: str | None = None) -> str:
    """``ReplChangeManager.encodeFileUri(path, checksum, cmRoot, subdir)`` as a metastore
    without change management writes it: ``<path>#<checksum>#<cmroot>#<subdir>`` with the
    checksum and cm root left empty (Hive fills them only when both are known)."""
    return f"{path}###{subdir or ''}"


def encode_files(paths: Iterable[str], subdirs: Sequence[str | None] | None = None) -> list[str]:
    """``encode_file`` of each path, with the subdirectory of the same index (Hive's
    ``InsertEventRequestData.subDirectoryList``) when there is one."""
    subdirs = subdirs or ()
    return [encode_file(p, subdirs[i] if i < len(subdirs) else None) for i, p in enumerate(paths)]


# ReplChangeManager.TXN_WRITE_EVENT_FILE_SEPARATOR: how TXN_WRITE_NOTIFICATION_LOG.WNL_FILES
# and WriteEventInfo.files join a write's files (joinWithSeparator / getListFromSeparatedString).
WRITE_EVENT_FILE_SEPARATOR = "]"


def join_write_event_files(files: Iterable[str]) -> str:
    return WRITE_EVENT_FILE_SEPARATOR.join(files)


def split_write_event_files(text: str | None) -> list[str]:
    """``getListFromSeparatedString``: split at "]" with the blanks around it."""
    if not text:
        return []
    return [f.strip() for f in text.split(WRITE_EVENT_FILE_SEPARATOR)]


def partition_keys(table: Doc) -> list[str]:
    """The table's partition column names, as stored (Hive stores them lower-case)."""
    return [k["name"] for k in table.get("partitionKeys") or []]


def partition_key_values(table: Doc, values: Sequence[str]) -> dict[str, str]:
    """``MessageBuilder.getPartitionKeyValues``: partition column name -> value, in the
    table's key order."""
    return dict(zip(partition_keys(table), values))


def partition_name(table: Doc, values: Sequence[str]) -> str:
    """``Warehouse.makePartName``: ``k1=v1/k2=v2`` with Hive's escaping."""
    return names.make_partition_name(partition_keys(table), [str(v) for v in values])


def catalog_of(doc: Doc | None, key: str = "catName") -> str:
    """The catalog column of a DDL event: the object's catalog, else Hive's default."""
    return (doc or {}).get(key) or DEFAULT_CATALOG


def _param_true(doc: Doc, key: str) -> bool:
    return str((doc.get("parameters") or {}).get(key, "")).strip().lower() == "true"


def is_external(table: Doc) -> bool:
    """``MetaStoreUtils.isExternalTable``, the test DbNotificationListener uses to list no
    files for a table: its EXTERNAL parameter is TRUE (ignoring case)."""
    return _param_true(table, "EXTERNAL")


def is_transactional(table: Doc) -> bool:
    """``AcidUtils.isTransactionalTable``: the ``transactional`` parameter is true."""
    return _param_true(table, "transactional")
