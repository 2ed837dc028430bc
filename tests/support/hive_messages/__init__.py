"""The decoding harness of the notification-message tests: Java sources compiled by the
tests against PySpark's Hive 2.3 jars, and the workload whose messages they decode."""
