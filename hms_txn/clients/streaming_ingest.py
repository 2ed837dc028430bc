"""Streaming ingest into a Hive full-ACID table: rows readable within seconds of their commit.

A client of the metastore, as Hive's streaming API (``HiveStreamingConnection``) is: it talks
to the server over Thrift only and writes the files itself with ``orc_acid.streaming_writer``.

    from hms_txn.clients import streaming_ingest
    conn = streaming_ingest.connect("thrift://host:9083", "db.events", partition={"ds": "2024-05-01"})
    conn.begin_batch(10)             # 10 transactions, 10 write ids, one delta_X_Y/bucket_N
    for records in source:
        conn.write(records)           # rows (dicts / tuples) or a pyarrow Table / RecordBatch
        conn.commit()                 # flush + side-file length + commit_txn: readable now
    conn.close()                      # aborts whatever is still open, closes the file

Layout and protocol, as Hive lays them out:

* ``begin_batch(n)``: ``open_txns(n)`` (the server caps n at ``hive.txn.max.open.batch``),
  ``allocate_table_write_ids`` for all of them (contiguous write ids X..Y), one
  ``delta_X_Y/bucket_N`` (no statement id) with its ``bucket_N_flush_length`` side file.
* Each transaction of the batch in turn: a lock (SHARED_READ, operation INSERT,
  transactional, on the partition when there is one -- what Hive's streaming connection
  asks for), rows written with write id = that transaction's, then on :meth:`commit` an
  intermediate ORC footer, fsync, the new length appended to the side file, and
  ``commit_txn`` with a write event. Only then is the commit acknowledged, so a reader
  taking a snapshot after it sees the rows; rows of transactions still open or aborted sit
  in the same file and are filtered by their write id.
* :meth:`abort` aborts the current transaction (its unflushed rows are dropped);
  when every transaction of the batch is used the file is closed (its side file deleted).
* A heartbeat thread (its own connection) calls ``heartbeat_txn_range`` for the batch's
  unfinished transactions every ``heartbeat_interval`` seconds; transactions the server
  reports aborted (e.g. timed out) make the next commit fail with :class:`TxnAbortedError`.
* ``partition=``: a dict ``{key: value}`` or the value list; created (``add_partitions``,
  if not exists) when missing and ``create_partition`` is true.

Local file systems only: the side-file protocol needs a file that can be flushed and
extended while readers read its prefix. On object stores (S3, Azure, GCS) the client refuses
the table with a clear message (it does not fall back to one file per commit): write there
with whole-file transactions (``hive_acid``, ``orc_acid.write_delta``).

Not covered: dynamic partitioning (one connection writes one partition) and bucketed tables
(rows are not hashed to buckets; the table must not be bucketed). Several writers may
stream into one table or partition at the same time (their write id ranges never overlap);
give each a distinct ``bucket_id`` anyway to keep Hive's uniqueness rule.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
from typing import List, Optional

from orc_acid.layout import location_path, partition_dir_name

from hms_txn.clients.connection import client_options
from hms_txn.common.config import Config, ConfigError, parse_duration
from hms_txn.clients.streaming_batch import (LOCK_ACQUIRED, LOCK_WAITING, OP_INSERT,  # noqa: F401
                                             PARTITION_LEVEL, SHARED_READ, TABLE_LEVEL,
                                             StreamingError, TransactionBatch,
                                             TxnAbortedError, open_client)
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

__all__ = ["connect", "StreamingConnection", "TransactionBatch", "StreamingError",
           "TxnAbortedError", "hive_type_to_arrow"]

log = logging.getLogger(__name__)

# -- Hive types -> Arrow -----------------------------------------------------------------------

def hive_type_to_arrow(text: str):
    """A Hive column type string -> the pyarrow type the ORC files hold."""
    from orc_acid.hive_types import UnsupportedHiveType, arrow_type   # pyarrow: on first use
    try:
        return arrow_type(text)
    except UnsupportedHiveType:
        raise StreamingError(f"column type {text!r} is not supported by the streaming "
                             f"writer") from None


# -- the connection ------------------------------------------------------------------------

def connect(metastore_uri: str, table: str, partition=None, **kwargs) -> "StreamingConnection":
    """Open a streaming connection to ``"db.table"`` (``"table"``: database ``default``).

    Keyword arguments: ``agent_info`` (shown in the metastore's transaction list),
    ``heartbeat_interval`` (seconds; default a third of the server's ``hive.txn.timeout``),
    ``bucket_id`` (the ``bucket_N`` this writer writes, 0..4095), ``create_partition``
    (default True), ``user``, ``lock_timeout`` (seconds to wait for a lock),
    ``writer_options`` (``orc_acid.WriterOptions``), ``max_buffered_rows``,
    ``fsync`` (default True), ``conf`` (hive-site keys, a dict or ``common.config.Config``:
    TLS with ``hive.metastore.use.SSL`` and ``hive.metastore.truststore.path``, SASL, the
    framed and compact keys; read by ``clients.connection.client_options``, as the
    ``hms-txn`` commands read them)."""
    return StreamingConnection(metastore_uri, table, partition, **kwargs)


class StreamingConnection:
    """A writer into one table (or one partition of it). Not thread-safe: one thread
    writes; the heartbeat thread is internal."""

    def __init__(self, metastore_uri: str, table: str, partition=None, *,
                 agent_info: Optional[str] = None, heartbeat_interval: Optional[float] = None,
                 bucket_id: int = 0, create_partition: bool = True,
                 user: Optional[str] = None, lock_timeout: float = 60.0,
                 writer_options=None, max_buffered_rows: int = 1_000_000,
                 fsync: bool = True, rpc_timeout: float = 60.0, conf=None):
        self.uri = metastore_uri
        db, _, name = table.rpartition(".")
        self.db = (db or "default").lower()
        self.table = name.lower()
        self.full_name = f"{self.db}.{self.table}"
        self.user = user or _user()
        self.hostname = socket.gethostname()
        self.agent_info = agent_info or f"hms_txn.streaming pid {os.getpid()}"
        self.bucket_id = int(bucket_id)
        self.lock_timeout = lock_timeout
        self.writer_options = writer_options
        self.max_buffered_rows = max_buffered_rows
        self.fsync = fsync
        self.rpc_timeout = rpc_timeout
        config = conf if isinstance(conf, Config) else Config(conf or {}, source="conf")
        try:
            self.client_options = client_options(config, timeout=rpc_timeout)
        except ConfigError as err:
            raise StreamingError(str(err)) from None
        self._client = open_client(metastore_uri, self.client_options)
        self._rpc_lock = threading.Lock()
        self._closed = False
        self.batch: Optional[TransactionBatch] = None
        self.batches_done = 0
        try:
            tbl = self._client.get_table_acid_aware(self.db, self.table)
            self._check_table(tbl)
            self.row_schema = self._schema_of(tbl)
            self.partition_keys = [k.name for k in tbl.partitionKeys or []]
            self.partition_values = self._partition_values(partition)
            self.partition_name = None
            if self.partition_values is not None:
                from hms_txn.domain.model.names import make_partition_name
                self.partition_name = make_partition_name(self.partition_keys,
                                                          self.partition_values)
                self.location = self._ensure_partition(tbl, create_partition)
            else:
                self.location = tbl.sd.location
            self.local_location = _local(self.location)
            if heartbeat_interval is None:
                heartbeat_interval = max(0.5, self._server_txn_timeout() / 3.0)
            self.heartbeat_interval = float(heartbeat_interval)
        except BaseException:
            self._client.close()
            raise

    # -- setup ----------------------------------------------------------------------------

    def _check_table(self, tbl) -> None:
        params = {k.lower(): (v or "") for k, v in (tbl.parameters or {}).items()}
        if params.get("transactional", "").lower() != "true":
            raise StreamingError(f"{self.full_name} is not transactional")
        if params.get("transactional_properties", "").lower() == "insert_only":
            raise StreamingError(f"{self.full_name} is insert-only; streaming needs full ACID")
        fmt = " ".join(filter(None, [tbl.sd.inputFormat, tbl.sd.outputFormat,
                                     tbl.sd.serdeInfo.serializationLib if tbl.sd.serdeInfo
                                     else None])).lower()
        if fmt and "orc" not in fmt:
            raise StreamingError(f"{self.full_name} is not stored as ORC ({fmt})")
        if (tbl.sd.numBuckets or 0) > 0 and tbl.sd.bucketCols:
            raise StreamingError(f"{self.full_name} is bucketed: not supported by this writer")

    @staticmethod
    def _schema_of(tbl):
        import pyarrow as pa
        return pa.schema([pa.field(c.name, hive_type_to_arrow(c.type)) for c in tbl.sd.cols])

    def _partition_values(self, partition) -> Optional[List[str]]:
        if not self.partition_keys:
            if partition:
                raise StreamingError(f"{self.full_name} is not partitioned")
            return None
        if partition is None:
            raise StreamingError(f"{self.full_name} is partitioned by {self.partition_keys}: "
                                 f"give partition=")
        if isinstance(partition, dict):
            lower = {str(k).lower(): v for k, v in partition.items()}
            missing = [k for k in self.partition_keys if k.lower() not in lower]
            extra = set(lower) - {k.lower() for k in self.partition_keys}
            if missing or extra:
                raise StreamingError(f"partition {partition} does not match the keys "
                                     f"{self.partition_keys}")
            values = [lower[k.lower()] for k in self.partition_keys]
        else:
            values = list(partition)
            if len(values) != len(self.partition_keys):
                raise StreamingError(f"partition {values} does not match the keys "
                                     f"{self.partition_keys}")
        return [str(v) for v in values]

    def _ensure_partition(self, tbl, create: bool) -> str:
        try:
            return self._client.get_partition(self.db, self.table, self.partition_values).sd.location
        except T.NoSuchObjectException:
            if not create:
                raise StreamingError(f"partition {self.partition_name} of {self.full_name} "
                                     f"does not exist") from None
        import copy
        sd = copy.deepcopy(tbl.sd)
        sd.location = tbl.sd.location.rstrip("/") + "/" + partition_dir_name(
            self.partition_keys, self.partition_values)
        part = T.Partition(values=self.partition_values, dbName=self.db, tableName=self.table,
                           sd=sd, parameters={})
        self._client.add_partitions_req(T.AddPartitionsRequest(
            dbName=self.db, tblName=self.table, parts=[part], ifNotExists=True,
            needResult=False))
        return self._client.get_partition(self.db, self.table, self.partition_values).sd.location

    def _server_txn_timeout(self) -> float:
        try:
            text = self._client.get_config_value("hive.txn.timeout", "300s")
        except Exception:
            return 300.0
        try:
            return parse_duration(text or "300s")
        except ConfigError:
            return 300.0

    # -- RPC (the writing thread and the heartbeat thread share nothing but this) ------------

    def rpc(self, name: str, *args):
        with self._rpc_lock:
            return getattr(self._client, name)(*args)

    # -- batches and transactions ---------------------------------------------------------

    def begin_batch(self, n: int = 10) -> "TransactionBatch":
        """Open a batch of ``n`` transactions (the previous batch must be finished or is
        closed first: its open transactions are aborted)."""
        self._check_open()
        if self.batch is not None:
            self.batch.close()
        self.batch = TransactionBatch(self, int(n))
        return self.batch

    def _current_batch(self) -> "TransactionBatch":
        self._check_open()
        if self.batch is None or self.batch.closed:
            raise StreamingError("no open transaction batch: call begin_batch(n)")
        return self.batch

    def begin(self) -> int:
        """Start the next transaction of the batch (write() does it too); -> txn id."""
        return self._current_batch().begin()

    def write(self, data) -> int:
        """Write rows into the current transaction (started if needed); -> row count."""
        return self._current_batch().write(data)

    def commit(self) -> int:
        """Commit the current transaction; -> its txn id. The batch's file is closed after
        its last transaction."""
        return self._current_batch().commit()

    def abort(self) -> int:
        """Abort the current transaction; -> its txn id."""
        return self._current_batch().abort()

    @property
    def current_txn_id(self) -> Optional[int]:
        b = self.batch
        return None if b is None or b.closed else b.current_txn_id

    @property
    def current_write_id(self) -> Optional[int]:
        b = self.batch
        return None if b is None or b.closed else b.current_write_id

    def close(self) -> None:
        """Abort what is still open, close the file, stop heartbeats, disconnect."""
        if self._closed:
            return
        try:
            if self.batch is not None:
                self.batch.close()
        finally:
            self._closed = True
            self._client.close()

    def _check_open(self):
        if self._closed:
            raise StreamingError("streaming connection is closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _local(location: str) -> str:
    path = location_path(location)
    if path is None:
        raise StreamingError(
            f"streaming ingest into {location}: the flush-length protocol needs a file system "
            f"that can flush and extend an open file (local disk, or a shared mount at the "
            f"same path everywhere); object stores (s3a://, abfs://, gs://) cannot, and HDFS "
            f"is not supported by this client. Write to such tables in transactions of whole "
            f"files instead (hive_acid, orc_acid.write_delta)")
    return path


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # pragma: no cover
        return "hms_txn"
