"""Benchmarks of hms-txn, outside the product's import path (`hms-txn bench` is a plugin)."""
