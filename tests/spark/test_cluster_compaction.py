"""Compaction as a Spark job (``hms_txn.compactor.engine=SPARK``) on the test cluster: two
workers with one core each in network namespaces of their own, the warehouse on S3.

Two tables of 4 partitions written by the same transactions (so with the same rows and
ROW__IDs): a base, then 20 insert transactions and 5 delete transactions, each writing every
partition (deltas and delete deltas alternating between bucket ids 0 and 1, so each
partition is two tasks). One is minor-compacted, the other major-compacted (a partition
waiting for cleaning takes no new request, and cleaning would take away the files of the
older snapshots). What every reader snapshot (one per committed transaction) holds is
computed here, in Python, as the tables are written; it is read back with ``orc_acid`` from
the files after every compaction. The metastore's worker runs the compactions; its
Initiator, Worker and Cleaner are driven by the test (``run_once`` of the server's own
classes, on its configuration and database) so that it decides when they look: the worker
then claims the four requests of a step together.

1. The Initiator queues a minor compaction of each partition of the first table (a
   per-table override keeps the delta/base size ratio from asking for a major one); the
   worker claims the four
   together and runs one Spark application, which the test kills through the master's
   web UI while it runs: the requests fail, their transactions abort, and what the tasks
   wrote is removed by the worker (or, written after that, aborted ``_vC`` output that no
   snapshot reads, for the Cleaner). The Initiator's next check queues them
   again (Hive's retry of failed compactions), and the second application succeeds.
2. A major compaction of the four partitions of the second (manual requests), one
   application.
3. The master lists the applications (``/json/``: the killed one and the two that
   finished), with the ids the requests recorded; the Cleaner then removes what the
   compactions replaced and the aborted output, and the newest snapshot is unchanged.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

import orc_acid
from orc_acid import fs as afs
from orc_acid.layout import encode_bucket
from tests.support.cluster import cluster_metastore, poll_until, snapshot_rows

pytestmark = [pytest.mark.spark]

DB, TABLES = "default", ("minor_events", "major_events")
PARTS = ("p=a", "p=b", "p=c", "p=d")
SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])
MINOR, MAJOR = 1, 2
SHARED_WRITE, PARTITION_LEVEL, OP_INSERT, OP_UPDATE, OP_DELETE = 2, 3, 2, 3, 4


@pytest.fixture(scope="module")
def hms(cluster, tmp_path_factory):
    server = cluster_metastore(cluster, str(tmp_path_factory.mktemp("hms")), {
        "hms_txn.compactor.engine": "SPARK",
        # the cluster and the application's resources, under Spark's own names
        "spark.master": cluster.master_url,
        "spark.driver.host": cluster.host, "spark.driver.bindAddress": cluster.host,
        "spark.executor.memory": "512m", "spark.executor.cores": "1",
        "spark.cores.max": "2", "spark.ui.enabled": "false"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def worker(hms):
    """The server's compaction worker (engine=SPARK), run by the test: ``worker.run_once()``
    claims what is queued and runs it."""
    from hms_txn.service.compactor.worker import Worker
    return Worker(hms.ms.config, hms.ms.units, hms.ms.txns)


@pytest.fixture(scope="module")
def client(hms):
    c = hms.client()
    yield c
    c.close()


# -- writing the table as an engine does, and the truth of every snapshot ----------------------

class Table:
    """The tables' writer and their model: ROW__ID -> row, per partition, after every
    transaction (``states``: (ValidTxnList of a snapshot taken then, rows))."""

    def __init__(self, client, fs_options):
        from hms_txn.clients import snapshots
        from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
        from tests.hms_txn.test_catalog import make_table
        self.T, self.snapshots = T, snapshots
        self.c, self.fs_options = client, fs_options
        for name in TABLES:
            client.create_table(make_table(DB, name, keys=(("p", "string"),), params={
                "transactional": "true",
                # minor by the delta count: never major by the deltas' size against the base's
                "compactorthreshold.hive.compactor.delta.pct.threshold": "1000",
                # the major-compacted one gets manual requests only
                "no_auto_compaction": str(name == TABLES[1]).lower()}))
            for part in PARTS:
                sd = client.get_table_acid_aware(DB, name).sd
                sd.location = None
                client.add_partition(T.Partition(dbName=DB, tableName=name,
                                                 values=[part[2:]], sd=sd))
        self.model = {p: {} for p in PARTS}
        self.states = []
        self.next_id = 0
        self.apps = {}

    def location(self, name, part):
        loc = self.c.get_partition_by_name(DB, name, part).sd.location
        return afs.filesystem_for(loc, self.fs_options)

    def _txn(self, op, write):
        T = self.T
        txn = self.c.open_txns(T.OpenTxnRequest(num_txns=1, user="test", hostname="h")) \
            .txn_ids[0]
        wids = {name: self.c.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
            dbName=DB, tableName=name, txnIds=[txn])).txnToWriteIds[0].writeId
            for name in TABLES}
        assert len(set(wids.values())) == 1          # the same ROW__IDs in both tables
        comps = [T.LockComponent(type=SHARED_WRITE, level=PARTITION_LEVEL, dbname=DB,
                                 tablename=name, partitionname=p, operationType=op,
                                 isTransactional=True) for name in TABLES for p in PARTS]
        assert self.c.lock(T.LockRequest(component=comps, txnid=txn, user="test",
                                         hostname="h")).state == 1
        wid = wids[TABLES[0]]
        for part in PARTS:
            write(part, [self.location(name, part) for name in TABLES], wid)
        self.c.commit_txn(T.CommitTxnRequest(txnid=txn, writeEventInfos=[T.WriteEventInfo(
            writeId=wid, database=DB, table=name, files="", partition=part)
            for name in TABLES for part in PARTS]))
        self.states.append((self.snapshots.valid_txn_list(self.c.get_open_txns()),
                            self.expected()))

    def _rows(self, n):
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return pa.table({"id": pa.array(ids, pa.int32()), "name": [f"n{i}" for i in ids]},
                        schema=SCHEMA)

    def insert(self, n, bucket, base=False):
        def write(part, places, wid):
            data = self._rows(n)
            for fs, path in places:
                if base:
                    orc_acid.write_base(path, wid, bucket, data, filesystem=fs)
                else:
                    orc_acid.write_delta(path, wid, 0, bucket, data, filesystem=fs)
            for i, row in enumerate(data.to_pylist()):
                self.model[part][(wid, encode_bucket(bucket), i)] = (row["id"], row["name"],
                                                                      part[2:])
        self._txn(OP_UPDATE if base else OP_INSERT, write)

    def delete(self, every):
        def write(part, places, wid):
            gone = sorted(self.model[part])[::every]
            ids = pa.table({"writeid": [g[0] for g in gone], "bucketid": [g[1] for g in gone],
                            "rowid": [g[2] for g in gone]})
            for fs, path in places:
                orc_acid.write_delete_delta(path, wid, 0, ids, row_schema=SCHEMA,
                                            filesystem=fs)
            for g in gone:
                del self.model[part][g]
        self._txn(OP_DELETE, write)

    def expected(self):
        return sorted(r for part in self.model.values() for r in part.values())


@pytest.fixture(scope="module")
def table(client, cluster):
    t = Table(client, cluster.s3_options())
    t.insert(40, bucket=0, base=True)
    t.insert(40, bucket=1)
    for k in range(19):
        t.insert(6, bucket=k % 2)
        if k % 4 == 3:
            t.delete(every=7)
    t.delete(every=5)
    return t


def check_every_snapshot(hms, table, fs_options, name):
    """Each snapshot of table ``name``'s history still reads what it read when it was
    taken; a fresh one reads the newest state."""
    def read(state):
        txns, want = state
        with hms.client() as c:           # a client per reading thread
            return snapshot_rows(c, f"{DB}.{name}", fs_options, txns) == want
    with ThreadPoolExecutor(4) as pool:
        same = list(pool.map(read, table.states))
    assert all(same), f"snapshots that read otherwise: {[i for i, ok in enumerate(same) if not ok]}"
    with hms.client() as c:
        assert snapshot_rows(c, f"{DB}.{name}", fs_options) == table.expected()


# -- the compactor, the master ---------------------------------------------------------------

def compactions(client, name):
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    return client.show_compact(T.ShowCompactRequest(tbName=name)).compacts or []


def outcomes(client, name, ids):
    """State of each compaction id once none of them is initiated or working, else None."""
    got = {e.id: e for e in compactions(client, name) if e.id in ids}
    if len(got) == len(ids) and all(e.state not in ("initiated", "working")
                                    for e in got.values()):
        return got
    return None


def kill_application(cluster, app_id):
    """What a click on the master's web UI 'kill' link of an application does: the form of
    the page (Spark 4.1+ asks for the page's CSRF token) posted to ``/app/kill/``."""
    import re
    with urllib.request.urlopen(f"{cluster.web_url}/", timeout=30) as r:
        page = r.read().decode("utf-8", "replace")
    token = re.search(r'name="csrfToken"[^>]*value="([^"]+)"|value="([^"]+)"[^>]*name="csrfToken"',
                      page)
    fields = {"id": app_id, "terminate": "true"}
    if token:
        fields["csrfToken"] = token.group(1) or token.group(2)
    data = urllib.parse.urlencode(fields).encode()
    urllib.request.urlopen(urllib.request.Request(f"{cluster.web_url}/app/kill/", data=data),
                           timeout=30).read()


MINOR_T, MAJOR_T = TABLES


def test_minor_compaction_on_spark_survives_a_killed_application_and_is_retried(
        cluster, hms, client, table, worker):
    from hms_txn.service.compactor.initiator import Initiator
    opts = cluster.s3_options()
    init = Initiator(hms.ms.config, hms.ms.units, hms.ms.txns)
    queued = init.run_once()["requested"]
    # both tables are due a minor compaction (more than 10 deltas): the second is left
    # alone (NO_AUTO_COMPACTION) for the manual major one
    assert sorted((obj[2], int(kind)) for obj, kind, _ in queued) == [(p, MINOR) for p in PARTS]
    ids = {e.id for e in compactions(client, MINOR_T) if e.state == "initiated"}
    assert len(ids) == 4
    # the worker claims the four for one application; kill it while it runs
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(worker.run_once)
        app = poll_until(lambda: next((e.hadoopJobId for e in compactions(client, MINOR_T)
                                     if e.id in ids and (e.hadoopJobId or "").startswith("app-")),
                                    None), 240, "the application started", job=run)
        poll_until(lambda: any(a["id"] == app and a["state"] == "RUNNING"
                             for a in cluster.master_state()["activeapps"]), 120,
                 "the application runs on the master", job=run)
        kill_application(cluster, app)
        assert run.result(timeout=240) is True
    failed = outcomes(client, MINOR_T, ids)
    assert failed and {e.state for e in failed.values()} == {"failed"}, failed
    assert all(app in (e.errorMessage or "") for e in failed.values()), failed
    # nothing became visible: every snapshot reads as before; the worker removed what the
    # application wrote, and anything a task still wrote after that is in directories of
    # the aborted compaction transactions only (the Cleaner's, below)
    check_every_snapshot(hms, table, opts, MINOR_T)
    leftovers = compacted_dirs(table, MINOR_T)
    assert all(aborted(client, name) for name in leftovers), leftovers
    # retried as Hive retries a failed compaction: the Initiator queues it again
    again = init.run_once()["requested"]
    assert sorted((obj[2], int(kind)) for obj, kind, _ in again) == [(p, MINOR) for p in PARTS]
    retry_ids = {e.id for e in compactions(client, MINOR_T) if e.state == "initiated"}
    assert worker.run_once() is True
    done = outcomes(client, MINOR_T, retry_ids)
    assert done and {e.state for e in done.values()} == {"ready for cleaning"}, done
    for part in PARTS:
        assert [n for n in names(table, MINOR_T, part) if "_v" in n and
                not aborted(client, n)] == [f"delete_delta_0000002_0000026_v{txn_of(done, part)}",
                                            f"delta_0000002_0000026_v{txn_of(done, part)}"]
    check_every_snapshot(hms, table, opts, MINOR_T)
    apps = {e.hadoopJobId for e in done.values()}
    assert len(apps) == 1 and app not in apps
    table.apps.update(killed=app, minor=apps.pop())
    table.aborted = leftovers


def test_major_compaction_on_spark_then_the_master_and_the_cleaner(cluster, hms, client,
                                                                   table, worker):
    from hms_txn.service.compactor.cleaner import Cleaner
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    opts = cluster.s3_options()
    ids = set()
    for part in PARTS:
        r = client.compact2(T.CompactionRequest(dbname=DB, tablename=MAJOR_T,
                                                partitionname=part, type=MAJOR))
        assert r.accepted, r
        ids.add(r.id)
    assert worker.run_once() is True
    done = outcomes(client, MAJOR_T, ids)
    assert done and {e.state for e in done.values()} == {"ready for cleaning"}, done
    for part in PARTS:
        assert [n for n in names(table, MAJOR_T, part) if "_v" in n] == \
            [f"base_0000026_v{txn_of(done, part)}"]
    check_every_snapshot(hms, table, opts, MAJOR_T)
    major_app = {e.hadoopJobId for e in done.values()}
    assert len(major_app) == 1
    # the master's list of completed applications has all three, the killed one as such
    state = {a["id"]: a for a in cluster.master_state()["completedapps"]}
    apps = {**table.apps, "major": major_app.pop()}
    assert {k: state[a]["state"] for k, a in apps.items()} == \
        {"killed": "KILLED", "minor": "FINISHED", "major": "FINISHED"}, state
    assert all(state[a]["name"].startswith("hms-txn compaction") for a in apps.values())
    # cleaning: what the compactions replaced and any aborted output go; the newest
    # snapshot reads the same from what is left
    cleaner = Cleaner(hms.ms.config, hms.ms.units, hms.ms.txns)
    poll_until(lambda: (cleaner.run_once(), not any(
        e.state == "ready for cleaning" for name in TABLES
        for e in compactions(client, name)))[1], 120, "cleaning")
    for part in PARTS:
        assert [n[:5] for n in names(table, MAJOR_T, part)] == ["base_"]
        assert [n[:6] for n in names(table, MINOR_T, part)] == ["base_0", "delete", "delta_"]
    assert not set(table.aborted) & set(compacted_dirs(table, MINOR_T))
    for name in TABLES:
        with hms.client() as c:
            assert snapshot_rows(c, f"{DB}.{name}", opts) == table.expected()


def txn_of(done, part):
    """The compaction transaction id (zero-padded as in directory names) of ``part``."""
    (e,) = [e for e in done.values() if e.partitionname == part]
    return f"{e.txnId:07d}" if getattr(e, "txnId", None) else "?"


def names(table, name, part):
    fs, path = table.location(name, part)
    return sorted(n for n, _, _ in afs.list_names(fs, path) if not n.startswith("."))


def compacted_dirs(table, name):
    """Every ``_vC`` directory of the table's partitions (a compaction's output)."""
    return sorted(f"{part}/{n}" for part in PARTS for n in names(table, name, part)
                  if "_v" in n)


def aborted(client, name):
    """Did the compaction transaction of output directory ``name`` abort?"""
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
    txn = int(name.rsplit("_v", 1)[1])
    info = {t.id: t.state for t in client.get_open_txns_info().open_txns}
    return info.get(txn) == T.TxnState.ABORTED
