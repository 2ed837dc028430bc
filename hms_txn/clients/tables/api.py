"""``hms_txn.tables``: Hive ACID tables from plain Python (see that module for the guide).

A :class:`Connection` holds one metastore connection and one ``Transactions`` core (the one
``spark.hive_acid``'s driver extends): its transactions and read locks are heartbeated by a
background thread until :meth:`Connection.close`; when the process dies the heartbeats stop
and the metastore aborts its transactions and releases its locks after
``hive.txn.timeout``.

Snapshots: a read outside a transaction takes a txn-less SHARED_READ lock on the table,
then its snapshot (ValidTxnList + ValidWriteIdList), and holds the lock until the rows are
read (``read``) or the reader is exhausted, closed or dropped (``reader``): the compactor's
Cleaner cannot remove a file it reads. Inside a :class:`Transaction` every read is at the
transaction's snapshot and sees its own earlier statements.

Writes: each statement outside a transaction is a transaction of its own, committed when
it returns; in ``with conn.transaction() as tx:`` every statement of ``tx`` joins one
transaction, committed when the block ends and aborted when it raises. Locks, write ids and
the commit's write events are Hive's, as ``spark.hive_acid`` takes and sends them.
"""

from __future__ import annotations

import threading
from typing import Dict, List, Mapping, Optional, Sequence, Union

import pyarrow as pa

from orc_acid.fs import hadoop_options
from orc_acid.hive_types import UnsupportedHiveType, hive_type

from hms_txn.clients import streaming_ingest
from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.ddl import create_acid_table, create_database
from hms_txn.clients.acid.errors import HiveAcidError
from hms_txn.clients.acid.statements import merge_clauses
from hms_txn.clients.acid.table_schema import table_schema
from hms_txn.clients.acid.txns import Transactions, Txn
from hms_txn.clients.connection import client_options, metastore_uri
from hms_txn.clients.tables import merge as merging
from hms_txn.clients.tables import writes
from hms_txn.clients.tables.reads import ReadPlan, iter_batches, plan_read, read_all
from hms_txn.common.config import Config, ConfigError, load

AGENT = "hms-txn-python"


def connect(uri: Optional[str] = None, *, conf: Union[str, Mapping[str, str], Config, None] = None,
            user: Optional[str] = None, password: Optional[str] = None,
            timeout: float = 120.0) -> "Connection":
    """A connection to the metastore at ``uri`` (``thrift://host:9083``; several,
    comma-separated, are tried in order), else ``conf``'s ``hive.metastore.uris``.

    ``conf``: a hive-site.xml path, a dict of its keys, or a ``Config``: TLS, SASL, the
    transport keys and the file-system keys (``fs.s3a.*``, ...) of the tables' locations.
    ``user``/``password``: SASL PLAIN."""
    try:
        if isinstance(conf, Config):
            config = conf
        elif isinstance(conf, str):
            config = load(conf)
        else:
            config = Config(dict(conf or {}), source="conf")
        options = client_options(config, user=user, password=password, timeout=timeout)
    except (ConfigError, OSError) as e:
        raise HiveAcidError(f"cannot connect to the metastore: {e}") from None
    return Connection(metastore_uri(config, uri), config, options, timeout)


class _Statements:
    """The statements a connection and a transaction share; ``_run(work)`` runs
    ``work(core, txn)`` in a transaction."""

    conn: "Connection"

    def _run(self, work):
        raise NotImplementedError

    def append(self, table: str, data) -> int:
        """INSERT INTO ``table`` the rows of ``data`` (a pyarrow Table, pandas or Polars
        DataFrame; columns by name, else by position; partition columns included); ->
        rows written."""
        info = self.conn.table_info(table)
        return self._run(lambda core, txn: writes.insert(core, txn, info, data))

    def overwrite(self, table: str, data, *, dynamic_partitions: bool = False) -> int:
        """INSERT OVERWRITE ``table``: every partition (or, with ``dynamic_partitions``,
        only those ``data`` has rows for) is replaced by ``data``'s rows."""
        info = self.conn.table_info(table)
        return self._run(lambda core, txn: writes.insert(
            core, txn, info, data, overwrite=True, dynamic_overwrite=dynamic_partitions))

    def delete(self, table: str, where=None) -> int:
        """DELETE FROM ``table`` [WHERE ``where``: SQL text or a pyarrow expression]; ->
        rows deleted."""
        info = self.conn.table_info(table)
        return self._run(lambda core, txn: writes.delete(core, txn, info, where))

    def update(self, table: str, set: Dict[str, object], where=None) -> int:
        """UPDATE ``table`` SET column = value [WHERE ``where``]; a value is SQL text over
        the table's columns (``"qty + 1"``, ``"'text'"``), a pyarrow expression, or a
        Python value; -> rows updated."""
        info = self.conn.table_info(table)
        return self._run(lambda core, txn: writes.update(core, txn, info, set, where))

    def merge(self, table: str, source, on: str, *,
              when_matched_update: Optional[Dict[str, object]] = None,
              when_matched_update_condition: Optional[str] = None,
              when_matched_delete: Union[bool, str, None] = None,
              when_not_matched_insert: Optional[Dict[str, object]] = None,
              when_not_matched_insert_condition: Optional[str] = None,
              clauses: Optional[List[tuple]] = None) -> Dict[str, int]:
        """MERGE INTO ``table`` t USING ``source`` s (Arrow table or DataFrame) ON ``on``,
        as ``spark.hive_acid.merge`` takes it; -> {"updated", "deleted", "inserted"}."""
        info = self.conn.table_info(table)
        cl = merge_clauses(when_matched_update, when_matched_update_condition,
                           when_matched_delete, when_not_matched_insert,
                           when_not_matched_insert_condition, clauses)
        return self._run(lambda core, txn: merging.merge(core, txn, info, source, on, cl))


class Connection(_Statements):
    """Reads and writes ACID tables of one metastore (see :func:`connect`). Thread-safe;
    close it (or use ``with``) to abort what is open and release its locks."""

    def __init__(self, uri: str, config: Config, options, timeout: float = 120.0):
        self.conn = self
        self.uri = uri
        self.config = config
        ms = M.MetastoreConnection(uri, timeout_s=timeout, options=options, agent=AGENT)
        ms.fs_options = hadoop_options(config.raw)
        try:
            self.core = Transactions(ms)
        except BaseException:
            ms.close()
            raise

    # -- tables ---------------------------------------------------------------------------

    def table_info(self, table: str) -> M.TableInfo:
        """The metastore's description of the transactional table ``table`` ("db.t")."""
        info = M.table_info(self.core.ms, table)
        M.require_acid(info)
        return info

    def schema(self, table: str) -> pa.Schema:
        """The table's columns as Arrow (data columns, then partition columns)."""
        return table_schema(self.table_info(table))

    def create_table(self, table: str, schema, *, partition_by: Sequence[str] = (),
                     insert_only: bool = False, file_format: str = "orc",
                     compression: str = "SNAPPY", if_not_exists: bool = False,
                     properties: Optional[Dict[str, str]] = None) -> None:
        """CREATE a transactional table as ``spark.hive_acid.create_table`` does: full ACID
        ORC (or insert-only ORC/Parquet). ``schema``: a ``pyarrow.Schema``, or (name, Hive
        type) pairs / a {name: Hive type} dict; it includes the ``partition_by`` columns.
        ``compression``: the ORC codec (``orc.compress``; Spark's default, SNAPPY)."""
        if isinstance(schema, pa.Schema):
            try:
                columns = [(f.name, hive_type(f.type)) for f in schema]
            except UnsupportedHiveType as e:
                raise HiveAcidError(f"CREATE TABLE {table}: {e}") from None
        else:
            columns = list(schema.items()) if isinstance(schema, Mapping) else list(schema)
        params = dict(properties or {})
        if file_format == "orc":
            params.setdefault("orc.compress", compression.upper())
        create_acid_table(self.core.ms, table, columns, partition_by=partition_by,
                          insert_only=insert_only, file_format=file_format,
                          if_not_exists=if_not_exists, properties=params)

    def create_database(self, name: str, *, location: Optional[str] = None) -> None:
        """CREATE DATABASE IF NOT EXISTS ``name``."""
        create_database(self.core.ms, name, location=location)

    def drop_table(self, table: str, *, if_exists: bool = True) -> None:
        """DROP TABLE (its files too: a managed table)."""
        db, name = M.split_name(table)
        try:
            self.core.ms.drop_table(db, name, True)
        except M.T.NoSuchObjectException:
            if not if_exists:
                raise HiveAcidError(f"table {db}.{name} does not exist") from None

    # -- reads ----------------------------------------------------------------------------

    def read(self, table: str, columns: Optional[Sequence[str]] = None, where=None, *,
             limit: Optional[int] = None, threads: Optional[int] = None) -> pa.Table:
        """The table's rows at a fresh snapshot (read lock held while reading) as a
        ``pyarrow.Table``: ``columns`` projects; ``where`` (SQL text or a pyarrow
        expression) filters rows, and its terms on partition columns prune partitions
        through the metastore; ``limit`` stops after that many rows."""
        if limit is not None:
            with self.reader(table, columns, where, threads=threads) as r:
                return _first_rows(r, limit)
        info = self.table_info(table)
        snap = self.core.scans.open([info], held=True)
        try:
            plan = plan_read(self.core.ms, info, snap["txns"],
                             snap["write_ids"][info.full_name], columns=columns, where=where)
            return read_all(plan, threads)
        finally:
            self.core.scans.release(snap["scan"])

    def reader(self, table: str, columns: Optional[Sequence[str]] = None, where=None, *,
               threads: Optional[int] = None) -> pa.RecordBatchReader:
        """:meth:`read` as a stream (``pyarrow.RecordBatchReader``: DuckDB queries it,
        ``pyarrow.dataset``/Polars take it). The snapshot is taken now; its read lock is
        released when the reader is exhausted, closed (``with``) or garbage-collected."""
        info = self.table_info(table)
        snap = self.core.scans.open([info], held=True)
        try:
            plan = plan_read(self.core.ms, info, snap["txns"],
                             snap["write_ids"][info.full_name], columns=columns, where=where)
        except BaseException:
            self.core.scans.release(snap["scan"])
            raise
        batches = _LockedBatches(plan, threads, lambda: self.core.scans.release(snap["scan"]))
        # through the C stream interface: closing the reader then releases the stream, and
        # with it the batches' iterator and the lock (a reader over a Python iterator
        # would keep the iterator until it is garbage-collected)
        return pa.RecordBatchReader.from_stream(
            _Exported(pa.RecordBatchReader.from_batches(plan.out_schema, batches)))

    # -- statements -----------------------------------------------------------------------

    def _run(self, work):
        txn = self.core.open_txn()
        try:
            out = work(self.core, txn)
        except BaseException:
            self.core.abort(txn)
            raise
        self.core.commit(txn)
        return out

    def transaction(self) -> "Transaction":
        """``with conn.transaction() as tx:`` -- the statements of ``tx`` in one
        transaction with one snapshot, committed at the end, aborted on an exception."""
        return Transaction(self)

    def stream(self, table: str, partition=None, **kwargs) -> streaming_ingest.StreamingConnection:
        """A streaming ingest connection into ``table`` (or one partition of it): rows
        visible to readers as soon as each ``commit()`` returns; see
        ``hms_txn.clients.streaming_ingest`` for the keyword arguments and guarantees."""
        kwargs.setdefault("conf", self.config)
        return streaming_ingest.connect(self.uri, table, partition, **kwargs)

    def close(self) -> None:
        """Abort the open transactions, release the read locks, disconnect."""
        self.core.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Transaction(_Statements):
    """Statements of one metastore transaction (see :meth:`Connection.transaction`)."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._txn: Optional[Txn] = None
        self._mu = threading.Lock()

    @property
    def id(self) -> Optional[int]:
        return self._txn.id if self._txn is not None else None

    def __enter__(self) -> "Transaction":
        self._txn = self.conn.core.open_txn(multi=True)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    def _open(self) -> Txn:
        if self._txn is None or self._txn.state != "open":
            raise HiveAcidError("the transaction is not open: use it inside "
                                "`with conn.transaction() as tx:`")
        return self._txn

    def _run(self, work):
        with self._mu:          # one statement at a time
            txn = self._open()
            return work(self.conn.core, txn)

    def commit(self) -> None:
        self.conn.core.commit(self._open())

    def abort(self) -> None:
        if self._txn is not None and self._txn.state == "open":
            self.conn.core.abort(self._txn)

    def _plan(self, table, columns, where) -> ReadPlan:
        txn = self._open()
        return writes.target_plan(self.conn.core, txn, self.conn.table_info(table),
                                  where=where, columns=columns, with_row_id=False)

    def read(self, table: str, columns: Optional[Sequence[str]] = None, where=None, *,
             threads: Optional[int] = None) -> pa.Table:
        """The table at the transaction's snapshot, its own statements included."""
        return read_all(self._plan(table, columns, where), threads)

    def reader(self, table: str, columns: Optional[Sequence[str]] = None, where=None, *,
               threads: Optional[int] = None) -> pa.RecordBatchReader:
        """:meth:`read` as a stream (no lock: the open transaction holds the snapshot)."""
        plan = self._plan(table, columns, where)
        return pa.RecordBatchReader.from_batches(plan.out_schema, iter_batches(plan, threads))


class _LockedBatches:
    """The batches of a plan read under a read lock that ``release`` ends: once, when the
    batches run out, the reader is closed, or the iterator is dropped."""

    def __init__(self, plan: ReadPlan, threads: Optional[int], release):
        self._release = release
        self._done = False
        self._it = iter_batches(plan, threads)

    def __iter__(self):
        return self

    def __next__(self) -> pa.RecordBatch:
        if self._done:
            raise StopIteration
        try:
            return next(self._it)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self._done:
            self._done = True
            try:
                self._it.close()
            finally:
                self._release()

    def __del__(self):
        self.close()


class _Exported:
    """Hands a reader over as an Arrow C stream (``__arrow_c_stream__``), keeping no
    reference to it."""

    def __init__(self, reader: pa.RecordBatchReader):
        self._reader = reader

    def __arrow_c_stream__(self, requested_schema=None):
        reader, self._reader = self._reader, None
        return reader.__arrow_c_stream__(requested_schema)


def _first_rows(reader: pa.RecordBatchReader, limit: int) -> pa.Table:
    out, n = [], 0
    for b in reader:
        if n >= limit:
            break
        out.append(b.slice(0, limit - n))
        n += out[-1].num_rows
    return pa.Table.from_batches(out, schema=reader.schema)
