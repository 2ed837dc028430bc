"""Client capabilities: which clients get an ACID table, and how Hive 4 translates a table
for the client reading it. Plain functions on table documents (the stored form).

**What a client declares.** Hive 3 added ``ClientCapabilities`` to the request-style reads
(``get_table_req``, ``get_table_objects_by_name_req``): every Hive 3/4 client sends
``[INSERT_ONLY_TABLES]`` there (HiveMetaStoreClient.VERSION), and so do Trino and Impala,
which read ACID tables correctly. Hive 4 added ``processorCapabilities`` (``HIVEFULLACIDREAD``,
``EXTWRITE``, ...), which its metastore's ``MetastoreDefaultTransformer`` turns into the
table's ``accessType`` and ``requiredRead/WriteCapabilities``. Hive 2.x clients (Spark's
built-in Hive 2.3 client among them: ``HiveMetaStoreClient.VERSION`` is null there, and
``getTable`` calls plain ``get_table``) declare nothing; neither can anybody on ``get_table``
and ``get_table_objects_by_name``, which have no field for it.

**Who gets an ACID table as stored.** A client that does not hold what the table needs
(insert-only tables: ``INSERT_ONLY_TABLES``, Hive 3/4's own rule; full-ACID tables: any
declared capability, ours) gets it in the plain form while ``metastore.client.capability
.check`` is on (``domain.catalog.plain_form``): it can describe, list, show and drop the table, and
its reads and writes fail loudly. With the check off it gets the table as stored.

**Hive 4's translation** (``transform``, ``translates``): HMSHandler.getTableInternal runs
the transformer on ``get_table_req`` when ``processorCapabilities`` is non-empty and does not
hold ``"MANAGERAWMETADATA"``, and ``get_tables_ext`` likewise (its answer is empty
otherwise); ``get_table``, ``get_table_objects_by_name(_req)`` are never translated. The
transformer runs whatever ``metastore.client.capability.check`` says. ``transform`` follows
``MetastoreDefaultTransformer.transform`` (Hive 4, standalone-metastore/metastore-server)
branch by branch, including its side effects that reach the wire: ``retainAll`` on the
request's capability list (later tables of one ``get_tables_ext`` call see the narrowed
list) and the view branch's required-read list, which aliases the list it later appends to.
Two departures, both where Hive fails or corrupts its own state: a table with
``OBJCAPABILITIES`` whose non-ACID managed branch calls ``diff`` on the fixed-size
``Arrays.asList`` (``UnsupportedOperationException`` in Hive when the client holds some but
not all of them) gets the missing capabilities computed here; and ``diff(MQTLIST, ...)``,
which in Hive shrinks a static list for every later call, touches only the transformer's
unused hint list, so it is not modelled.

``accessType`` and the required capabilities are per client: Hive's stored table has no
such columns. ``stored_form`` drops them from a table a client sends back (a Hive 4 client
alters the table it got from ``get_table_req``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

Doc = dict[str, Any]

# hive_metastore.thrift: enum ClientCapability, ACCESSTYPE_* constants, GetTablesExtRequestFields
INSERT_ONLY_TABLES = 2
ACCESSTYPE_NONE, ACCESSTYPE_READONLY, ACCESSTYPE_WRITEONLY, ACCESSTYPE_READWRITE = 1, 2, 4, 8
EXT_ACCESS_TYPE, EXT_PROCESSOR_CAPABILITIES = 1, 2

PER_CLIENT_FIELDS = ("accessType", "requiredReadCapabilities", "requiredWriteCapabilities")

# MetastoreDefaultTransformer's capability names
CONNECTORREAD, CONNECTORWRITE = "CONNECTORREAD", "CONNECTORWRITE"
EXTREAD, EXTWRITE = "EXTREAD", "EXTWRITE"
HIVEBUCKET2 = "HIVEBUCKET2"
HIVECACHEINVALIDATE = "HIVECACHEINVALIDATE"
HIVEFULLACIDREAD, HIVEFULLACIDWRITE = "HIVEFULLACIDREAD", "HIVEFULLACIDWRITE"
HIVEMANAGEDINSERTREAD, HIVEMANAGEDINSERTWRITE = "HIVEMANAGEDINSERTREAD", "HIVEMANAGEDINSERTWRITE"
HIVEMANAGESTATS = "HIVEMANAGESTATS"
HIVEMQT = "HIVEMQT"
HIVESQL = "HIVESQL"
ACCEPTSUNMODIFIEDMETADATA = "ACCEPTS_UNMODIFIED_METADATA"
OBJCAPABILITIES = "OBJCAPABILITIES"
# HMSHandler skips the transformer for this string (the transformer's own constant for the
# same idea is "MANAGE_RAW_METADATA", which HMSHandler does not look for)
MANAGERAWMETADATA = "MANAGERAWMETADATA"

_ACID_COMMON_WRITES = [HIVEMANAGESTATS, HIVECACHEINVALIDATE, CONNECTORWRITE]
_ACID_WRITES = [HIVEFULLACIDWRITE, *_ACID_COMMON_WRITES]
_INSERT_ONLY_WRITES = [HIVEMANAGEDINSERTWRITE, *_ACID_COMMON_WRITES]
_ACID_READS = [HIVEFULLACIDREAD, CONNECTORREAD]            # getReads(acidList)
_INSERT_ONLY_READS = [HIVEMANAGEDINSERTREAD, CONNECTORREAD]  # getReads(insertOnlyList)

FULL_ACID, INSERT_ONLY = "full-ACID", "insert-only"


@dataclass(frozen=True)
class Declared:
    """What a request says its client understands: Hive 3's ``ClientCapabilities`` values
    and Hive 4's ``processorCapabilities`` (None: the field was not sent)."""
    capabilities: tuple[int, ...] | None = None
    processor: tuple[str, ...] | None = None

    @property
    def insert_only_tables(self) -> bool:
        return INSERT_ONLY_TABLES in (self.capabilities or ())

    @property
    def anything(self) -> bool:
        return self.insert_only_tables or bool(self.processor)


UNDECLARED = Declared()


def declared(capabilities: Iterable[int] | None, processor: Iterable[str] | None) -> Declared:
    return Declared(None if capabilities is None else tuple(capabilities),
                    None if processor is None else tuple(processor))


def _params(doc: Doc) -> dict:
    return doc.get("parameters") or {}


def acid_kind(doc: Doc) -> str | None:
    """``INSERT_ONLY`` (Hive's isInsertOnlyTableParam), ``FULL_ACID`` (transactional=true,
    not insert-only) or None."""
    params = _params(doc)
    if str(params.get("transactional_properties", "")).lower() == "insert_only":
        return INSERT_ONLY
    if str(params.get("transactional", "")).lower() == "true":
        return FULL_ACID
    return None


# ---------------------------------------------------------------- Hive 4's translation

def translates(processor: Sequence[str] | None) -> bool:
    """Whether Hive 4's metastore runs its transformer for these processor capabilities."""
    return bool(processor) and MANAGERAWMETADATA not in processor


def transform(docs: Sequence[Doc], processor: Sequence[str]) -> list[Doc]:
    """The tables as MetastoreDefaultTransformer.transform gives them to a client with
    ``processor`` capabilities (new documents; ``docs`` are not changed). One capability
    list is narrowed from table to table, as in Hive (see the module docstring)."""
    caps = list(processor)
    return [_transform_one(doc, caps) for doc in docs]


def _retain(caps: list[str], keep: Sequence[str]) -> None:
    caps[:] = [c for c in caps if c in keep]


def _writes(capabilities: Sequence[str]) -> list[str]:
    return [c for c in capabilities if c.upper().endswith(("WRITE", "STATS", "INVALIDATE"))]


def _reads(capabilities: Sequence[str]) -> list[str]:
    return [c for c in capabilities if c.upper().endswith(("READ", "SQL"))]


def _diff(list1: Sequence[str], list2: Sequence[str]) -> list[str]:
    """MetastoreDefaultTransformer.diff: what of list1 is missing from list2, with its
    quirk (the lists' common part as long as list1 counts as nothing missing)."""
    if not list2:
        return list(list1)
    if not list1 or all(x in list2 for x in list1):
        return []
    common = [x for x in list2 if x in list1]
    if len(common) != len(list2) and len(common) == len(list1):
        return []
    return [x for x in list1 if x not in common]


def _split_capabilities(text: str) -> list[str]:
    """Java's ``tCapabilities.replaceAll("\\s", "").toUpperCase().split(",")``."""
    text = "".join(text.split()).upper()
    if text == "":
        return [""]
    parts = text.split(",")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _num_buckets(doc: Doc) -> int:
    sd = doc.get("sd")
    return int(sd.get("numBuckets") or 0) if sd is not None else 0


def _unbucketed(doc: Doc, caps: Sequence[str]) -> None:
    """The bucketing a client without HIVEBUCKET2 is not shown."""
    doc["sd"] = dict(doc["sd"])
    if ACCEPTSUNMODIFIEDMETADATA not in caps:
        doc["sd"]["numBuckets"] = -1


def _transform_one(source: Doc, caps: list[str]) -> Doc:
    doc = dict(source)
    for name in PER_CLIENT_FIELDS:
        doc.pop(name, None)
    if str(doc.get("catName") or "hive").lower() != "hive":   # only the default catalog
        return doc
    required = _params(doc).get(OBJCAPABILITIES)
    if required is None:
        _by_table_type(doc, caps)
    else:
        _by_table_capabilities(doc, caps, _split_capabilities(required))
    return doc


def _set(doc: Doc, access: int, *, reads: Sequence[str] | None = None,
         writes: Sequence[str] | None = None) -> None:
    doc["accessType"] = access
    if reads is not None:
        doc["requiredReadCapabilities"] = list(reads)
    if writes is not None:
        doc["requiredWriteCapabilities"] = list(writes)


def _by_table_type(doc: Doc, caps: list[str]) -> None:
    """The transformer's branches for a table without OBJCAPABILITIES."""
    params = _params(doc)
    ttype = doc.get("tableType")
    if ttype == "EXTERNAL_TABLE":
        if _num_buckets(doc) > 0:
            if HIVEBUCKET2 in caps:
                _set(doc, ACCESSTYPE_READWRITE)
            else:
                _unbucketed(doc, caps)
                _set(doc, ACCESSTYPE_READONLY, writes=[HIVEBUCKET2])
        elif EXTWRITE in caps and EXTREAD in caps:
            _set(doc, ACCESSTYPE_READWRITE)
        elif EXTREAD in caps:
            _set(doc, ACCESSTYPE_READONLY, writes=[EXTWRITE])
        else:
            _set(doc, ACCESSTYPE_NONE, reads=[EXTREAD], writes=[EXTWRITE])
    elif ttype == "MANAGED_TABLE":
        txnal = params.get("transactional")
        if txnal is None or txnal.lower() == "false":
            _set(doc, ACCESSTYPE_READWRITE)
        elif txnal.lower() == "true":
            insert_only = str(params.get("transactional_properties", "")).lower() == "insert_only"
            write, read = ((HIVEMANAGEDINSERTWRITE, HIVEMANAGEDINSERTREAD) if insert_only
                           else (HIVEFULLACIDWRITE, HIVEFULLACIDREAD))
            writes = _INSERT_ONLY_WRITES if insert_only else _ACID_WRITES
            reads = _INSERT_ONLY_READS if insert_only else _ACID_READS
            if write in caps or CONNECTORWRITE in caps:
                _set(doc, ACCESSTYPE_READWRITE)
                _retain(caps, writes)
            elif read in caps or CONNECTORREAD in caps:
                _set(doc, ACCESSTYPE_READONLY, writes=writes)
                _retain(caps, reads)
            else:
                _set(doc, ACCESSTYPE_NONE, reads=[CONNECTORREAD, read], writes=writes)
    elif ttype == "VIRTUAL_VIEW":
        if HIVESQL in caps or CONNECTORREAD in caps:
            _set(doc, ACCESSTYPE_READONLY)
        else:
            # Hive sets the (empty) hint list as the required reads, then appends to it
            _set(doc, ACCESSTYPE_NONE, reads=[HIVESQL, CONNECTORREAD])
    elif ttype == "MATERIALIZED_VIEW":
        if (CONNECTORREAD in caps or HIVEFULLACIDREAD in caps) and HIVEMQT in caps:
            _set(doc, ACCESSTYPE_READONLY)
        else:
            _set(doc, ACCESSTYPE_NONE, reads=[CONNECTORREAD, HIVEMQT])
    else:
        _set(doc, ACCESSTYPE_NONE)


def _by_table_capabilities(doc: Doc, caps: list[str], required: list[str]) -> None:
    """The transformer's branches for a table whose OBJCAPABILITIES name what it needs."""
    params = _params(doc)
    ttype = doc.get("tableType")
    has_all = all(c in caps for c in required)
    missing_writes = _diff(_writes(required), _writes(caps))
    if ttype == "EXTERNAL_TABLE":
        if has_all:
            _set(doc, ACCESSTYPE_READWRITE)
            return
        bucketed = _num_buckets(doc) > 0
        writes: list[str] = []
        if HIVEBUCKET2 in required and HIVEBUCKET2 not in caps:
            _unbucketed(doc, caps)
            doc["accessType"] = ACCESSTYPE_READONLY
            writes.append(HIVEBUCKET2)
        if EXTWRITE in required and EXTWRITE in caps and not bucketed:
            doc["accessType"] = ACCESSTYPE_READWRITE
            return
        if EXTREAD in required and EXTREAD in caps:
            _set(doc, ACCESSTYPE_READONLY, writes=writes + [EXTWRITE])
        else:
            _set(doc, ACCESSTYPE_NONE, reads=[EXTREAD], writes=writes + _writes(required))
    elif ttype == "MANAGED_TABLE":
        txnal = params.get("transactional")
        if not caps:
            _set(doc, ACCESSTYPE_NONE, reads=_reads(required), writes=_writes(required))
        elif has_all:
            _set(doc, ACCESSTYPE_READWRITE)
        elif txnal is None or txnal.lower() == "false":
            _set(doc, ACCESSTYPE_READONLY, writes=_writes(_diff(required, caps)))
        elif txnal.lower() == "true":
            insert_only = str(params.get("transactional_properties", "")).lower() == "insert_only"
            if all(c in caps for c in _writes(required)) or HIVEFULLACIDWRITE in caps \
                    or CONNECTORWRITE in caps:
                _set(doc, ACCESSTYPE_READWRITE)
            elif insert_only and (all(c in caps for c in _reads(required))
                                  or HIVEMANAGEDINSERTREAD in caps or CONNECTORREAD in caps):
                _set(doc, ACCESSTYPE_READONLY, writes=missing_writes)
            elif not insert_only and (HIVEFULLACIDREAD in caps or CONNECTORREAD in caps):
                _set(doc, ACCESSTYPE_READONLY, writes=missing_writes)
            else:
                _set(doc, ACCESSTYPE_NONE, writes=missing_writes,
                     reads=_diff(_reads(required), _reads(caps)))
    elif ttype in ("VIRTUAL_VIEW", "MATERIALIZED_VIEW"):
        if has_all:
            _set(doc, ACCESSTYPE_READONLY)
        else:
            _set(doc, ACCESSTYPE_NONE, reads=_diff(_reads(required), _reads(caps)))
    else:
        _set(doc, ACCESSTYPE_NONE, reads=_reads(required), writes=_writes(required))


def extended_info(doc: Doc, requested_fields: int) -> Doc:
    """HMSHandler.convertTableToExtendedTable: an ExtendedTableInfo document. Hive copies
    ``getAccessType()`` when asked for it, which is 0 for a table the transformer left
    without one."""
    info: Doc = {"tblName": doc.get("tableName")}
    if requested_fields & EXT_ACCESS_TYPE == EXT_ACCESS_TYPE:
        info["accessType"] = doc.get("accessType", 0)
    if requested_fields & EXT_PROCESSOR_CAPABILITIES == EXT_PROCESSOR_CAPABILITIES:
        for name in ("requiredReadCapabilities", "requiredWriteCapabilities"):
            if doc.get(name) is not None:
                info[name] = doc[name]
    return info


def stored_form(doc: Doc) -> Doc:
    """A table a client sent, without what is only ever computed for one client."""
    if not any(name in doc for name in PER_CLIENT_FIELDS):
        return doc
    doc = copy.copy(doc)
    for name in PER_CLIENT_FIELDS:
        doc.pop(name, None)
    return doc
