"""The transaction and snapshot a ``hive_acid`` statement runs in.

A statement runs in the calling thread's active ``transaction()`` when there is one, else in
a transaction of its own, committed when the statement ends and aborted when it fails
(:func:`txn_scope`). Inside a transaction every read of a table is at the transaction's
snapshot, its own earlier statements included (:func:`snapshot_df`); ``_reads`` makes the
DataFrames of ``hive_acid.read``.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Tuple

from pyspark.sql import DataFrame, SparkSession

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.txns import Txn

from ._datasource import FORMAT
from ._driver import Driver
from ._errors import HiveAcidError
from ._session import registered_driver


def acid_table(d: Driver, table: str, *, full_acid: bool = False) -> M.TableInfo:
    """The description of ``table``, which must be transactional (``full_acid``: not
    insert-only either)."""
    info = M.table_info(d.ms, table)
    M.require_acid(info, full_acid=full_acid)
    return info


@contextlib.contextmanager
def txn_scope(session: SparkSession) -> Iterator[Tuple[Driver, Txn]]:
    """The active multi-statement transaction of this thread, or a new one committed at the
    end (aborted on an exception)."""
    d = registered_driver(session)
    if d.active is not None:
        yield d, d.active
        return
    txn = d.open_txn()
    try:
        yield d, txn
    except BaseException:
        d.abort(txn)
        raise
    d.commit(txn)


def snapshot_df(session: SparkSession, d: Driver, txn: Txn, info: M.TableInfo, *,
                with_row_id: bool = False) -> DataFrame:
    """``info``'s table at ``txn``'s snapshot, with the partitions ``txn`` created."""
    wids = d.snapshot(txn, [info.full_name])[info.full_name]
    own = "\n".join(d.txn_partitions(txn, info.full_name))
    return (session.read.format(FORMAT)
            .option("validTxnList", txn.txns).option("validWriteIdList", wids)
            .option("txnPartitions", own)
            .option("withRowId", str(with_row_id).lower())
            .option("metastore.uris", d.uri).load(info.full_name))


def source_df(session: SparkSession, d: Driver, txn: Txn, name: str) -> DataFrame:
    """A table name as a DataFrame: ACID tables of our metastore through hive_acid (in the
    transaction's snapshot), anything else (temp views, other tables) through Spark."""
    try:
        info = M.table_info(d.ms, name)
    except HiveAcidError:
        info = None
    if info is not None and info.transactional:
        return snapshot_df(session, d, txn, info)
    return session.table(name)
