"""hive_acid across hosts: a Spark standalone cluster whose two workers (one core each) run in
network namespaces of their own, the warehouse on S3 (``tests/support/cluster.py``).

One cluster, one metastore (bound on the cluster's bridge, ``hive.txn.timeout`` 8 s) and one
driver process for the module; the driver's Spark application also serves Spark Connect
(``SparkConnectPlugin``). Every result is checked against the truth computed here in plain
Python, and the table's files are also read independently with ``orc_acid``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.cluster import (REPO_ROOT, RemoteDriver, RemoteError, cluster_metastore,
                                   listening_addresses, poll_until, snapshot_rows)

pytestmark = [pytest.mark.spark]

TXN_TIMEOUT_S = 8
SCHEMA = "id INT, qty BIGINT, note STRING, day STRING"
DAYS = ("d1", "d2", "d3", "d4")


@pytest.fixture(scope="module")
def hms(cluster, tmp_path_factory):
    server = cluster_metastore(cluster, str(tmp_path_factory.mktemp("hms")), {
        "hive.txn.timeout": f"{TXN_TIMEOUT_S}s",
        "hive.timedout.txn.reaper.start": "1s", "hive.timedout.txn.reaper.interval": "1s"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ports(cluster):
    from hms_bench.servers import free_port
    return {"coordinator": free_port(cluster.host), "ui": free_port(cluster.host),
            "connect": free_port(cluster.host)}


class _Drivers:
    """The module's driver process, started again when a test killed it."""

    def __init__(self, cluster, hms, ports, tmp_path_factory):
        self.conf = {
            **cluster.spark_conf(), "spark.app.name": "hive-acid-cluster-tests",
            "spark.hadoop.hive.metastore.uris": hms.uri,
            "spark.hive_acid.coordinator.port": str(ports["coordinator"]),
            "spark.ui.enabled": "true", "spark.ui.port": str(ports["ui"]),
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4", "spark.sql.adaptive.enabled": "false",
            # the same application serves Spark Connect clients
            "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
            "spark.connect.grpc.binding.address": cluster.host,
            "spark.connect.grpc.binding.port": str(ports["connect"])}
        self.tmp = tmp_path_factory
        self.started: list[RemoteDriver] = []

    def get(self) -> RemoteDriver:
        if not self.started or not self.started[-1].alive():
            self.started.append(RemoteDriver(self.conf, str(self.tmp.mktemp("driver"))).start())
        return self.started[-1]

    def stop(self) -> None:
        for d in self.started:
            d.stop()


@pytest.fixture(scope="module")
def drivers(cluster, hms, ports, tmp_path_factory):
    d = _Drivers(cluster, hms, ports, tmp_path_factory)
    yield d
    d.stop()


@pytest.fixture
def driver(drivers) -> RemoteDriver:
    return drivers.get()


@pytest.fixture
def client(hms):
    c = hms.client()
    yield c
    c.close()


# -- what the driver runs (sent by value: tests/support/remote_driver.py) ----------------------

def _hive_acid_rows(spark, table):
    return sorted(tuple(r) for r in spark.read.format("hive_acid").load(table).collect())


def _app(spark):
    from spark._session import registered_driver
    sc = spark.sparkContext
    # tasks run per executor host, from the driver's own status store (what its UI's
    # /api/v1/.../allexecutors shows, without an HTTP round trip that a loaded machine can lose)
    executors = sc._jsc.sc().statusStore().executorList(False)
    tasks = {}
    for i in range(executors.size()):
        e = executors.apply(i)
        if e.id() != "driver":
            host = e.hostPort().rsplit(":", 1)[0]
            tasks[host] = tasks.get(host, 0) + int(e.totalTasks())
    return {"app": sc.applicationId, "tasks_by_host": tasks,
            "coordinator": tuple(registered_driver(spark).address)}


def _create_append_merge_delete(spark, table, rows, source):
    from spark import hive_acid as H
    H.create_table(spark, table, SCHEMA, partition_by=["day"])
    spark.createDataFrame(rows, SCHEMA).repartition(4).write.format("hive_acid") \
        .mode("append").save(table)
    seen = {"append": _hive_acid_rows(spark, table)}
    H.merge(spark, table, spark.createDataFrame(source, "id INT, qty BIGINT, op STRING"),
            on="t.id = s.id", when_matched_delete="s.op = 'd'",
            when_matched_update={"qty": "s.qty"},
            when_not_matched_insert={"id": "s.id", "qty": "s.qty", "note": "'new'",
                                     "day": "'d4'"})
    seen["merge"] = _hive_acid_rows(spark, table)
    H.delete(spark, table, "qty < 3")
    seen["delete"] = _hive_acid_rows(spark, table)
    return seen


# -- the truth, computed here ------------------------------------------------------------------

def _sorted(model):
    return sorted(model.values())


def test_create_append_merge_delete_read_on_both_workers(driver, cluster, hms, client, ports):
    table = "default.orders"
    rows = [(i, i * 7 % 23, f"n{i}", DAYS[i % 4]) for i in range(400)]
    source = [(i, 1000 + i, "d" if i % 10 == 0 else "u") for i in range(350, 450)]
    model = {r[0]: r for r in rows}
    want = {"append": _sorted(model)}
    for i, qty, op in source:
        if i in model:
            if op == "d":
                del model[i]
            else:
                model[i] = model[i][:1] + (qty,) + model[i][2:]
        else:
            model[i] = (i, qty, "new", "d4")
    want["merge"] = _sorted(model)
    model = {k: r for k, r in model.items() if r[1] >= 3}
    want["delete"] = _sorted(model)

    seen = driver.call(_create_append_merge_delete, table, rows, source)
    assert seen == want
    # the files, read independently from S3 at a fresh snapshot
    assert snapshot_rows(client, table, cluster.s3_options()) == want["delete"]

    app = driver.call(_app)
    # tasks ran on both workers, each in its own namespace
    assert set(cluster.worker_hosts) <= {h for h, n in app["tasks_by_host"].items() if n > 0}
    # the coordinator listens on the configured port of the driver's address (the kernel's
    # view of the driver process), and the executors' write tasks reached it there: the
    # namespaces route nothing but the bridge's /24
    assert app["coordinator"] == (cluster.host, ports["coordinator"])
    assert (cluster.host, ports["coordinator"]) in listening_addresses(driver.pid)


def _jvm_paths_on_shared_disk(spark, location, rows):
    """hive_acid's JVM writer and reader on the executors (the jars they fetch from the
    driver): a table on the disk every namespace shares (network namespaces share the mount
    table), where the executors' Hadoop opens the files itself."""
    import pyarrow.orc as po
    from spark import hive_acid as H
    H.create_database(spark, "shared_disk", location="file:" + location)
    table = "shared_disk.events"
    H.create_table(spark, table, "id INT, v STRING, p STRING", partition_by=["p"])
    df = spark.createDataFrame(rows, "id INT, v STRING, p STRING").repartition(4)
    H.insert(spark, table, df)
    writers = set()
    for d, _, names in os.walk(location):
        for n in names:
            if n.startswith("bucket_"):
                writers.add(po.ORCFile(os.path.join(d, n)).writer)
    got = H.read(spark, table)
    reader = "jvm" if "BatchScan" in got._jdf.queryExecution().executedPlan().toString() \
        else "other"
    return {"rows": sorted(tuple(r) for r in got.collect()), "writers": sorted(writers),
            "reader": reader}


def test_jvm_insert_and_read_on_the_executors(driver, cluster, tmp_path):
    rows = [(i, f"v{i}", ["a", "b/c", None][i % 3]) for i in range(300)]
    location = str(tmp_path / "shared")
    os.makedirs(location)
    got = driver.call(_jvm_paths_on_shared_disk, location, rows)
    assert got["writers"] == ["ORC_JAVA"] and got["reader"] == "jvm", got
    assert got["rows"] == sorted(rows)


def _transactions(spark, a, b, rows_a, rows_b, more):
    from spark import hive_acid as H
    for t, rows in ((a, rows_a), (b, rows_b)):
        H.create_table(spark, t, "id INT, v STRING")
        spark.createDataFrame(rows, "id INT, v STRING").write.format("hive_acid") \
            .mode("append").save(t)
    with H.transaction(spark) as tx:          # both or neither
        tx.append(a, spark.createDataFrame(more, "id INT, v STRING"))
        tx.delete(b, "id % 2 = 0")
        inside = sorted(tuple(r) for r in tx.read(b).collect())
    try:
        with H.transaction(spark) as tx:
            tx.delete(a, None)
            tx.append(b, spark.createDataFrame([(999, "x")], "id INT, v STRING"))
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    return {"inside": inside, "a": _hive_acid_rows(spark, a), "b": _hive_acid_rows(spark, b)}


def test_transaction_commits_both_tables_or_neither(driver, cluster, client):
    a, b = "default.tx_a", "default.tx_b"
    rows_a = [(i, f"a{i}") for i in range(50)]
    rows_b = [(i, f"b{i}") for i in range(50)]
    more = [(i, f"a{i}") for i in range(50, 80)]
    got = driver.call(_transactions, a, b, rows_a, rows_b, more)
    want_b = sorted(r for r in rows_b if r[0] % 2)
    assert got == {"inside": want_b, "a": sorted(rows_a + more), "b": want_b}
    assert snapshot_rows(client, a, cluster.s3_options()) == sorted(rows_a + more)
    assert snapshot_rows(client, b, cluster.s3_options()) == want_b


# -- a killed executor ---------------------------------------------------------------------

def _write_tagged(spark, table, total, marker):
    """Append ids 0..total-1 in two tasks, each row tagged with its task attempt's number;
    the first attempt of task 0 writes its executor's pid to ``marker`` first. Rows go to
    d1, d2, d3 (1% each) and d4 (the rest): a task writes d4's big file last."""
    import numpy as np
    import pyarrow as pa
    from pyspark import TaskContext
    from spark import hive_acid as H

    H.create_table(spark, table, "id BIGINT, attempt INT, day STRING", partition_by=["day"])

    def tag(batches):
        ctx = TaskContext.get()
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            pid = os.getpid()           # up to the executor JVM running this Python worker
            while pid > 1:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"CoarseGrainedExecutorBackend" in f.read():
                        break
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(marker + ".tmp", "w") as f:
                f.write(str(pid))
            os.replace(marker + ".tmp", marker)
        for b in batches:
            ids = b.column(0).to_numpy()
            day = np.where(ids % 100 < 3, np.char.add("d", (ids % 100 + 1).astype(str)), "d4")
            yield pa.RecordBatch.from_arrays(
                [b.column(0), pa.array(np.full(len(ids), ctx.attemptNumber()), pa.int32()),
                 pa.array(day.tolist(), pa.string())], names=["id", "attempt", "day"])

    spark.range(0, total, numPartitions=2) \
        .mapInArrow(tag, "id BIGINT, attempt INT, day STRING") \
        .write.format("hive_acid").mode("append").save(table)
    return sorted(tuple(r) for r in spark.read.format("hive_acid").load(table)
                  .selectExpr("id", "attempt").collect())


def test_a_killed_executor_s_files_never_become_visible(driver, cluster, client, tmp_path):
    import pyarrow.fs as pafs
    from orc_acid import fs as afs
    table, total = "default.killed_executor", 1_000_000
    marker = str(tmp_path / "executor.pid")
    job = driver.submit(_write_tagged, table, total, marker)
    pid = int(poll_until(lambda: os.path.exists(marker) and open(marker).read(), 240,
                     "task 0's first attempt started", job=job))
    location = poll_until(lambda: _location(client, table), 60, "the table exists")
    fs, root = afs.filesystem_for(location, cluster.s3_options())

    def first_file_of_task_0():
        found = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        return [f.path for f in found if f.path.endswith("/bucket_00000")]
    # task 0 has published a file (d1 is written first) and is writing the rest: kill its
    # executor now (the task is retried, in a new attempt, on an executor still alive)
    written = poll_until(first_file_of_task_0, 240, "task 0 published a file", every=0.02,
                     job=job)
    os.kill(pid, 9)
    rows = job.result(timeout=300)

    half = total // 2
    assert [r[0] for r in rows] == list(range(total))          # every row once
    # no row of the killed attempt is visible: task 0's rows all come from a retry
    assert {a for i, a in rows if i < half} and min(a for i, a in rows if i < half) >= 1
    assert {a for i, a in rows if i >= half} == {0}
    assert written and all(not p.endswith(".tmp") for p in written)
    independent = snapshot_rows(client, table, cluster.s3_options())
    assert [(r[0], r[1]) for r in independent] == rows


def _location(client, table):
    db, name = table.split(".")
    try:
        return client.get_table_acid_aware(db, name).sd.location
    except Exception:
        return None


# -- Spark Connect ---------------------------------------------------------------------------

CONNECT_CLIENT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    from spark import hive_acid as H
    spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
    print("ROWS", spark.range(3).count(), flush=True)
    calls = {"register": lambda: H.register(spark),
             "read": lambda: H.read(spark, "default.orders"),
             "delete": lambda: H.delete(spark, "default.orders", "id = 1"),
             "transaction": lambda: H.transaction(spark).__enter__()}
    for name, call in calls.items():
        try:
            call()
            print("ACCEPTED", name, flush=True)
        except H.HiveAcidError as e:
            print("REFUSED", name, str(e).replace("\\n", " "), flush=True)
""")


def test_spark_connect_clients_are_refused_saying_what_to_do(driver, cluster, ports):
    from tests.support.requirements import require_module
    require_module("grpc")             # Spark Connect's client (pyspark[connect])
    proc = subprocess.run(
        [sys.executable, "-c", CONNECT_CLIENT, f"sc://{cluster.host}:{ports['connect']}"],
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    lines = proc.stdout.splitlines()
    # Connect itself works against the cluster ...
    assert "ROWS 3" in lines, proc.stderr[-3000:]
    # ... and every hive_acid entry point refuses with what to do instead
    refused = {ln.split()[1]: ln for ln in lines if ln.startswith("REFUSED")}
    assert set(refused) == {"register", "read", "delete", "transaction"}, proc.stdout
    for line in refused.values():
        assert "not a Spark Connect client" in line and "spark-submit --master" in line


# -- a killed driver (last: it ends the module's driver; a later test would start another) ----

def _hang_in_a_transaction(spark, table, rows, more, flag):
    import time as _time
    from spark import hive_acid as H
    H.create_table(spark, table, "id INT, v STRING")
    spark.createDataFrame(rows, "id INT, v STRING").write.format("hive_acid") \
        .mode("append").save(table)
    with H.transaction(spark) as tx:
        tx.append(table, spark.createDataFrame(more, "id INT, v STRING"))
        with open(flag + ".tmp", "w") as f:
            f.write(str(tx.id))
        os.replace(flag + ".tmp", flag)
        while True:                    # killed here, its transaction open
            _time.sleep(1)


def test_a_killed_driver_s_transaction_is_aborted_after_the_timeout(driver, cluster, client,
                                                                   tmp_path):
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    table = "default.killed_driver"
    rows = [(i, f"v{i}") for i in range(40)]
    more = [(i, f"w{i}") for i in range(40, 60)]
    flag = str(tmp_path / "txn")
    call = driver.submit(_hang_in_a_transaction, table, rows, more, flag)
    txn_id = int(poll_until(lambda: os.path.exists(flag) and open(flag).read(), 240,
                        "the transaction wrote", job=call))

    def state():
        for t in client.get_open_txns_info().open_txns:
            if t.id == txn_id:
                return t.state
        return None
    assert state() == T.TxnState.OPEN
    before = snapshot_rows(client, table, cluster.s3_options())
    driver.kill()
    killed_at = time.monotonic()
    with pytest.raises(RemoteError):
        call.result(timeout=60)
    # nothing heartbeats it now: the metastore's reaper aborts it after hive.txn.timeout
    poll_until(lambda: state() != T.TxnState.OPEN, TXN_TIMEOUT_S * 3 + 30,
           "the transaction was aborted", every=0.5)
    assert state() in (T.TxnState.ABORTED, None)
    assert time.monotonic() - killed_at >= TXN_TIMEOUT_S / 2
    # its rows never became visible; the committed ones are all there
    assert before == sorted(rows)
    assert snapshot_rows(client, table, cluster.s3_options()) == sorted(rows)
