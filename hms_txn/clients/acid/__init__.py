"""Engine-independent clients of ACID tables: what ``spark.hive_acid`` and the plain Python
API (``hms_txn.tables``) share, one implementation of each.

* ``metastore``: the connection, snapshots (ValidTxnList / ValidWriteIdList strings), locks
  that wait, table descriptions (``TableInfo``) and partitions;
* ``txns``: transactions and their statements: write ids, statement ids, locks, the commit
  with its write events, the abort that removes a transaction's files, heartbeats;
* ``scans``: read locks held while a snapshot is read, and what a scan reads;
* ``statement_dirs``: the directories a statement writes and removing what must not stay;
* ``errors``: ``HiveAcidError``, ``WriteConflictError``.

The files themselves are written and read by ``orc_acid`` (``orc_acid.table_io``).
"""
