"""Structured Streaming into Hive ACID tables, exactly once.

    from spark import hive_acid, streaming_sink
    q = hive_acid.write_stream(stream_df, "db.events", checkpoint_location="/chk/events")
    # or, composed by hand:
    stream_df.writeStream.foreachBatch(
        streaming_sink.foreach_batch_writer(spark, "db.events", sink_id="events")).start()

Every micro-batch is written as ONE metastore transaction (the normal ``hive_acid.insert``
path: write id, statement id, lock, dynamic partitions, abort and file cleanup on failure).
Spark replays a micro-batch after a restart when the batch ran but its checkpoint commit
(``<checkpoint>/commits/<batch id>``) was not written, e.g. the driver died right after our
metastore commit. To make that replay harmless, the transaction also records the batch id
in the table parameter ``_meta.hive_acid.sink.<sink_id>.batch`` through
``CommitTxnRequest.keyValue``: the data and the marker become visible together or not at
all. A batch whose id is not above the recorded one is skipped.

The marker must exist before the first commit (the metastore only updates existing ``_meta``
parameters), so starting a sink creates it with value ``-1``. That uses ``alter_table``,
which rewrites the whole parameter map; it runs under an EXCLUSIVE table lock, and every
batch transaction holds a SHARED_READ lock until it commits, so a sink starting cannot
overwrite the marker another sink of the same table is committing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from typing import Callable, Dict, Optional, Tuple, Union

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from hms_txn.clients.acid import metastore as M
from orc_acid.layout import location_path

from ._errors import HiveAcidError
from ._scope import acid_table
from ._session import registered_driver
from ._transaction import transaction


log = logging.getLogger("spark.hive_acid.streaming")

__all__ = ["write_stream", "foreach_batch_writer", "default_sink_id", "marker_key",
           "recorded_batch", "reset_sink"]

MARKER_PREFIX = "_meta.hive_acid.sink."
_SINK_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
# DataOperationType.NO_TXN: what a txn-less (DDL-like) lock component declares
_OP_NO_TXN = 6
# a sink start may queue behind scans of the table (their read locks last up to the lease)
_MARKER_LOCK_TIMEOUT_S = 300.0

# write(tx, batch_df, batch_id): the statements of one micro-batch inside its transaction
BatchWrite = Callable[..., None]


# -- sink ids and markers -------------------------------------------------------------------------

def default_sink_id(checkpoint_location: str) -> str:
    """A stable sink id for a checkpoint: the first 16 hex digits of the SHA-1 of its absolute
    location (local paths and ``file:`` URIs as absolute paths; other URIs as given)."""
    loc = checkpoint_location.strip()
    path = location_path(loc)
    if path is not None:
        loc = os.path.abspath(path)
    loc = loc.rstrip("/") or "/"
    return hashlib.sha1(loc.encode("utf-8")).hexdigest()[:16]


def marker_key(sink_id: str) -> str:
    """The table parameter holding the last batch id the sink committed."""
    if not isinstance(sink_id, str) or not _SINK_ID.match(sink_id):
        raise HiveAcidError(f"sink_id {sink_id!r}: use 1-128 letters, digits, '_' or '-'")
    return f"{MARKER_PREFIX}{sink_id}.batch"


def _parse_marker(info: M.TableInfo, key: str, value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise HiveAcidError(f"{info.full_name}: parameter {key} is {value!r}, not a batch id"
                            ) from None


def recorded_batch(session: SparkSession, table: str, sink_id: str) -> Optional[int]:
    """The last batch id ``sink_id`` committed into ``table`` (-1: none yet; None: the sink
    never started on this table)."""
    key = marker_key(sink_id)
    info = acid_table(registered_driver(session), table)
    return _parse_marker(info, key, info.parameters.get(key))


def _set_marker(ms: M.MetastoreConnection, info: M.TableInfo, key: str, value: Optional[str], *,
                only_if_missing: bool) -> None:
    """Set (or remove, value None) the marker parameter under a txn-less EXCLUSIVE lock.

    alter_table replaces every parameter of the table; the lock waits for the batch
    transactions of other sinks (they hold SHARED_READ until their commit has recorded their
    own marker), so the parameters re-read below are the latest ones."""
    comp = M.lock_component(info.db, info.name, M.EXCLUSIVE, _OP_NO_TXN, transactional=False)
    lock_id = M.acquire_lock(ms, [comp], 0, timeout_s=_MARKER_LOCK_TIMEOUT_S)
    try:
        t = ms.get_table_acid_aware(info.db, info.name)
        params = dict(t.parameters or {})
        if only_if_missing and key in params:
            return
        if value is None:
            if key not in params:
                return
            del params[key]
        else:
            params[key] = value
        t.parameters = params
        ms.alter_table(info.db, info.name, t)
    finally:
        ms.unlock(M.T.UnlockRequest(lockid=lock_id))


def reset_sink(session: SparkSession, table: str, sink_id: str) -> None:
    """Forget what ``sink_id`` committed into ``table`` (removes its marker). Needed before a
    query with a NEW checkpoint reuses the sink id of an old one (for instance a checkpoint
    directory deleted and re-created at the same path): otherwise its batches 0..N would be
    taken for replays and skipped. Stop the sink's query first."""
    d = registered_driver(session)
    _set_marker(d.ms, acid_table(d, table), marker_key(sink_id), None, only_if_missing=False)


# -- one micro-batch ---------------------------------------------------------------------------

def _default_write(table: str) -> BatchWrite:
    def append(tx, df: DataFrame, batch_id: int) -> None:
        tx.append(table, df)
    return append


def _read_marker(ms: M.MetastoreConnection, info: M.TableInfo, key: str) -> Tuple[int, int]:
    """-> (table id, recorded batch id) from the latest table parameters."""
    t = ms.get_table_acid_aware(info.db, info.name)
    recorded = _parse_marker(info, key, (t.parameters or {}).get(key))
    if recorded is None:
        raise HiveAcidError(
            f"{info.full_name} has no parameter {key}: the sink's marker was removed or the "
            f"table re-created while the query ran; restart the query")
    return t.id, recorded


def _write_batch(session: SparkSession, table: str, key: str, write: BatchWrite,
                 df: DataFrame, batch_id: int) -> bool:
    """Write one micro-batch exactly once -> False when it was skipped as a replay."""
    with transaction(session) as tx:
        d = tx.driver
        info = acid_table(d, table)
        # held until the commit: orders this commit's marker update against a sink start
        # rewriting the table's parameters (see _set_marker)
        M.acquire_lock(d.ms, [M.lock_component(info.db, info.name, M.SHARED_READ,
                                               M.OP_SELECT)],
                       tx.txn.id, timeout_s=d.lock_timeout_s)
        table_id, recorded = _read_marker(d.ms, info, key)
        if batch_id <= recorded:
            # committed before, but Spark never wrote its checkpoint commit: a replay
            log.info("hive_acid sink %s: batch %d already committed into %s (recorded %d); "
                     "skipping the replay", key, batch_id, info.full_name, recorded)
            return False      # the transaction commits having written nothing
        write(tx, df, batch_id)
        # Spark runs one query per checkpoint at a time; should a zombie of an older run
        # have committed this batch meanwhile, abort rather than write it twice
        again_id, again = _read_marker(d.ms, info, key)
        if (again_id, again) != (table_id, recorded):
            raise HiveAcidError(f"{info.full_name}: {key} moved from {recorded} to {again} "
                                f"while batch {batch_id} was written: another query uses "
                                f"this sink id")
        tx.txn.key_value = (table_id, key, str(batch_id))
    log.debug("hive_acid sink %s: batch %d committed into %s", key, batch_id, info.full_name)
    return True


def foreach_batch_writer(session: SparkSession, table: str, sink_id: str, *,
                         write: Optional[BatchWrite] = None
                         ) -> Callable[[DataFrame, int], None]:
    """The function for ``writeStream.foreachBatch``: each micro-batch in one transaction,
    exactly once per ``sink_id`` (see the module docstring).

    ``write(tx, batch_df, batch_id)`` runs the batch's statements on the
    :class:`~spark.hive_acid.Transaction` ``tx`` (default: ``tx.append(table, batch_df)``);
    a MERGE there gives exactly-once upserts. Creates the sink's marker if missing."""
    key = marker_key(sink_id)
    d = registered_driver(session)
    info = acid_table(d, table)
    if key not in info.parameters:    # the EXCLUSIVE lock only for a new sink, not restarts
        _set_marker(d.ms, info, key, "-1", only_if_missing=True)
    body = write or _default_write(info.full_name)

    def write_batch(df: DataFrame, batch_id: int) -> None:
        _write_batch(session, info.full_name, key, body, df, batch_id)
    write_batch.sink_id = sink_id
    write_batch.marker_key = key
    return write_batch


# -- the query ---------------------------------------------------------------------------------

def _latest_planned_batch(session: SparkSession, checkpoint_location: str) -> Optional[int]:
    """The highest batch id in ``<checkpoint>/offsets`` (-1 for a new checkpoint; None when
    it cannot be listed). Read through Hadoop's FileSystem, like Spark does."""
    try:
        jvm = session.sparkContext._jvm
        conf = session.sparkContext._jsc.hadoopConfiguration()
        path = jvm.org.apache.hadoop.fs.Path(checkpoint_location.rstrip("/") + "/offsets")
        fs = path.getFileSystem(conf)
        if not fs.exists(path):
            return -1
        ids = [int(s.getPath().getName()) for s in fs.listStatus(path)
               if s.getPath().getName().isdigit()]
        return max(ids, default=-1)
    except Exception:
        log.debug("cannot list %s/offsets", checkpoint_location, exc_info=True)
        return None


def _check_checkpoint(session: SparkSession, info: M.TableInfo, key: str,
                      checkpoint_location: str, recorded: Optional[int]) -> None:
    """Refuse a checkpoint that is behind the marker: its next batches would have ids the
    sink already committed and would be skipped as replays (lost data)."""
    latest = _latest_planned_batch(session, checkpoint_location)
    if recorded is None or latest is None or recorded <= latest:
        return
    raise HiveAcidError(
        f"{info.full_name}: sink {key} recorded batch {recorded} but the checkpoint "
        f"{checkpoint_location} has planned batches only up to {latest} (a new or older "
        f"checkpoint): its batches would be skipped. Use another sink_id, or "
        f"streaming_sink.reset_sink(...) if the table should take this query's batches again")


def _apply_trigger(writer, trigger: Union[None, str, Dict[str, object]]):
    if trigger is None:
        return writer
    if isinstance(trigger, str):
        return writer.trigger(processingTime=trigger)
    if isinstance(trigger, dict):
        return writer.trigger(**trigger)
    raise HiveAcidError("trigger: a processing-time string ('10 seconds') or the keyword "
                        "arguments of DataStreamWriter.trigger ({'availableNow': True})")


def write_stream(stream_df: DataFrame, table: str, checkpoint_location: str, *,
                 query_name: Optional[str] = None,
                 trigger: Union[None, str, Dict[str, object]] = None,
                 sink_id: Optional[str] = None,
                 write: Optional[BatchWrite] = None,
                 output_mode: str = "append") -> StreamingQuery:
    """Start a streaming query appending ``stream_df`` to the ACID table ``table``, each
    micro-batch one transaction, exactly once across restarts with the same checkpoint.

    ``sink_id`` (default: :func:`default_sink_id` of the checkpoint location) names the
    table parameter ``_meta.hive_acid.sink.<sink_id>.batch``; give one explicitly if the
    checkpoint may move. ``trigger``: ``"10 seconds"`` or ``{"availableNow": True}`` etc.
    ``write``: see :func:`foreach_batch_writer` (with a MERGE there, ``output_mode="update"``
    suits aggregations)."""
    if not isinstance(stream_df, DataFrame) or not stream_df.isStreaming:
        raise HiveAcidError("write_stream needs a streaming DataFrame (spark.readStream...)")
    if not checkpoint_location:
        raise HiveAcidError("write_stream needs a checkpoint_location: exactly-once relies on "
                            "Spark's checkpoint")
    session = stream_df.sparkSession
    sink_id = sink_id or default_sink_id(checkpoint_location)
    key = marker_key(sink_id)
    info = acid_table(registered_driver(session), table)
    if write is None:
        info.column_mapping(stream_df.columns)        # fail now, not in the first batch
    _check_checkpoint(session, info, key, checkpoint_location,
                      _parse_marker(info, key, info.parameters.get(key)))
    fn = foreach_batch_writer(session, info.full_name, sink_id, write=write)
    writer = (stream_df.writeStream.foreachBatch(fn).outputMode(output_mode)
              .option("checkpointLocation", checkpoint_location))
    if query_name:
        writer = writer.queryName(query_name)
    return _apply_trigger(writer, trigger).start()
