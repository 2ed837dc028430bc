"""The vocabulary every other part of the domain shares, below all of them: names and their
rules (names, qualified_names), the stored form of databases, tables and partitions
and its reads (catalog), partition filters (partition_filter) and default locations
(warehouse)."""
