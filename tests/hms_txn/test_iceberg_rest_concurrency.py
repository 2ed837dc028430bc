"""Concurrent commits to one Iceberg table through both doors (issue 43): none is lost.

A REST commit takes the table's EXCLUSIVE lock in the metastore's lock manager, as Iceberg's
``HiveTableOperations`` (``MetastoreLock``) and pyiceberg's ``HiveCatalog.commit_table`` take
it over Thrift (``lock``, ``check_lock`` until ACQUIRED, ``alter_table_with_environment_context``,
``unlock``), and swaps ``metadata_location`` only if it still names the base. So a commit
through one door while the other holds the lock waits (or, past
``hms_txn.iceberg.lock.timeout``, fails with 409 and changes nothing). Thrift's alter honours
Hive 4's ``expected_parameter_key``/``_value``, the compare-and-swap Iceberg's Java client
sends when its own lock is off (``HiveOperationsBase.hmsEnvContext``).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import pyarrow as pa
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.table.update import AssertTableUUID, SetPropertiesUpdate
from pyiceberg.types import LongType, NestedField, StringType

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.iceberg_rest import hive_catalog, rest_catalog, rest_server

SCHEMA = Schema(NestedField(1, "id", LongType(), required=False),
                NestedField(2, "writer", StringType(), required=False))
ARROW = pa.schema([("id", pa.int64()), ("writer", pa.string())])
AGENT = "hms-txn Iceberg REST catalog"
PER_WRITER = 4


def rows(writer: str, *ids: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "writer": writer} for i in ids], schema=ARROW)


def append_retrying(load, writer: str, ids: list[int], deadline: float) -> int:
    """Append each id in its own commit, re-reading and retrying on a conflict (what an
    application does with pyiceberg); returns the number of 409s seen."""
    conflicts = 0
    for i in ids:
        while True:
            try:
                load().append(rows(writer, i))
                break
            except CommitFailedException:
                conflicts += 1
                if time.monotonic() > deadline:
                    raise
    return conflicts


def _process_writer(uri: str, ident: str, writer: str, ids: list[int], out) -> None:
    """One of the appending processes (its own interpreter and client)."""
    from pyiceberg.catalog.rest import RestCatalog
    catalog = RestCatalog("p", uri=uri)
    try:
        out.put((writer, append_retrying(lambda: catalog.load_table(ident), writer, ids,
                                         time.monotonic() + 120), None))
    except BaseException as err:      # reported to the test
        out.put((writer, -1, f"{type(err).__name__}: {err}"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = rest_server(str(tmp_path_factory.mktemp("iceberg-rest-conc")))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def rest(server):
    catalog = rest_catalog(server)
    catalog.create_namespace("conc")
    return catalog


@pytest.fixture
def thrift(server):
    client = server.client()
    yield client
    client.close()


def table_locks(thrift, table: str) -> list:
    found = thrift.show_locks(t.ShowLocksRequest()).locks or []
    return [lk for lk in found if lk.tablename == table]


def wait_for(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def ids_in(table) -> list[int]:
    return sorted(r["id"] for r in table.scan().to_arrow().to_pylist())


def test_four_processes_append_concurrently_and_no_commit_is_lost(server, rest, thrift):
    rest.create_table("conc.appends", schema=SCHEMA)
    # Separate interpreters, forked from one that imported pyiceberg once (not from this
    # process: it runs the server's threads).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pyiceberg.catalog.rest", "pyarrow", __name__])
    out = ctx.Queue()
    writers = [ctx.Process(target=_process_writer, args=(
        server.server.rest_address, "conc.appends", f"w{n}",
        list(range(n * 100, n * 100 + PER_WRITER)), out)) for n in range(4)]
    for proc in writers:
        proc.start()
    results = [out.get(timeout=180) for _ in writers]
    for proc in writers:
        proc.join(60)
    assert [err for _, _, err in results if err] == []
    table = rest.load_table("conc.appends")
    assert ids_in(table) == sorted(n * 100 + i for n in range(4) for i in range(PER_WRITER))
    # One snapshot per commit, each the child of the one before: a straight history.
    snapshots = table.snapshots()
    assert len(snapshots) == 4 * PER_WRITER
    by_id = {s.snapshot_id: s for s in snapshots}
    chain, current = [], table.current_snapshot()
    while current is not None:
        chain.append(current.snapshot_id)
        current = by_id.get(current.parent_snapshot_id)
    assert len(chain) == 4 * PER_WRITER
    assert table_locks(thrift, "appends") == []
    assert thrift.get_table("conc", "appends").parameters["snapshot-count"] == str(4 * PER_WRITER)


def test_rest_waits_for_a_thrift_lock_and_thrift_waits_behind_rest(server, rest, thrift):
    rest.create_table("conc.doors", schema=SCHEMA)
    hive = hive_catalog(server, **{"lock-check-min-wait-time": "0.05",
                                   "lock-check-max-wait-time": "0.5",
                                   "lock-check-retries": "100"})
    held = thrift.lock(t.LockRequest(component=[t.LockComponent(
        type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname="conc", tablename="doors",
        operationType=t.DataOperationType.NO_TXN, isTransactional=False)],
        user="other", hostname="elsewhere"))
    assert held.state == t.LockState.ACQUIRED
    failures: list[BaseException] = []

    def run(action):
        try:
            action()
        except BaseException as err:     # reported below
            failures.append(err)

    through_rest = threading.Thread(target=run, args=(
        lambda: rest.load_table("conc.doors").append(rows("rest", 1)),))
    through_rest.start()
    # The REST commit queues its lock behind the Thrift client's and waits.
    wait_for(lambda: [lk for lk in table_locks(thrift, "doors")
                      if lk.agentInfo == AGENT and lk.state == t.LockState.WAITING],
             "the REST commit's waiting lock")
    # pyiceberg's HiveCatalog (Thrift) now queues behind the REST commit's lock.
    through_thrift = threading.Thread(target=run, args=(
        lambda: hive.load_table("conc.doors").append(rows("thrift", 2)),))
    through_thrift.start()
    wait_for(lambda: len([lk for lk in table_locks(thrift, "doors")
                          if lk.state == t.LockState.WAITING]) == 2,
             "both commits waiting")
    assert rest.load_table("conc.doors").snapshots() == []      # nothing committed yet
    thrift.unlock(t.UnlockRequest(lockid=held.lockid))
    through_rest.join(60)
    through_thrift.join(60)
    assert failures == []
    table = rest.load_table("conc.doors")
    assert ids_in(table) == [1, 2] and len(table.snapshots()) == 2
    assert table_locks(thrift, "doors") == []


def test_a_rest_commit_that_cannot_get_the_lock_in_time_is_a_409(server, rest, thrift):
    table = rest.create_table("conc.timeout", schema=SCHEMA)
    commits = server.server.rest.app.state.services.commits
    held = thrift.lock(t.LockRequest(component=[t.LockComponent(
        type=t.LockType.EXCLUSIVE, level=t.LockLevel.TABLE, dbname="conc",
        tablename="timeout", operationType=t.DataOperationType.NO_TXN,
        isTransactional=False)], user="other", hostname="elsewhere"))
    before = thrift.get_table("conc", "timeout").parameters["metadata_location"]
    metadata_dir = table.location().removeprefix("file:") + "/metadata"
    files = set(os.listdir(metadata_dir))
    saved, commits.lock_timeout = commits.lock_timeout, 1.0
    try:
        with pytest.raises(CommitFailedException, match="Timed out after 1 s waiting for the lock"):
            rest.commit_table(table, (AssertTableUUID(uuid=table.metadata.table_uuid),),
                              (SetPropertiesUpdate(updates={"k": "v"}),))
    finally:
        commits.lock_timeout = saved
        thrift.unlock(t.UnlockRequest(lockid=held.lockid))
    assert thrift.get_table("conc", "timeout").parameters["metadata_location"] == before
    assert set(os.listdir(metadata_dir)) == files
    assert table_locks(thrift, "timeout") == []      # the REST commit's lock went too


def test_thrift_alter_honours_the_expected_parameter(rest, thrift):
    rest.create_table("conc.cas", schema=SCHEMA)
    rest.load_table("conc.cas").append(rows("rest", 1))
    hive = thrift.get_table("conc", "cas")
    current = hive.parameters["metadata_location"]
    stale = hive.parameters["previous_metadata_location"]

    def alter(expected: str, new_location: str | None):
        table = thrift.get_table("conc", "cas")
        if new_location is None:
            table.parameters.pop("metadata_location")
        else:
            table.parameters["metadata_location"] = new_location
        thrift.alter_table_with_environment_context("conc", "cas", table, t.EnvironmentContext(
            properties={"expected_parameter_key": "metadata_location",
                        "expected_parameter_value": expected}))

    with pytest.raises(t.MetaException) as refused:
        alter(stale, stale + ".next")
    assert refused.value.message == (
        f"The table has been modified. The parameter value for key 'metadata_location' is "
        f"'{current}'. The expected was value was '{stale}'")
    with pytest.raises(t.MetaException, match="New value for expected key metadata_location"):
        alter(current, None)
    assert thrift.get_table("conc", "cas").parameters["metadata_location"] == current
    alter(current, current)       # the expected value holds: the alter happens
    # A REST commit based on the table as it was still commits (it re-reads under the lock).
    rest.load_table("conc.cas").append(rows("rest", 2))
    assert ids_in(rest.load_table("conc.cas")) == [1, 2]


def test_both_doors_appending_at_once_lose_nothing(server, rest, thrift):
    rest.create_table("conc.mixed", schema=SCHEMA)

    def hive():     # one per thread: a HiveCatalog holds one Thrift connection
        return hive_catalog(server, **{"lock-check-min-wait-time": "0.02",
                                       "lock-check-max-wait-time": "0.2",
                                       "lock-check-retries": "200"})

    deadline = time.monotonic() + 120
    failures: list[BaseException] = []
    plan = [(lambda: rest_catalog(server), "r0", range(0, 3)),
            (lambda: rest_catalog(server), "r1", range(10, 13)),
            (hive, "h0", range(20, 23)), (hive, "h1", range(30, 33))]

    def writer(make, name, ids):
        try:
            catalog = make()
            append_retrying(lambda: catalog.load_table("conc.mixed"), name, list(ids), deadline)
        except BaseException as err:     # reported below
            failures.append(err)

    threads = [threading.Thread(target=writer, args=p) for p in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(150)
    assert failures == []
    expected = sorted(i for _, _, ids in plan for i in ids)
    assert ids_in(rest.load_table("conc.mixed")) == expected
    assert ids_in(hive().load_table("conc.mixed")) == expected
    assert len(rest.load_table("conc.mixed").snapshots()) == len(expected)
    assert table_locks(thrift, "mixed") == []
