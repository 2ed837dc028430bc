"""The catalog's Thrift calls: databases, tables and partitions (``catalog``, with the request
forms of ``table_calls`` and ``partition_calls``), catalog-qualified names in every call's
arguments (``catalog_names``), catalogs and the small stores beside them (``catalogs``,
``hive_records``), constraints, functions, column statistics, the tables a client is given by
what it declared (``table_access``) and the owner of what a client creates (``owners``)."""
