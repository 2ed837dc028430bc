"""Talking to the metastore for the ACID table clients (``spark.hive_acid``'s driver and
planner processes, ``hms_txn.tables``).

Thin helpers over the generated Thrift client: the connection (``MetastoreConnection``, on
``hms_txn.wire.client``), snapshots (ValidTxnList built from ``get_open_txns`` the way
Hive's client builds it, ValidWriteIdList strings from ``get_valid_write_ids``), locks that
wait, and table descriptions (``TableInfo``) with their partitions.

Importing this module stays cheap: Spark's Python workers import it for ``TableInfo`` and
the errors, and the generated Thrift modules take seconds to import, so they are imported
when a connection opens or a Thrift struct is first built (``T``), never here.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from thrift.transport.TTransport import TTransportException

from orc_acid import fs as afs
from orc_acid.layout import parse_partition_name, partition_dir_name

from hms_txn.clients import snapshots
from hms_txn.clients.acid.errors import HiveAcidError


class _LazyTtypes:
    """``hms_txn.wire.thrift_gen...ttypes``, imported on first use (see the module
    docstring)."""

    def __getattr__(self, name):
        from hms_txn.wire.thrift_gen.hive_metastore import ttypes
        return getattr(ttypes, name)


T = _LazyTtypes()

# LockType / LockLevel / LockState / DataOperationType values (hive_metastore.thrift)
SHARED_READ, SHARED_WRITE, EXCLUSIVE, EXCL_WRITE = 1, 2, 3, 4
LEVEL_DB, LEVEL_TABLE, LEVEL_PARTITION = 1, 2, 3
ACQUIRED, WAITING = 1, 2
OP_SELECT, OP_INSERT, OP_UPDATE, OP_DELETE = 1, 2, 3, 4

ORC_INPUT = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUTPUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
PARQUET_INPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"

USER = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
HOST = socket.gethostname()
AGENT = "hms-txn-spark"      # a connection's default agentInfo (``MetastoreConnection.agent``)


# -- the connection ---------------------------------------------------------------------------

class MetastoreConnection:
    """One Thrift connection (``hms_txn.wire.client.connect``: the URIs of ``uri`` tried in
    order, so a reconnect fails over to the next server that answers), usable from several
    threads: calls are serialized, and a call that finds the connection broken reconnects
    and is retried once (but ``lock``: :meth:`call`)."""

    def __init__(self, uri: str, timeout_s: float = 120.0, options=None, agent: str = AGENT):
        """``options``: ``hms_txn.wire.client.ClientOptions`` (TLS, SASL, transport) as
        ``hms_txn.clients.connection.client_options`` makes them from the session's
        configuration; the socket timeout is ``timeout_s``; ``agent``: the agentInfo of its
        transactions and locks (what ``show_locks`` / ``hms-txn txn list`` show)."""
        self.agent = agent
        # hms_txn.wire.client imports the generated client: imported here and in _open, not
        # at the top (see the module docstring)
        from dataclasses import replace
        from hms_txn.wire.client import ClientOptions, parse_uris
        try:
            self._endpoints = parse_uris(uri)
        except ValueError as e:
            raise HiveAcidError(f"cannot parse metastore uri {uri!r} ({e})") from None
        self.uri = uri
        self._options = replace(options or ClientOptions(), timeout=timeout_s)
        # the file-system keys (fs.s3a.*, ...) of the session: orc_acid.fs's options
        self.fs_options: Dict[str, str] = {}
        self._lock = threading.RLock()
        self._client = None

    def _open(self):
        from hms_txn.wire.client import connect
        return connect(self._endpoints, options=self._options)

    def call(self, name: str, *args):
        """Call a metastore method; reconnect once on a broken connection and retry, but
        never ``lock`` (``wire.failover.CANNOT_RETRY``, as Hive's client: the server may
        have enqueued the lock before the connection broke, and a retry would enqueue a
        second one; a txn-less read lock left so would block writers until it timed out)."""
        with self._lock:
            for attempt in (0, 1):
                if self._client is None:
                    self._client = self._open()
                try:
                    return getattr(self._client, name)(*args)
                except (TTransportException, OSError, EOFError) as e:
                    self.close()
                    from hms_txn.wire.failover import CANNOT_RETRY   # see _open
                    if name in CANNOT_RETRY:
                        raise HiveAcidError(
                            f"the connection to the metastore ({self.uri}) broke before it "
                            f"answered {name} ({type(e).__name__}: {e}); not sent again: "
                            f"the metastore may hold the request, which expires unless "
                            f"heartbeated (hive.txn.timeout)") from e
                    if attempt:
                        raise

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self.call(name, *args)

    def close(self):
        with self._lock:
            if self._client is not None:
                self._client.close()
            self._client = None


# -- snapshots --------------------------------------------------------------------------------

def valid_txn_list(ms: MetastoreConnection, current_txn: int = 0) -> str:
    """The ValidTxnList of a new snapshot (as Hive's ``createValidReadTxnList``)."""
    return str(snapshots.valid_txn_list(ms.get_open_txns(), current_txn))


def valid_write_ids(ms: MetastoreConnection, full_names: Sequence[str], txns: str
                    ) -> Dict[str, str]:
    resp = ms.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=[n.lower() for n in full_names], validTxnList=txns))
    out = {}
    for t in resp.tblValidWriteIds:
        t.fullTableName = t.fullTableName.lower()
        out[t.fullTableName] = str(snapshots.valid_write_id_list(t))
    return out


# -- locks ------------------------------------------------------------------------------------

def acquire_lock(ms: MetastoreConnection, components: List[T.LockComponent], txn_id: int = 0,
                 *, timeout_s: float = 300.0) -> int:
    """Request a lock and wait (polling check_lock) until it is ACQUIRED."""
    resp = ms.lock(T.LockRequest(component=components, txnid=txn_id or None, user=USER,
                                 hostname=HOST,
                                 agentInfo=getattr(ms, "agent", AGENT)))
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while resp.state != ACQUIRED:
        if resp.state != WAITING:
            raise HiveAcidError(f"lock {resp.lockid} refused: state {resp.state} "
                                f"{resp.errorMessage or ''}")
        if time.monotonic() > deadline:
            try:
                if not txn_id:
                    ms.unlock(T.UnlockRequest(lockid=resp.lockid))
            except Exception:
                pass
            raise HiveAcidError(f"lock {resp.lockid} on {components[0].dbname}."
                                f"{components[0].tablename} not acquired within {timeout_s:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)
        resp = ms.check_lock(T.CheckLockRequest(lockid=resp.lockid, txnid=txn_id or None))
    return resp.lockid


def lock_component(db: str, table: str, lock_type: int, op: int, *, transactional=True,
                   dynamic=False) -> T.LockComponent:
    return T.LockComponent(type=lock_type, level=LEVEL_TABLE, dbname=db, tablename=table,
                           operationType=op, isTransactional=transactional,
                           isDynamicPartitionWrite=dynamic)


# -- tables -----------------------------------------------------------------------------------

def table_path(ms: "MetastoreConnection", location: str, what: str = "the table"):
    """(file system, path) of a table's or partition's location, through ``orc_acid.fs``
    with the session's ``spark.hadoop.fs.*`` keys (``ms.fs_options``): None and an absolute
    path for the local disk (on a cluster: a file system mounted at the same path on every
    host), a pyarrow file system for ``s3a://``, ``abfs://``, ``gs://``, ``hdfs://``. The
    file system object travels to the executors with the table (pyarrow file systems
    pickle, options and credentials included). Escapes (``%2F`` in a partition name) are
    part of the name, as in Hive, and stay."""
    if not location:
        raise HiveAcidError(f"{what} has no location")
    try:
        fs, path = afs.filesystem_for(location, getattr(ms, "fs_options", None))
    except afs.FileSystemError as e:
        raise HiveAcidError(f"{what} is at {location}: {e}") from None
    if fs is None and not os.path.isabs(path):
        raise HiveAcidError(f"{what} is at {location}, not an absolute path")
    return fs, path


@dataclass
class TableInfo:
    db: str
    name: str
    location: str                 # path in ``fs`` (local: absolute path)
    columns: List[Tuple[str, str]]        # (name, hive type), data columns
    partition_keys: List[Tuple[str, str]]
    transactional: bool
    insert_only: bool
    file_format: str              # "orc" | "parquet"
    num_buckets: int = -1
    bucket_cols: List[str] = field(default_factory=list)
    parameters: Dict[str, str] = field(default_factory=dict)
    fs: object = None             # pyarrow FileSystem of the location; None: local disk
    uri: str = ""                 # the location as the metastore has it

    def uri_of(self, path: str) -> str:
        """A path of ``fs`` as a location URI (what Hadoop-based readers take)."""
        return afs.uri_of(self.uri, path) if self.fs is not None else path

    @property
    def compression(self) -> str:
        """The table's ``orc.compress`` as a pyarrow codec name (Hive's default: ZLIB)."""
        c = (self.parameters.get("orc.compress") or "ZLIB").strip().lower()
        return {"none": "uncompressed", "snappy": "snappy", "zlib": "zlib", "lz4": "lz4",
                "zstd": "zstd"}.get(c, "zlib")

    @property
    def orc_file_version(self) -> str:
        """The ORC file version of the files encoded whole (delete deltas, update events,
        compaction output): the table's ``orc.write.format`` (ORC's own table property; 0.11
        encodes integers with run-length encoding v1, which pyarrow writes 2-3 times faster
        at about the same size), else 0.12, Hive's default. Insert files are always 0.12:
        their ACID columns are spliced in as RLE v2 streams (``orc_acid._insert_file``)."""
        v = (self.parameters.get("orc.write.format") or "").strip()
        return v if v in ("0.11", "0.12") else "0.12"

    @property
    def full_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def part_names(self) -> List[str]:
        return [k for k, _ in self.partition_keys]

    @property
    def data_names(self) -> List[str]:
        return [k for k, _ in self.columns]

    def check_columns(self, names: Sequence[str], argument: str = "columns") -> None:
        """HiveAcidError naming ``argument`` unless every name is a column of the table
        (data or partition column, case-insensitive)."""
        known = {c.lower() for c in self.data_names + self.part_names}
        bad = [n for n in names if str(n).lower() not in known]
        if bad:
            raise HiveAcidError(f"{argument}: {bad} not in {self.full_name}, whose columns "
                                f"are {self.data_names + self.part_names}")

    def column_mapping(self, names: Sequence[str]) -> Dict[str, str]:
        """Incoming column names -> table column names (by name, case-insensitive, or by
        position when the names do not match)."""
        table_cols = self.data_names + self.part_names
        lower = {c.lower(): c for c in table_cols}
        if all(n.lower() in lower for n in names) and \
                len(set(n.lower() for n in names)) == len(table_cols):
            return {n: lower[n.lower()] for n in names}
        if len(names) == len(table_cols):
            return dict(zip(names, table_cols))
        raise HiveAcidError(f"{self.full_name} has columns {table_cols}; the data has "
                            f"{list(names)}")


def split_name(full: str, default_db: str = "default") -> Tuple[str, str]:
    full = full.strip().replace("`", "")
    if "." in full:
        db, t = full.split(".", 1)
    else:
        db, t = default_db, full
    return db.lower(), t.lower()


def table_info(ms: MetastoreConnection, full: str) -> TableInfo:
    db, name = split_name(full)
    try:
        t = ms.get_table_acid_aware(db, name)
    except T.NoSuchObjectException:
        raise HiveAcidError(f"table {db}.{name} does not exist") from None
    params = dict(t.parameters or {})
    transactional = params.get("transactional", "").lower() == "true"
    insert_only = params.get("transactional_properties", "").lower() == "insert_only"
    inp = (t.sd.inputFormat or "").lower()
    fmt = "parquet" if "parquet" in inp else "orc"
    fs, path = table_path(ms, t.sd.location, f"table {db}.{name}")
    return TableInfo(
        db=db, name=name, location=path, fs=fs, uri=t.sd.location,
        columns=[(c.name, c.type) for c in (t.sd.cols or [])],
        partition_keys=[(c.name, c.type) for c in (t.partitionKeys or [])],
        transactional=transactional, insert_only=insert_only, file_format=fmt,
        num_buckets=t.sd.numBuckets if t.sd.numBuckets is not None else -1,
        bucket_cols=list(t.sd.bucketCols or []), parameters=params)


def require_acid(info: TableInfo, *, full_acid: bool = False) -> None:
    if not info.transactional:
        raise HiveAcidError(f"{info.full_name} is not a transactional table "
                            f"(TBLPROPERTIES transactional=true)")
    if full_acid and info.insert_only:
        raise HiveAcidError(f"{info.full_name} is an insert-only table: UPDATE, DELETE and "
                            f"MERGE need a full-ACID table")


def list_partitions(ms: MetastoreConnection, info: TableInfo, partition_filter: str = None
                    ) -> List[Tuple[str, List[str], str]]:
    """-> [(partition name, values, location as a path of the table's file system)]; with
    ``partition_filter``, those the metastore's ``get_partitions_by_filter`` answers for it."""
    if partition_filter:
        parts = ms.get_partitions_by_filter(info.db, info.name, partition_filter, -1)
    else:
        parts = ms.get_partitions(info.db, info.name, -1)
    out = []
    for p in parts:
        name = partition_dir_name(info.part_names,
                                  [None if v is None else str(v) for v in p.values])
        what = f"partition {name} of {info.full_name}"
        fs, path = table_path(ms, p.sd.location, what)
        if type(fs) is not type(info.fs):
            raise HiveAcidError(f"{what} is at {p.sd.location}, on another file system than "
                                f"the table ({info.uri})")
        out.append((name, list(p.values), path))
    return out


def partition_values(name: str) -> List[str]:
    """The values of a partition named ``k1=v1/k2=v2`` (unescaped)."""
    return [v for _, v in parse_partition_name(name)]


def add_partitions(ms: MetastoreConnection, info: TableInfo, names: Sequence[str]) -> None:
    """Register partitions (if missing) located at <table>/<name>."""
    if not names:
        return
    t = ms.get_table_acid_aware(info.db, info.name)
    parts = []
    now = int(time.time())
    for n in names:
        sd = T.StorageDescriptor(
            cols=t.sd.cols, location=t.sd.location.rstrip("/") + "/" + n,
            inputFormat=t.sd.inputFormat, outputFormat=t.sd.outputFormat,
            compressed=False, numBuckets=t.sd.numBuckets, serdeInfo=t.sd.serdeInfo,
            bucketCols=t.sd.bucketCols, sortCols=t.sd.sortCols, parameters={})
        parts.append(T.Partition(values=partition_values(n), dbName=info.db,
                                 tableName=info.name, createTime=now, lastAccessTime=0,
                                 sd=sd, parameters={}))
    ms.add_partitions_req(T.AddPartitionsRequest(dbName=info.db, tblName=info.name,
                                                 parts=parts, ifNotExists=True,
                                                 needResult=False))
