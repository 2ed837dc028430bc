"""Hive ACID tables from plain Python: pandas, Polars, DuckDB and streaming, without Spark.

    from hms_txn import tables

    with tables.connect("thrift://127.0.0.1:9083") as ms:      # or conf="hive-site.xml"
        df = ms.read("db.orders", columns=["id", "qty"],
                     where="day = '2024-05-01' AND qty > 0").to_pandas()
        ms.append("db.orders", new_rows)                       # pyarrow / pandas / Polars
        ms.delete("db.orders", "id = 42")
        ms.update("db.orders", {"qty": "qty + 1"}, where="id = 7")
        ms.merge("db.orders", updates, on="t.id = s.id",
                 when_matched_update={"qty": "s.qty"},
                 when_not_matched_insert={"id": "s.id", "qty": "s.qty", "day": "s.day"})
        with ms.transaction() as tx:                           # one transaction
            tx.delete("db.customers", "id = 42")
            tx.delete("db.orders", "customer_id = 42")
        reader = ms.reader("db.orders")                        # a pyarrow RecordBatchReader
        duckdb.sql("SELECT day, sum(qty) FROM reader GROUP BY day")

Reads are snapshot-isolated: a fresh snapshot per read, taken under a txn-less SHARED_READ
lock that is heartbeated while the rows are read and released after (a reader: when it is
exhausted, closed or dropped); inside a transaction, its snapshot. ``columns`` projects;
``where`` is a SQL condition (Spark SQL, the text ``spark.hive_acid`` and Hive take; or a
``pyarrow.compute`` expression): its terms on partition columns prune partitions through
the metastore (``get_partitions_by_filter``), and the whole condition filters rows inside
the ORC reader, stripe by stripe.

Writes take Hive's locks and write ids, write the files ``spark.hive_acid`` writes (the same
code: ``orc_acid.table_io``), and commit with the write events the metastore records for
other engines. Each statement is a transaction of its own unless it runs in
``with ms.transaction() as tx:``. A losing concurrent UPDATE/DELETE/MERGE raises
:class:`WriteConflictError` (the metastore's write-write conflict check), whichever engine
won. ``ms.stream("db.events")`` is streaming ingest (``hms_txn.clients.streaming_ingest``):
rows are readable as soon as ``commit()`` returns.

This module is the stable import path; the implementation is ``hms_txn.clients.tables``.
"""

from hms_txn.clients.acid.errors import HiveAcidError, WriteConflictError
from hms_txn.clients.streaming_batch import StreamingError, TxnAbortedError
from hms_txn.clients.streaming_ingest import StreamingConnection
from hms_txn.clients.tables.api import Connection, Transaction, connect

__all__ = ["connect", "Connection", "Transaction", "HiveAcidError", "WriteConflictError",
           "StreamingConnection", "StreamingError", "TxnAbortedError"]
