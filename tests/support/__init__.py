"""Helpers the test suite uses to start real components (PostgreSQL, servers, Spark)."""
