"""Read and write Hive ACID tables from PySpark with snapshot isolation.

    from spark import hive_acid
    hive_acid.register(spark)                      # once per session
    df = hive_acid.read(spark, "db.t")             # JVM reader; lock while df is in use
    hive_acid.sql(spark, "SELECT p, count(*) FROM db.t GROUP BY p")   # the same reader
    df = spark.read.format("hive_acid").load("db.t")   # Python data source: half as fast
    hive_acid.insert(spark, "db.t", df)            # JVM writer; overwrite=True: INSERT OVERWRITE
    df.write.format("hive_acid").mode("append").save("db.t")      # Python data source
    hive_acid.delete(spark, "db.t", "id < 10")
    hive_acid.update(spark, "db.t", set={"qty": "qty + 1"}, condition="id = 3")
    hive_acid.merge(spark, "db.t", src_df, on="t.id = s.id",
                    when_matched_update={"qty": "s.qty"}, when_not_matched_insert={...})
    with hive_acid.transaction(spark) as tx:       # several statements, one transaction
        tx.append("db.a", df); tx.delete("db.b", "x = 1")
    hive_acid.sql(spark, "MERGE INTO db.t USING ... ON ... WHEN MATCHED THEN UPDATE SET ...")
    hive_acid.write_stream(stream_df, "db.t", checkpoint_location="/chk")  # exactly-once sink
    with hive_acid.snapshot(spark, "db.t") as df:  # read()'s DataFrame, lock for the block
        df.groupBy("day").count().show()

Reads: the driver takes a SHARED_READ lock and then a snapshot (ValidTxnList + the table's
ValidWriteIdList). ``read()``, the ACID tables of ``sql()`` queries and ``snapshot()``
(``_reads``, ``_native``) scan the snapshot's files with hive_acid's JVM reader
(``jvm/AcidOrcSource.java``, compiled in the driver's JVM by ``_jvm``): the table columns
as flat columns, the snapshot and the deletes applied per file in the reader; their lock
is a lease held while the DataFrame or one derived from it can be used (``_leases``), or
the ``with`` block. The Python data source (``spark.read.format("hive_acid")``: one Spark
input partition per (table partition, bucket id), executors read with ``orc_acid`` and
return Arrow batches, the lock held while the scan runs) is what the JVM path falls back
to where it cannot read exactly (see docs/spark.md). Options: ``metastore.uris``,
``columns``, ``withRowId`` (adds ``ROW__ID``).

Writes: one transaction per job (write id allocated, lock taken, heartbeated from the driver
process); tasks write ``delta_W_W_S/bucket_<task>`` (``base_W`` for overwrite):
``insert()`` and ``sql("INSERT ...")`` from Spark's JVM (``_jvm_insert``,
``jvm/AcidOrcSink.java``: as fast as a plain ORC write) where the table allows it
(unbucketed, no timestamp column, partitioned by strings, integers or booleans if at all),
else, like ``format("hive_acid")``, with
``orc_acid`` in Python workers (``df.write.format("hive_acid")`` logs a warning naming
``insert`` where that would be faster); the commit
removes files of failed task attempts, registers new partitions, records dynamic partitions
and commits with write events; a failed job aborts its transaction and deletes its files,
including those of tasks that finish after the abort (``_attempts``).

UPDATE/DELETE/MERGE follow Hive's split update: ``delete_delta_W_W_S`` (events in the file of
each row's decoded bucket) plus ``delta_W_W_(S+1)`` for new row versions. They take a
SHARED_WRITE lock with operation UPDATE/DELETE and commit with ``exclWriteEnabled=false`` so
the metastore's write-write conflict check applies; the loser gets ``WriteConflictError``.

This module is the public front; the work is done by private modules, each one concern:

* ``_session`` -- register / shutdown, which ``Driver`` a session uses;
* ``_driver`` -- the driver process's transactions and statements; ``_coordinator`` (the
  endpoint workers and tasks call, ``_rpc`` their side), ``_scans`` (read locks, what a
  scan reads), ``_statement_dirs`` (a statement's directories), ``_attempts`` (task
  attempts);
* ``_datasource`` -- the ``hive_acid`` data source; ``_io`` -- what its tasks run;
* ``_scope`` -- the transaction and snapshot a statement runs in, and ``read``;
* ``_dml`` -- insert / update / delete / merge (``_jvm_insert``: inserts in the JVM);
  ``_sql`` -- ``sql()``; ``_ddl`` -- DDL;
* ``_transaction`` -- ``transaction()``; ``_reads`` -- ``read()`` and the DataFrame of
  ``snapshot()`` (``_held_snapshot``); ``_native`` (+ ``_native_jvm``, ``_jvm``,
  ``_native_stock``) -- the JVM scan path; ``_leases`` -- read locks as long as a DataFrame;
* ``_metastore`` (Thrift helpers, ``TableInfo``), ``_types`` (Hive/Spark/Arrow types),
  ``_errors``; ``streaming_sink`` -- the Structured Streaming sink (``write_stream``).
"""

from __future__ import annotations

# the settings naming where the coordinator listens, and the functions reading them
from ._coordinator import COORDINATOR_HOST as COORDINATOR_HOST
from ._coordinator import COORDINATOR_PORT as COORDINATOR_PORT
from ._coordinator import coordinator_hosts as coordinator_hosts
from ._coordinator import coordinator_ports as coordinator_ports
from ._datasource import FORMAT as FORMAT    # the data source's name: format("hive_acid")
from ._datasource import HiveAcidDataSource
from ._ddl import create_database, create_table, drop_table
from ._dml import delete, insert, merge, update
from ._errors import HiveAcidError, WriteConflictError
from ._held_snapshot import Snapshot, snapshot
from ._reads import read
from ._session import register, shutdown
from ._sql import sql
from ._transaction import Transaction, transaction
from .streaming_sink import write_stream

__all__ = ["register", "shutdown", "create_database", "create_table", "drop_table", "read",
           "insert", "delete", "update", "merge", "transaction", "Transaction", "snapshot",
           "Snapshot", "sql", "write_stream", "HiveAcidError", "WriteConflictError",
           "HiveAcidDataSource"]
