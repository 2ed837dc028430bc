"""A transaction batch of a streaming connection (``streaming_ingest``): its transactions,
write ids, heartbeat thread and the one delta file they share."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Dict, List, Optional

from hms_txn.wire import client as wire_client
from hms_txn.wire.failover import FailoverClient, connect_failover
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

log = logging.getLogger("hms_txn.clients.streaming_ingest")

SHARED_READ, SHARED_WRITE = 1, 2
TABLE_LEVEL, PARTITION_LEVEL = 2, 3
OP_INSERT = 2
LOCK_ACQUIRED, LOCK_WAITING = 1, 2


class StreamingError(Exception):
    """A streaming connection cannot go on as asked."""


class TxnAbortedError(StreamingError):
    """The transaction was aborted (by the caller, a timeout, or the server)."""


# -- Thrift connection -----------------------------------------------------------------------

def open_client(uri: str, options: wire_client.ClientOptions) -> FailoverClient:
    """A client of ``uri`` (one URI or a comma-separated list) that fails over among them
    as Hive's client does (hms_txn.wire.failover.connect_failover)."""
    try:
        return connect_failover(uri, options=options)
    except (ValueError, ConnectionError) as err:
        raise StreamingError(str(err)) from None


class TransactionBatch:
    """``n`` transactions written into one ``delta_X_Y/bucket_N``, committed one by one."""

    def __init__(self, conn: Any, n: int):
        """``conn``: the ``streaming_ingest.StreamingConnection`` that owns the batch."""
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
        n = self.writer.write(self.write_ids[self.index], to_table(data, self.conn.row_schema))
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
                    client = open_client(conn.uri, conn.client_options)
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

def to_table(data, schema):
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


