"""Transactions and write ids (Hive's ``TxnHandler``): the TXNS rows every transactional module
uses (``txn_records``), opening, aborting, snapshots and heartbeats (``txn``), per-table write
ids (``writeids``), the commit and its write-write conflict check (``txn_commit``), a
replica's write-id state (``repl_write_ids``), the data changes clients report
(``dml_events``), and the compaction queue as the transactions use it: enqueueing, listing
and a compaction's commit (``compaction_queue``; the compactor's side is ``domain.compaction``)."""
