"""Statistics: column statistics stored, read, written and aggregated as Hive 4's metastore does
it (``column_stats``, ``stats_writes``, ``stats_aggregation``), ``COLUMN_STATS_ACCURATE`` and
the rules for transactional tables (``stats_state``), and HiveServer2's runtime statistics
(``runtime_stats``)."""
