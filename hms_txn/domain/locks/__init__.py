"""Locks over the transactions: shared and exclusive locks on databases, tables and partitions
(Hive's ``DbLockManager``: ``locks``) and the materialized-view rebuild lock
(``rebuild_locks``)."""
