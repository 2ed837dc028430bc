"""Replays of real engines' metastore calls (HiveServer2 4, Trino, Impala, Spark's Hive 2.3
client) and Spark SQL statements against hms-txn: see replay.py."""
