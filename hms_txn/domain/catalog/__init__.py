"""The catalog's changes and calls: databases, tables and partitions (created, altered, moved,
truncated, dropped; specs, filters and event marks), constraints, functions, catalogs and the
small stores beside them, materialized views, Iceberg tables as Iceberg's ``HiveCatalog``
stores them, and the form a table takes for the client asking (``capabilities``,
``plain_form``). The stored form they share is ``domain.model.catalog``."""
