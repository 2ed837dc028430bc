"""The plain Python API of ACID tables (public as ``hms_txn.tables``): ``api`` (connections,
transactions, reads), ``reads``, ``writes``, ``merge``, ``predicates`` (the SQL conditions)."""
