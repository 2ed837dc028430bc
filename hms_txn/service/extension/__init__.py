"""Extension mode's service side (docs/extension-mode.md): the catalog calls forwarded to the
upstream metastore and the rules they follow (``forwarding``, over what the forwarding
services share: ``forwarder``), partition calls (``forwarding_partitions``), request-style
calls (``forwarding_requests``), and Hive 3/4 ACID tables on a Hive 2.x upstream on the
Thrift side (``forwarding_table_form``)."""
