"""Benchmarks of the project, kept out of the product packages (``hms_txn``, ``orc_acid``,
``spark``): nothing there imports this package.

* ``python -m hms_bench.orc_acid_io``: ``orc_acid`` reads and writes vs plain pyarrow ORC;
* ``python -m hms_bench.spark_scan``: Spark ``hive_acid`` scans and appends vs Spark's
  native ORC (its ``local_spark`` also serves ``examples/pipeline.py``).

Timings depend on the machine; none of this is a test.
"""
