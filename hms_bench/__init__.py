"""Benchmarks of hms-txn: kept out of the product's import path (the `hms-txn bench` command is a plugin)."""
