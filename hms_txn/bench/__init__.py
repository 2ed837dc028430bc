"""Benchmarks and the launcher for the reference Java metastore they compare against."""
