"""The Iceberg REST catalog: a second protocol over the metastore's service layer.

Hive 4.1's metastore serves the Apache Iceberg REST Catalog API beside Thrift; so does
``hms-txn serve`` when ``metastore.catalog.servlet.port`` is set (README "Iceberg REST").
This package is the HTTP edge only, as ``wire`` is Thrift's: the routes and bodies of the
spec (``app``, ``models``), who is calling (``auth``), the spec's errors (``errors``) and the
listener (``listener``). What the calls do is the service layer's
(``service.iceberg.iceberg_catalog``, ``service.iceberg.iceberg_commits``): the same
databases, tables, locks and notification log as the Thrift calls.

Its packages (FastAPI, uvicorn, pyiceberg, PyJWT) are the ``[rest]`` extra: nothing of the
metastore imports this package unless the catalog is turned on.
"""
