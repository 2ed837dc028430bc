"""Extension mode's domain side (docs/extension-mode.md): the metadata cache and notification
log over the upstream metastore's tables (``extension_cache``, ``extension_events``),
read-through copies of what lives upstream (``upstream_catalog``), and the form and write-id
state a Hive 3/4 ACID table takes in a Hive 2.x upstream (``upstream_table_form``,
``upstream_write_ids``)."""
