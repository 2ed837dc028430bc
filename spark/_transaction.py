"""``with hive_acid.transaction(spark) as tx:``: several statements, one transaction.

Every hive_acid statement of the thread inside the block (``tx.*`` or the module functions)
joins the block's transaction and reads at its snapshot (``_scope``); ``df.write`` joins it
through ``tx.writer_options()``. The transaction commits when the block ends and aborts when
it raises. Transactions do not nest.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Optional

from pyspark.sql import DataFrame, SparkSession

from hms_txn.clients.acid.txns import Txn

from ._dml import delete, insert, merge, update
from ._driver import Driver
from ._errors import HiveAcidError
from ._held_snapshot import Snapshot, snapshot
from ._reads import read
from ._session import registered_driver
from ._sql import sql


class Transaction:
    """Statements of one transaction (see :func:`transaction`)."""

    def __init__(self, session: SparkSession, driver: Driver, txn: Txn):
        self.session, self.driver, self.txn = session, driver, txn

    @property
    def id(self) -> int:
        return self.txn.id

    def read(self, table: str, **kw) -> DataFrame:
        return read(self.session, table, **kw)

    def append(self, table: str, df: DataFrame) -> None:
        insert(self.session, table, df)

    def overwrite(self, table: str, df: DataFrame, **kw) -> None:
        insert(self.session, table, df, overwrite=True, **kw)

    def delete(self, table: str, condition: Optional[str] = None) -> None:
        delete(self.session, table, condition)

    def update(self, table: str, set: Dict[str, str], condition: Optional[str] = None) -> None:
        update(self.session, table, set, condition)

    def merge(self, table: str, source, on: str, **kw) -> None:
        merge(self.session, table, source, on, **kw)

    def sql(self, statement: str):
        return sql(self.session, statement)

    def snapshot(self, table: str, **kw) -> Snapshot:
        """``with tx.snapshot("db.t") as df:`` -- :func:`snapshot` at this transaction's
        snapshot (the module function inside the block does the same)."""
        return snapshot(self.session, table, **kw)

    def writer_options(self) -> Dict[str, str]:
        """Options making ``df.write.format("hive_acid")`` join this transaction."""
        return {"txn": str(self.txn.id)}


@contextlib.contextmanager
def transaction(session: SparkSession) -> Iterator[Transaction]:
    """``with hive_acid.transaction(spark) as tx:`` -- every hive_acid statement of this thread
    inside the block (``tx.*`` or the module functions) runs in one metastore transaction with
    one snapshot; committed at the end, aborted on an exception."""
    d = registered_driver(session)
    if d.active is not None:
        raise HiveAcidError("transactions do not nest")
    txn = d.open_txn(multi=True)
    d.active = txn
    try:
        yield Transaction(session, d, txn)
    except BaseException:
        d.active = None
        d.abort(txn)
        raise
    d.active = None
    d.commit(txn)
