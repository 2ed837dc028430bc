"""pyiceberg's ``HiveCatalog`` against hms-txn, on both backends.

It creates a namespace and an Iceberg table, appends twice and reads the rows back. Each
append is a Hive commit: ``lock`` (waiting with ``check_lock`` if needed),
``get_table``, ``alter_table_with_environment_context`` pointing the table at the new
metadata file, ``unlock``. The test records the calls the server received to show that
path was taken, and checks that no lock is left behind.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from pyiceberg.catalog.hive import HiveCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.recorder import CallRecorder

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
)
ARROW = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


@pytest.fixture
def recorded(hms):
    recorder = CallRecorder(hms.server.dispatcher)
    yield recorder
    recorder.restore()


def test_hive_catalog_namespace_table_appends_and_scan(hms, recorded, client, tmp_path):
    warehouse = (tmp_path / "iceberg-wh").as_uri()  # file:///...
    catalog = HiveCatalog("hive", uri=hms.uri, warehouse=warehouse)

    catalog.create_namespace("ice", {"comment": "iceberg namespace"})
    assert ("ice",) in catalog.list_namespaces()
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("ice")

    table = catalog.create_table("ice.orders", schema=SCHEMA)
    assert ("ice", "orders") in catalog.list_tables("ice")
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table("ice.orders", schema=SCHEMA)
    created_location = client.get_table("ice", "orders").parameters["metadata_location"]

    calls_before = dict(recorded.calls)
    table.append(pa.Table.from_pylist(
        [{"id": 1, "name": "a", "amount": 1.5}, {"id": 2, "name": "b", "amount": 2.5}], schema=ARROW))
    after_first = client.get_table("ice", "orders").parameters
    table = catalog.load_table("ice.orders")
    table.append(pa.Table.from_pylist([{"id": 3, "name": "c", "amount": 4.0}], schema=ARROW))

    # Both appends committed through lock / alter_table_with_environment_context / unlock.
    commit_calls = {m: recorded.calls[m] - calls_before.get(m, 0)
                    for m in ("lock", "check_lock", "unlock", "alter_table_with_environment_context")}
    assert commit_calls["lock"] == 2, recorded.calls
    assert commit_calls["unlock"] == 2, recorded.calls
    assert commit_calls["alter_table_with_environment_context"] == 2, recorded.calls
    assert commit_calls["check_lock"] == 0  # nobody else held a lock: granted at once

    # The scan reads both appends, through a fresh catalog (nothing cached client-side).
    reader = HiveCatalog("hive", uri=hms.uri, warehouse=warehouse)
    rows = reader.load_table("ice.orders").scan().to_arrow().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "name": "a", "amount": 1.5}, {"id": 2, "name": "b", "amount": 2.5},
                    {"id": 3, "name": "c", "amount": 4.0}]
    assert len(reader.load_table("ice.orders").snapshots()) == 2

    # What the metastore holds: an Iceberg table whose metadata pointer moved twice.
    hive_table = client.get_table("ice", "orders")
    params = hive_table.parameters
    assert params["table_type"].upper() == "ICEBERG"
    assert params["metadata_location"] != after_first["metadata_location"] != created_location
    assert params["previous_metadata_location"] == after_first["metadata_location"]
    assert after_first["previous_metadata_location"] == created_location
    assert hive_table.tableType == "EXTERNAL_TABLE"
    assert hive_table.sd.location.endswith("/ice.db/orders")

    # No lock is left behind after the commits.
    locks = client.show_locks(t.ShowLocksRequest()).locks or []
    assert [lk for lk in locks if (lk.tablename or "").lower() == "orders"] == []

    # Dropping through pyiceberg removes it from the metastore.
    catalog.drop_table("ice.orders")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("ice.orders")
    assert client.get_all_tables("ice") == []
    catalog.drop_namespace("ice")
    assert "ice" not in client.get_all_databases()


def test_commit_waits_on_check_lock_while_another_client_holds_the_table(hms, recorded, client, tmp_path):
    """A conflicting lock makes pyiceberg's commit poll ``check_lock`` until it is released."""
    catalog = HiveCatalog("hive", uri=hms.uri, warehouse=(tmp_path / "iceberg-wh").as_uri(), **{
        "lock-check-min-wait-time": "0.05", "lock-check-max-wait-time": "0.2", "lock-check-retries": "300"})
    catalog.create_namespace("ice")
    table = catalog.create_table("ice.contended", schema=SCHEMA)
    before = client.get_table("ice", "contended").parameters["metadata_location"]

    held = client.lock(t.LockRequest(component=[t.LockComponent(
        type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname="ice", tablename="contended",
        operationType=t.DataOperationType.NO_TXN, isTransactional=False)],
        user="other", hostname="elsewhere"))
    assert held.state == t.LockState.ACQUIRED

    errors: list[BaseException] = []

    def append() -> None:
        try:
            table.append(pa.Table.from_pylist([{"id": 7, "name": "late", "amount": 1.0}], schema=ARROW))
        except BaseException as err:  # reported below
            errors.append(err)

    writer = threading.Thread(target=append)
    writer.start()
    deadline = time.monotonic() + 30
    while recorded.calls["check_lock"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recorded.calls["check_lock"] >= 3, recorded.calls  # it is waiting, not failing
    assert writer.is_alive()
    assert client.get_table("ice", "contended").parameters["metadata_location"] == before

    client.unlock(t.UnlockRequest(lockid=held.lockid))
    writer.join(30)
    assert not writer.is_alive() and errors == []
    after = client.get_table("ice", "contended").parameters
    assert after["metadata_location"] != before and after["previous_metadata_location"] == before
    rows = catalog.load_table("ice.contended").scan().to_arrow().to_pylist()
    assert rows == [{"id": 7, "name": "late", "amount": 1.0}]
    assert recorded.calls["unlock"] >= 2  # ours and pyiceberg's
    locks = client.show_locks(t.ShowLocksRequest()).locks or []
    assert [lk for lk in locks if (lk.tablename or "").lower() == "contended"] == []
