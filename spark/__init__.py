"""PySpark integration for Hive ACID tables served by hms-txn.

This is the only package of the project that imports pyspark.
"""
