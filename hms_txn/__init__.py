"""hms-txn: a Thrift-compatible Hive Metastore focused on ACID transactions."""

__version__ = "0.1.0"
