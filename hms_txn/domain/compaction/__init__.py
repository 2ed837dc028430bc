"""The compactor's side of the compaction queue (Hive's ``CompactionTxnHandler``): claiming
requests, their states, the history and what cleaning purges (``compaction_bookkeeping``),
Hive 4's calls on requests besides enqueueing and listing them (``compaction_admin``), and a
Hive compactor running elsewhere on our queue (``external_compactor``). The queue itself, as
the transactions use it, is ``domain.txn.compaction_queue``."""
