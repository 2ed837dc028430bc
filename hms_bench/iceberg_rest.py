"""Benchmark workloads of the Iceberg REST catalog (issue 43), beside the Thrift path's
``get_table``: the servers run with ``metastore.catalog.servlet.port=0`` (auth none) and
the workers talk HTTP to ``target.rest``.

* ``rest_load_table``: ``GET .../namespaces/bench_rest/tables/loaded`` (loadTable) of a table
  with a few snapshots: the metadata cache's table and the metadata file's cached bytes.
* ``rest_append``: one append commit of one data file (pyiceberg's ``Transaction.append``
  writes the data file, manifest and manifest list untimed, in ``prepare``; the timed
  operation is the commit POST: the table lock, the requirement check, pyiceberg's update,
  the new metadata file written durably, the pointer swap with its event). Each client
  appends to its own table (no conflicts: the server's commit path, not retries); a
  table's metadata grows by one snapshot per commit, as in production.
"""

from __future__ import annotations

from typing import Any

from hms_bench.workloads import Target, Workload

NAMESPACE = "bench_rest"


def _catalog(target: Target):
    from pyiceberg.catalog.rest import RestCatalog
    if not target.rest:
        raise RuntimeError(f"{target.name} serves no Iceberg REST catalog")
    return RestCatalog("bench", uri=target.rest)


def _schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType
    return Schema(NestedField(1, "id", LongType(), required=False),
                  NestedField(2, "name", StringType(), required=False))


def _rows(i: int):
    import pyarrow as pa
    return pa.Table.from_pylist([{"id": i, "name": f"row {i}"}],
                                schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))


def _ensure(catalog, name: str):
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError
    try:
        catalog.create_namespace(NAMESPACE)
    except NamespaceAlreadyExistsError:
        pass
    try:
        return catalog.load_table(f"{NAMESPACE}.{name}"), False
    except NoSuchTableError:
        return catalog.create_table(f"{NAMESPACE}.{name}", schema=_schema()), True


class RestLoadTable(Workload):
    name = "rest_load_table"
    description = "Iceberg REST loadTable of a table with 5 snapshots (HTTP GET, one session per client)"
    java = False
    clients = (1, 16)

    def setup(self, client, target):
        table, created = _ensure(_catalog(target), "loaded")
        if created:
            for i in range(5):
                table.append(_rows(i))

    def worker_setup(self, client, target, worker) -> Any:
        import requests
        session = requests.Session()
        return session, f"{target.rest}/v1/hive/namespaces/{NAMESPACE}/tables/loaded"

    def run(self, client, state, i):
        session, url = state
        answer = session.get(url, timeout=60)
        if answer.status_code != 200:
            raise RuntimeError(f"loadTable: {answer.status_code} {answer.text[:200]}")


class RestAppend(Workload):
    name = "rest_append"
    description = ("Iceberg REST commit of a one-file append (the commit POST; the data file "
                   "and manifests are written untimed), each client on its own table")
    java = False
    clients = (1, 16)
    has_prepare = True

    def worker_setup(self, client, target, worker) -> Any:
        table, _ = _ensure(_catalog(target), f"appends_{worker}")
        return {"table": table, "txn": None}

    def prepare(self, client, state, i):
        txn = state["table"].transaction()
        txn.append(_rows(i))
        state["txn"] = txn

    def run(self, client, state, i):
        state["table"] = state["txn"].commit_transaction()
