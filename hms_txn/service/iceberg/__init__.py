"""The Iceberg REST catalog's services (served by ``hms_txn.rest``): namespaces and table
reads, drops and renames (``iceberg_catalog``), commits made the way Iceberg's
``HiveTableOperations`` makes them (``iceberg_commits``), and the metadata files
(``iceberg_metadata``)."""
