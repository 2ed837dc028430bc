"""Streaming ingest into a Hive full-ACID table: rows readable within seconds of their commit.

A client of the metastore, as Hive's streaming API (``HiveStreamingConnection``) is: it talks
to the server over Thrift only and writes the files itself with ``orc_acid.streaming_writer``.

    from hms_txn import streaming
    conn = streaming.connect("thrift://host:9083", "db.events", partition={"ds": "2024-05-01"})
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
import time
from typing import Dict, List, Optional

from orc_acid.layout import location_path, partition_dir_name

from hms_txn.common.config import ConfigError, parse_duration
from hms_txn.wire import client as wire_client
from hms_txn.wire.client import MetastoreClient
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

__all__ = ["connect", "StreamingConnection", "TransactionBatch", "StreamingError",
           "TxnAbortedError", "hive_type_to_arrow"]

log = logging.getLogger(__name__)

SHARED_READ, SHARED_WRITE = 1, 2
TABLE_LEVEL, PARTITION_LEVEL = 2, 3
OP_INSERT = 2
LOCK_ACQUIRED, LOCK_WAITING = 1, 2


class StreamingError(Exception):
    """A streaming connection cannot go on as asked."""


class TxnAbortedError(StreamingError):
    """The transaction was aborted (by the caller, a timeout, or the server)."""


# -- Thrift connection -----------------------------------------------------------------------

def _open_client(uri: str, timeout_s: float) -> MetastoreClient:
    try:
        return wire_client.connect(uri, timeout=timeout_s)
    except (ValueError, ConnectionError) as err:
        raise StreamingError(str(err)) from None


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
    ``fsync`` (default True)."""
    return StreamingConnection(metastore_uri, table, partition, **kwargs)


class StreamingConnection:
    """A writer into one table (or one partition of it). Not thread-safe: one thread
    writes; the heartbeat thread is internal."""

    def __init__(self, metastore_uri: str, table: str, partition=None, *,
                 agent_info: Optional[str] = None, heartbeat_interval: Optional[float] = None,
                 bucket_id: int = 0, create_partition: bool = True,
                 user: Optional[str] = None, lock_timeout: float = 60.0,
                 writer_options=None, max_buffered_rows: int = 1_000_000,
                 fsync: bool = True, rpc_timeout: float = 60.0):
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
        self._client = _open_client(metastore_uri, rpc_timeout)
        self._rpc_lock = threading.Lock()
        self._closed = False
        self.batch: Optional[TransactionBatch] = None
        self.batches_done = 0
        try:
            tbl = self._client.get_table(self.db, self.table)
            self._check_table(tbl)
            self.row_schema = self._schema_of(tbl)
            self.partition_keys = [k.name for k in tbl.partitionKeys or []]
            self.partition_values = self._partition_values(partition)
            self.partition_name = None
            if self.partition_values is not None:
                from hms_txn.domain.names import make_partition_name
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


class TransactionBatch:
    """``n`` transactions written into one ``delta_X_Y/bucket_N``, committed one by one."""

    def __init__(self, conn: StreamingConnection, n: int):
        from orc_acid.streaming_writer import StreamingBucketWriter
        if n < 1:
            raise ValueError("a batch needs at least one transaction")
        self.conn = conn
        self.closed = False
        resp = conn.rpc("open_txns", T.OpenTxnRequest(
            num_txns=n, user=conn.user, hostname=conn.hostname, agentInfo=conn.agent_info))
        self.txn_ids: List[int] = list(resp.txn_ids)
        self.state: Dict[int, str] = {t: "open" for t in self.txn_ids}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._hb: Optional[threading.Thread] = None
        self.writer = None
        try:
            r = conn.rpc("allocate_table_write_ids", T.AllocateTableWriteIdsRequest(
                dbName=conn.db, tableName=conn.table, txnIds=self.txn_ids))
            by_txn = {x.txnId: x.writeId for x in r.txnToWriteIds}
            self.write_ids = [by_txn[t] for t in self.txn_ids]
            lo, hi = min(self.write_ids), max(self.write_ids)
            if sorted(self.write_ids) != list(range(lo, hi + 1)):
                raise StreamingError(f"write ids {self.write_ids} of the batch are not "
                                     f"contiguous")
            self.min_write_id, self.max_write_id = lo, hi
            self._start_heartbeats()
            self.writer = StreamingBucketWriter(
                conn.local_location, lo, hi, conn.bucket_id, conn.row_schema,
                options=conn.writer_options, max_buffered_rows=conn.max_buffered_rows,
                fsync=conn.fsync)
        except BaseException:
            self._abort_all_open()
            self._stop.set()
            self.closed = True
            raise
        self.index = -1                   # position of the current transaction
        self.current_started = False
        self.rows_in_current = 0
        self.commit_times: Dict[int, float] = {}

    # -- public -----------------------------------------------------------------------

    @property
    def current_txn_id(self) -> Optional[int]:
        if self.index < 0 or not self.current_started:
            return None
        return self.txn_ids[self.index]

    @property
    def current_write_id(self) -> Optional[int]:
        if self.index < 0 or not self.current_started:
            return None
        return self.write_ids[self.index]

    @property
    def remaining(self) -> int:
        """Transactions of the batch not yet begun."""
        return len(self.txn_ids) - (self.index + 1)

    @property
    def delta_dir(self) -> str:
        return self.writer.delta_dir

    def begin(self) -> int:
        self._check()
        if self.current_started:
            return self.txn_ids[self.index]
        if self.index + 1 >= len(self.txn_ids):
            raise StreamingError("every transaction of the batch is used: begin_batch() again")
        self.index += 1
        txn = self.txn_ids[self.index]
        self._raise_if_aborted(txn)
        self._acquire_lock(txn)
        self.current_started = True
        self.rows_in_current = 0
        return txn

    def write(self, data) -> int:
        if not self.current_started:
            self.begin()
        txn = self.txn_ids[self.index]
        self._raise_if_aborted(txn)
        n = self.writer.write(self.write_ids[self.index], _to_table(data, self.conn.row_schema))
        self.rows_in_current += n
        return n

    def commit(self) -> int:
        if not self.current_started:
            self.begin()                  # an empty transaction: still committed in order
        txn, wid = self.txn_ids[self.index], self.write_ids[self.index]
        self._raise_if_aborted(txn)
        self.writer.flush()               # readable length recorded before the commit
        conn = self.conn
        try:
            conn.rpc("commit_txn", T.CommitTxnRequest(txnid=txn, writeEventInfos=[
                T.WriteEventInfo(writeId=wid, database=conn.db, table=conn.table,
                                 files=os.path.basename(self.writer.path),
                                 partition=conn.partition_name)]))
        except (T.TxnAbortedException, T.NoSuchTxnException) as e:
            self._finish(txn, "aborted")
            raise TxnAbortedError(f"txn {txn} could not commit: {e}") from e
        self.commit_times[txn] = time.time()
        self._finish(txn, "committed")
        return txn

    def abort(self) -> int:
        if not self.current_started:
            self.begin()
        txn, wid = self.txn_ids[self.index], self.write_ids[self.index]
        self.writer.discard(wid)
        try:
            self.conn.rpc("abort_txn", T.AbortTxnRequest(txnid=txn))
        except (T.NoSuchTxnException, T.TxnAbortedException):
            pass
        self._finish(txn, "aborted")
        return txn

    def close(self) -> None:
        """Abort the transactions not committed, close the file, stop the heartbeats."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.writer is not None:
                for t, w in zip(self.txn_ids, self.write_ids):
                    if self.state[t] == "open":
                        self.writer.discard(w)
                self._abort_all_open()
                self.writer.close()
        finally:
            self._stop.set()
            if self._hb is not None:
                self._hb.join(timeout=5)

    # -- internals --------------------------------------------------------------------

    def _check(self):
        if self.closed:
            raise StreamingError("the transaction batch is closed")

    def _finish(self, txn: int, state: str) -> None:
        with self._lock:
            if self.state[txn] == "open":
                self.state[txn] = state
        self.current_started = False
        if self.index + 1 >= len(self.txn_ids):
            self.close()
            self.conn.batches_done += 1

    def _raise_if_aborted(self, txn: int) -> None:
        with self._lock:
            st = self.state[txn]
        if st == "timed_out":
            raise TxnAbortedError(f"txn {txn} was aborted by the metastore (heartbeat "
                                  f"timeout?)")
        if st != "open":
            raise TxnAbortedError(f"txn {txn} is {st}")

    def _acquire_lock(self, txn: int) -> None:
        conn = self.conn
        comp = T.LockComponent(
            type=SHARED_READ, level=PARTITION_LEVEL if conn.partition_name else TABLE_LEVEL,
            dbname=conn.db, tablename=conn.table, partitionname=conn.partition_name,
            operationType=OP_INSERT, isTransactional=True)
        r = conn.rpc("lock", T.LockRequest(component=[comp], txnid=txn, user=conn.user,
                                           hostname=conn.hostname, agentInfo=conn.agent_info))
        deadline = time.monotonic() + conn.lock_timeout
        delay = 0.05
        while r.state == LOCK_WAITING:
            if time.monotonic() > deadline:
                raise StreamingError(f"txn {txn}: lock on {conn.full_name} not acquired "
                                     f"within {conn.lock_timeout}s")
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            r = conn.rpc("check_lock", T.CheckLockRequest(lockid=r.lockid, txnid=txn))
        if r.state != LOCK_ACQUIRED:
            raise StreamingError(f"txn {txn}: lock on {conn.full_name} refused "
                                 f"(state {r.state}: {r.errorMessage})")

    def _abort_all_open(self) -> None:
        with self._lock:
            todo = [t for t in self.txn_ids if self.state.get(t) in ("open", "timed_out")]
            for t in todo:
                self.state[t] = "aborted"
        if todo:
            try:
                self.conn.rpc("abort_txns", T.AbortTxnsRequest(txn_ids=todo))
            except Exception as e:   # the timeout reaper aborts them anyway
                log.warning("aborting txns %s failed: %s", todo, e)

    def _start_heartbeats(self) -> None:
        self._hb = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                    name=f"hms-streaming-heartbeat-{self.txn_ids[0]}")
        self._hb.start()

    def _heartbeat_loop(self) -> None:
        conn = self.conn
        client = None
        interval = conn.heartbeat_interval
        while not self._stop.is_set():
            with self._lock:
                live = [t for t in self.txn_ids if self.state[t] == "open"]
            if not live:
                if self._stop.wait(interval):
                    break
                continue
            try:
                if client is None:
                    client = _open_client(conn.uri, conn.rpc_timeout)
                r = client.heartbeat_txn_range(T.HeartbeatTxnRangeRequest(min=min(live),
                                                                         max=max(live)))
                gone = set(r.aborted or ()) | set(r.nosuch or ())
                with self._lock:
                    for t in live:
                        if t in gone and self.state[t] == "open":
                            self.state[t] = "timed_out"
                            log.warning("txn %s of %s was aborted by the metastore", t,
                                        conn.full_name)
            except Exception as e:
                log.warning("heartbeat of txns %s..%s failed: %s", min(live), max(live), e)
                if client is not None:
                    client.close()
                client = None
            if self._stop.wait(interval):
                break
        if client is not None:
            client.close()


# -- helpers -------------------------------------------------------------------------------

def _to_table(data, schema):
    """rows (dicts or sequences) / Table / RecordBatch / dict of columns -> Table of schema."""
    import pyarrow as pa
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        if data.num_columns != len(schema):
            raise StreamingError(f"data has {data.num_columns} columns, the table "
                                 f"{len(schema)}")
        if data.schema.names != schema.names and set(schema.names) <= set(data.schema.names):
            data = data.select(schema.names)
        return data.rename_columns(schema.names).cast(schema)
    if isinstance(data, dict):
        return pa.table({n: data[n] for n in schema.names}, schema=schema)
    rows = list(data)
    if rows and isinstance(rows[0], dict):
        return pa.Table.from_pylist(rows, schema=schema)
    cols = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.table([pa.array(list(c), type=f.type) for c, f in zip(cols, schema)],
                    schema=schema)


def _local(location: str) -> str:
    path = location_path(location)
    if path is None:
        raise StreamingError(f"only local table locations are supported, got {location}")
    return path


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # pragma: no cover
        return "hms_txn"
