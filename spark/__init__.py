"""PySpark integration for Hive ACID tables served by hms-txn.

``spark.hive_acid`` is the API (its docstring maps the private modules that implement it);
``spark.streaming_sink`` the Structured Streaming sink behind ``hive_acid.write_stream``.
This is the only product package of the project that imports pyspark (benchmarks, examples
and tests start Spark sessions of their own).
"""
