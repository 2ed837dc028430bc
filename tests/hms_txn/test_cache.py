"""The ValidWriteIdList-aware metadata cache (hms_txn.cache), through real Thrift clients.

Single-process tests run on SQLite and PostgreSQL; the cross-process tests run two
`hms-txn serve` processes on one PostgreSQL database.
"""

from __future__ import annotations

import threading
import time

import pytest

from hms_txn.domain.cache.cache_entries import AHEAD, BEHIND, HIT, WriteIdState, compare
from hms_txn.wire.client import table_request
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from orc_acid.valid_ids import ValidWriteIdList
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import ServerProcess, client_for

FAST = {"hms_txn.cache.tail.interval": "0.05", "hms_txn.cache.tailer.pausable": "true"}
ACID = {"transactional": "true", "transactional_properties": "insert_only"}


# ----------------------------------------------------------------------------- helpers

def snapshot(client, db: str, table: str) -> str:
    """The reader's ValidWriteIdList string, built from get_valid_write_ids like Hive does."""
    r = client.get_valid_write_ids(t.GetValidWriteIdsRequest(fullTableNames=[f"{db}.{table}"]))
    x = r.tblValidWriteIds[0]
    bits = x.abortedBits or b""
    aborted = [i // 8 < len(bits) and bool((bits[i // 8] >> (i % 8)) & 1)
               for i in range(len(x.invalidWriteIds))]
    return str(ValidWriteIdList(
        x.fullTableName, x.writeIdHighWaterMark,
        open_ids=[w for w, a in zip(x.invalidWriteIds, aborted) if not a],
        aborted_ids=[w for w, a in zip(x.invalidWriteIds, aborted) if a],
        min_open=x.minOpenWriteId))


def with_own_write(snap: str, write_id: int) -> str:
    """The snapshot a writer reads with inside its transaction: its own write id valid."""
    v = ValidWriteIdList.parse(snap)
    return str(ValidWriteIdList(v.table_name, max(v.high_watermark, write_id),
                                open_ids=[w for w in v.open_ids if w != write_id],
                                aborted_ids=v.aborted_ids))


def top_valid(snap: str) -> int:
    v = ValidWriteIdList.parse(snap)
    h = v.high_watermark
    while h > 0 and not v.is_valid(h):
        h -= 1
    return h


def get_req(client, db, table, snap=None) -> t.Table:
    """get_table_req as an engine that reads ACID tables asks (declaring its capabilities)."""
    return client.get_table_req(table_request(db, table, validWriteIdList=snap)).table


def counters(client) -> dict[str, int]:
    return {k[len("hms_txn.cache."):]: v for k, v in client.getCounters().items()
            if k.startswith("hms_txn.cache.")}


def write_txn(client, db, table, params: dict[str, str]) -> int:
    """open_txns -> allocate_table_write_ids -> alter_table_req -> commit_txn; returns the
    write id. The table takes the write id because the alter carries the writer's
    ValidWriteIdList, as HiveServer2's does (Hive 4's ObjectStore.alterTable)."""
    txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    wid = client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
        dbName=db, tableName=table, txnIds=[txn])).txnToWriteIds[0].writeId
    tbl = client.get_table_acid_aware(db, table)
    tbl.parameters.update(params)
    tbl.writeId = wid
    client.alter_table_req(t.AlterTableRequest(
        dbName=db, tableName=table, table=tbl,
        validWriteIdList=with_own_write(snapshot(client, db, table), wid)))
    client.commit_txn(t.CommitTxnRequest(txnid=txn))
    return wid


def wait_caught_up(client, timeout=10.0) -> dict[str, int]:
    """Until the server's tailer has applied every event written so far."""
    target = client.get_current_notificationEventId().eventId
    deadline = time.time() + timeout
    while True:
        c = counters(client)
        if c["position"] >= target and c["lag.events"] == 0:
            return c
        assert time.time() < deadline, c
        time.sleep(0.02)


# ----------------------------------------------------------------------------- the rule

def vwl(hwm, open_ids=(), aborted=()):
    return ValidWriteIdList("d.t", hwm, open_ids=open_ids, aborted_ids=aborted)


def test_equivalence_rule():
    w = WriteIdState(5, frozenset({4}), frozenset({2}))
    assert compare(w, vwl(5, [4], [2])) == HIT
    assert compare(w, vwl(5, [4])) == HIT            # aborted ids do not matter ...
    assert compare(w, vwl(5, [2, 4])) == HIT         # ... open or aborted alike
    w2 = WriteIdState(6, frozenset({6}), frozenset())
    assert compare(w2, vwl(5)) == HIT                # an open id above the reader's HWM
    assert compare(w2, vwl(6)) == AHEAD              # the reader sees 6 committed
    assert compare(w2, vwl(6, [6])) == HIT
    assert compare(WriteIdState(6), vwl(5)) == BEHIND
    assert compare(WriteIdState(6, frozenset({3})), vwl(6)) == AHEAD
    assert compare(WriteIdState(6), vwl(6, [3])) == BEHIND
    assert compare(WriteIdState(0), vwl(0)) == HIT
    assert compare(WriteIdState(2, frozenset(), frozenset({1, 2})), vwl(0)) == HIT


def test_equivalence_rule_top_id():
    # W: 1..5 allocated, 4 open, 2 aborted -> valid {1, 3, 5}
    w = WriteIdState(5, frozenset({4}), frozenset({2}))
    assert compare(w, vwl(3)) == BEHIND              # reader: {1, 3}; W also has 5
    assert compare(w, vwl(5, [4, 5])) == BEHIND


# ----------------------------------------------------------------------------- one process

def test_external_and_plain_tables_are_cached(hms_factory):
    server = hms_factory(FAST)
    with client_for(server.port) as c:
        c.create_table(make_table("default", "plain", params={"k": "0"}))
        c.create_table(make_table("default", "ext", params={"EXTERNAL": "TRUE"},
                                  table_type="EXTERNAL_TABLE"))
        before = counters(c)
        for _ in range(3):
            assert c.get_table("default", "plain").parameters["k"] == "0"
            assert get_req(c, "default", "ext").tableType == "EXTERNAL_TABLE"
        after = counters(c)
        assert after["hits"] - before["hits"] == 4 and after["misses.cold"] - before["misses.cold"] == 2
        # a change through this process is visible to the next read at once
        tbl = c.get_table("default", "plain")
        tbl.parameters["k"] = "1"
        c.alter_table("default", "plain", tbl)
        assert c.get_table("default", "plain").parameters["k"] == "1"
        c.drop_table("default", "plain", True)
        with pytest.raises(t.NoSuchObjectException):
            c.get_table("default", "plain")
        with pytest.raises(t.NoSuchObjectException):
            get_req(c, "default", "plain", "default.plain:0:9223372036854775807::")
        c.create_table(make_table("default", "plain", params={"k": "new"}))
        assert c.get_table("default", "plain").parameters["k"] == "new"


def test_databases_are_cached_and_changes_through_this_server_are_seen_at_once(hms_factory):
    server = hms_factory(FAST)
    with client_for(server.port) as c:
        c.create_database(t.Database(name="Cdb", description="one", parameters={"k": "0"}))
        before = counters(c)
        for _ in range(3):
            db = c.get_database("CDB")
            assert (db.name, db.description, db.parameters["k"]) == ("cdb", "one", "0")
            assert c.get_database_req(t.GetDatabaseRequest(name="cdb")).parameters["k"] == "0"
        after = counters(c)
        assert after["hits"] - before["hits"] == 5
        assert after["misses.cold"] - before["misses.cold"] == 1
        assert after["databases"] >= 1
        db.parameters["k"] = "1"
        c.alter_database("cdb", db)
        assert c.get_database("cdb").parameters["k"] == "1"
        c.drop_database("cdb", True, False)
        with pytest.raises(t.NoSuchObjectException):
            c.get_database("cdb")
        c.create_database(t.Database(name="cdb", description="two", parameters={}))
        assert c.get_database("cdb").description == "two"


def test_transactional_reads_follow_the_snapshot(hms_factory):
    server = hms_factory(FAST)
    with client_for(server.port) as c:
        c.create_table(make_table("default", "acid", params={**ACID, "v": "0"}))
        s0 = snapshot(c, "default", "acid")
        assert get_req(c, "default", "acid", s0).parameters["v"] == "0"     # cold
        base = counters(c)
        assert get_req(c, "default", "acid", s0).parameters["v"] == "0"     # hit
        assert counters(c)["hits"] == base["hits"] + 1

        # inside the writing transaction: its own write id is valid -> database, new value
        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
        wid = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="default", tableName="acid", txnIds=[txn])).txnToWriteIds[0].writeId
        tbl = get_req(c, "default", "acid", s0)
        tbl.parameters["v"] = "1"
        c.alter_table("default", "acid", tbl)
        mine = with_own_write(snapshot(c, "default", "acid"), wid)
        assert get_req(c, "default", "acid", mine).parameters["v"] == "1"
        c.commit_txn(t.CommitTxnRequest(txnid=txn))
        s1 = snapshot(c, "default", "acid")
        assert top_valid(s1) == wid
        assert get_req(c, "default", "acid", s1).parameters["v"] == "1"     # at once
        wait_caught_up(c)
        base = counters(c)
        for _ in range(3):
            assert get_req(c, "default", "acid", s1).parameters["v"] == "1"
        assert counters(c)["hits"] == base["hits"] + 3
        # the old snapshot no longer matches the cache -> database
        get_req(c, "default", "acid", s0)
        assert counters(c)["misses.snapshot_behind"] == base["misses.snapshot_behind"] + 1

        # no list: the database (a client that reads no snapshot)
        get_req(c, "default", "acid")
        assert c.get_table_acid_aware("default", "acid").parameters["v"] == "1"
        assert counters(c)["misses.no_writeid_list"] == base["misses.no_writeid_list"] + 2
        with pytest.raises(t.MetaException, match="validWriteIdList"):
            get_req(c, "default", "acid", "garbage")

        # a pure data write (no metadata change) advances the write ids; the entry stays
        wid2 = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="default", tableName="acid",
            txnIds=c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids
        )).txnToWriteIds[0]
        c.commit_txn(t.CommitTxnRequest(txnid=wid2.txnId))
        s2 = snapshot(c, "default", "acid")
        wait_caught_up(c)
        base = counters(c)
        assert get_req(c, "default", "acid", s2).parameters["v"] == "1"
        assert counters(c)["hits"] == base["hits"] + 1


def test_strict_mode_rejects_reads_without_a_list(hms_factory):
    # capability check off: the old API's get_table of the insert-only table is answered
    server = hms_factory({**FAST, "hms_txn.cache.strict.writeids": "true",
                          "hive.metastore.client.capability.check": "false"})
    with client_for(server.port) as c:
        c.create_table(make_table("default", "acid", params=ACID))
        c.create_table(make_table("default", "plain"))
        for _ in range(2):   # cold, then cached
            with pytest.raises(t.MetaException, match="needs a validWriteIdList.*strict"):
                get_req(c, "default", "acid")
        get_req(c, "default", "acid", snapshot(c, "default", "acid"))
        assert get_req(c, "default", "plain").tableName == "plain"
        assert c.get_table("default", "acid").tableName == "acid"   # old API: database


def test_partitions_by_names(hms_factory):
    server = hms_factory(FAST)
    with client_for(server.port) as c:
        c.create_table(make_table("default", "pt", keys=[("ds", "string")], params=ACID))
        for ds in ("a", "b", "c"):
            c.add_partition(t.Partition(dbName="default", tableName="pt", values=[ds]))
        wait_caught_up(c)
        snap = snapshot(c, "default", "pt")

        def by_names(names):
            r = c.get_partitions_by_names_req(t.GetPartitionsByNamesRequest(
                db_name="default", tbl_name="pt", names=names, validWriteIdList=snap))
            return [p.values[0] for p in r.partitions]

        assert by_names(["ds=b", "ds=a", "ds=zz"]) == ["a", "b"]
        base = counters(c)
        assert by_names(["ds=a", "ds=b"]) == ["a", "b"]
        assert by_names(["ds=zz"]) == []
        assert counters(c)["hits"] == base["hits"] + 2
        assert by_names(["ds=c"]) == ["c"]                     # fills the missing name
        assert counters(c)["hits"] == base["hits"] + 2
        c.add_partition(t.Partition(dbName="default", tableName="pt", values=["zz"]))
        assert by_names(["ds=zz", "ds=a"]) == ["a", "zz"]      # own write: visible at once
        assert [p.values for p in c.get_partitions_by_names("default", "pt", ["ds=c"])] == [["c"]]


def test_cache_off_and_memory_bound(hms_factory):
    off = hms_factory({"hms_txn.cache.enabled": "false"})
    with client_for(off.port) as c:
        c.create_table(make_table("default", "acid", params=ACID))
        assert get_req(c, "default", "acid", snapshot(c, "default", "acid")).tableName == "acid"
        got = counters(c)
        assert got["enabled"] == 0 and got["hits"] == 0 and got["entries"] == 0
    small = hms_factory({**FAST, "hms_txn.cache.max.entries": "3"})
    with client_for(small.port) as c:
        for i in range(6):
            c.create_table(make_table("default", f"t{i}"))
        for _ in range(2):
            for i in range(6):
                assert c.get_table("default", f"t{i}").tableName == f"t{i}"
        got = counters(c)
        assert got["entries"] <= 3 and got["evictions"] >= 3 and got["bytes"] > 0


# ----------------------------------------------------------------------------- two processes

@pytest.fixture
def two_servers(postgres, tmp_path):
    conf = {"javax.jdo.option.ConnectionURL": postgres.create_database(),
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"), **FAST}
    a = ServerProcess(str(tmp_path / "a"), conf)
    b = ServerProcess(str(tmp_path / "b"), conf)
    yield a, b
    a.stop()
    b.stop()


def test_commit_on_a_is_read_at_once_on_b(two_servers):
    """A commits a write that changes table parameters. On B, a reader passing the new
    ValidWriteIdList gets the new metadata at once, a reader with the old snapshot may be
    served from cache, and after B's tailer catches up the new snapshot hits the cache."""
    a, b = two_servers
    with client_for(a.port) as ca, client_for(b.port) as cb:
        ca.create_table(make_table("default", "acid", params={**ACID, "v": "0"}))
        s0 = snapshot(cb, "default", "acid")
        assert get_req(cb, "default", "acid", s0).parameters["v"] == "0"
        assert get_req(cb, "default", "acid", s0).parameters["v"] == "0"
        assert counters(cb)["hits"] >= 1

        # 1. racing B's tailer: no sleep between A's commit and B's reads
        for i in range(1, 6):
            wid = write_txn(ca, "default", "acid", {"v": str(i)})
            s_new = snapshot(cb, "default", "acid")
            assert top_valid(s_new) == wid
            assert get_req(cb, "default", "acid", s_new).parameters["v"] == str(i)

        # 2. B's tailer paused: deterministic. The old snapshot is served from cache.
        wait_caught_up(cb)
        s_old = snapshot(cb, "default", "acid")
        assert get_req(cb, "default", "acid", s_old).parameters["v"] == "5"
        cb.setOption("hms_txn.cache.tailer.paused", "true")
        assert cb.getOption("hms_txn.cache.tailer.paused") == "true"
        wid = write_txn(ca, "default", "acid", {"v": "6", "numRows": "42"})
        s_new = snapshot(cb, "default", "acid")
        base = counters(cb)
        assert get_req(cb, "default", "acid", s_new).parameters["numRows"] == "42"   # database
        assert get_req(cb, "default", "acid", s_old).parameters["v"] == "5"          # cache
        got = counters(cb)
        assert got["misses.snapshot_ahead"] == base["misses.snapshot_ahead"] + 1
        assert got["hits"] == base["hits"] + 1
        assert got["lag.events"] >= 4 or got["position"] < ca.get_current_notificationEventId().eventId

        # 3. resumed: after catching up, new-snapshot reads hit (the tailer reloaded the entry)
        cb.setOption("hms_txn.cache.tailer.paused", "false")
        wait_caught_up(cb)
        base = counters(cb)
        for _ in range(5):
            tbl = get_req(cb, "default", "acid", s_new)
            assert (tbl.parameters["v"], tbl.parameters["numRows"], tbl.writeId) == ("6", "42", wid)
        got = counters(cb)
        assert got["hits"] == base["hits"] + 5 and got["misses"] == base["misses"]
        assert got["reloads"] >= 1
        get_req(cb, "default", "acid", s_old)                    # now behind the cache
        assert counters(cb)["misses.snapshot_behind"] == got["misses.snapshot_behind"] + 1


def test_database_change_on_a_reaches_b_through_its_tailer(two_servers):
    """A database cached on B is dropped from B's cache by A's ALTER/DROP_DATABASE events:
    once B's tailer has caught up, B answers with A's change."""
    a, b = two_servers
    with client_for(a.port) as ca, client_for(b.port) as cb:
        ca.create_database(t.Database(name="shared", description="", parameters={"v": "0"}))
        assert cb.get_database("shared").parameters["v"] == "0"
        assert cb.get_database("shared").parameters["v"] == "0"
        hits = counters(cb)["hits"]
        assert hits >= 1
        for v in ("1", "2"):
            db = ca.get_database("shared")
            db.parameters["v"] = v
            ca.alter_database("shared", db)
            wait_caught_up(cb)
            assert cb.get_database("shared").parameters["v"] == v
        ca.drop_database("shared", True, False)
        wait_caught_up(cb)
        with pytest.raises(t.NoSuchObjectException):
            cb.get_database("shared")


def test_paused_tailer_reads_stay_correct_and_hit_rate_recovers(two_servers):
    a, b = two_servers
    with client_for(a.port) as ca, client_for(b.port) as cb:
        ca.create_table(make_table("default", "acid", params={**ACID, "v": "0"}))
        ca.create_table(make_table("default", "plain", params={"v": "0"}))
        get_req(cb, "default", "acid", snapshot(cb, "default", "acid"))
        wait_caught_up(cb)

        def reads(n):
            """n rounds of (fresh snapshot, read on B); returns B's hit rate over them."""
            before = counters(cb)
            for _ in range(n):
                snap = snapshot(cb, "default", "acid")
                expected = str(top_valid(snap))
                assert get_req(cb, "default", "acid", snap).parameters["v"] == expected
            after = counters(cb)
            hits = after["hits"] - before["hits"]
            return hits / (hits + after["misses"] - before["misses"])

        write_txn(ca, "default", "acid", {"v": "1"})
        wait_caught_up(cb)
        assert reads(10) == 1.0

        cb.setOption("hms_txn.cache.tailer.paused", "true")
        for _ in range(3):
            write_txn(ca, "default", "acid", {"v": str(top_valid(snapshot(ca, "default", "acid")) + 1)})
        assert reads(10) == 0.0          # every read went to the database, and was right
        # The paused tailer measures its lag at each poll: the last one may predate the
        # last write by up to one interval.
        deadline = time.monotonic() + 30
        lagging = counters(cb)
        while lagging["lag.events"] < 12 and time.monotonic() < deadline:
            time.sleep(0.05)
            lagging = counters(cb)
        assert lagging["paused"] == 1 and lagging["lag.events"] >= 12

        cb.setOption("hms_txn.cache.tailer.paused", "false")
        wait_caught_up(cb)
        assert reads(10) == 1.0
        assert counters(cb)["lag.events"] == 0


def test_monotonic_reads_and_read_your_own_writes(two_servers):
    """A writer commits a series of writes through A (each sets v = its write id) while a
    reader alternates between A and B with fresh snapshots. Every read reflects every write
    its snapshot includes (v >= the snapshot's newest valid write id), so committed metadata
    never goes backwards; and the writer reads its own commit through B at once."""
    a, b = two_servers
    with client_for(a.port) as ca:
        ca.create_table(make_table("default", "acid", params={**ACID, "v": "0"}))
    committed = [0]
    stop = threading.Event()
    failures: list[str] = []
    stats = {"reads": 0, "in_flight": 0}

    def writer():
        try:
            with client_for(a.port) as ca, client_for(b.port) as cb:
                for _ in range(15):
                    txn = ca.open_txns(t.OpenTxnRequest(num_txns=1, user="w", hostname="h")).txn_ids[0]
                    wid = ca.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                        dbName="default", tableName="acid", txnIds=[txn])).txnToWriteIds[0].writeId
                    tbl = ca.get_table_acid_aware("default", "acid")
                    tbl.parameters["v"] = str(wid)
                    ca.alter_table("default", "acid", tbl)
                    mine = with_own_write(snapshot(cb, "default", "acid"), wid)
                    if get_req(cb, "default", "acid", mine).parameters["v"] != str(wid):
                        failures.append(f"own write {wid} not visible inside its txn on B")
                    ca.commit_txn(t.CommitTxnRequest(txnid=txn))
                    committed[0] = wid
                    for c in (cb, ca):
                        got = get_req(c, "default", "acid", snapshot(c, "default", "acid")).parameters["v"]
                        if got != str(wid):
                            failures.append(f"after commit of {wid}: read {got}")
        except Exception as err:  # pragma: no cover
            failures.append(repr(err))
        finally:
            stop.set()

    def reader():
        last = 0
        with client_for(a.port) as ca, client_for(b.port) as cb:
            i = 0
            while not stop.is_set() or i < 40:
                c = (ca, cb)[i % 2]
                i += 1
                floor = committed[0]
                snap = snapshot(c, "default", "acid")
                top = top_valid(snap)
                v = int(get_req(c, "default", "acid", snap).parameters["v"])
                stats["reads"] += 1
                if top < floor or v < top:
                    failures.append(f"stale: committed {floor}, snapshot top {top}, read {v}")
                if v > top:
                    stats["in_flight"] += 1   # an open txn's alter, visible in the database
                elif min(v, top) < last:
                    failures.append(f"went backwards: {last} -> {v}")
                last = max(last, min(v, top))

    threads = [threading.Thread(target=writer), threading.Thread(target=reader)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not failures, failures[:5]
    assert stats["reads"] >= 40
    with client_for(a.port) as ca, client_for(b.port) as cb:
        hits = 0
        for c in (ca, cb):
            wait_caught_up(c)
            snap = snapshot(c, "default", "acid")
            for _ in range(3):
                assert get_req(c, "default", "acid", snap).parameters["v"] == str(committed[0])
            hits += counters(c)["hits"]
        assert hits >= 6


@pytest.mark.parametrize("encoder", [
    "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageEncoder",
    "org.apache.hadoop.hive.metastore.messaging.json.gzip.GzipJSONMessageEncoder"])
def test_changes_named_only_in_messages_reach_b_in_either_format(postgres, tmp_path, encoder):
    """B's tailer reads A's messages in the configured format (json-0.2 or gzip(json-2.0)):
    a rename's ALTER_TABLE, whose row names the new table, drops the old name; a commit's
    keyValue, for which Hive writes no ALTER_TABLE, drops the table its COMMIT_TXN names;
    ALLOC_WRITE_ID_EVENT and COMMIT_TXN move a cached entry's write ids forward."""
    conf = {"javax.jdo.option.ConnectionURL": postgres.create_database(),
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse"),
            "hive.metastore.event.message.factory": encoder, **FAST}
    a, b = ServerProcess(str(tmp_path / "a"), conf), ServerProcess(str(tmp_path / "b"), conf)
    try:
        with client_for(a.port) as ca, client_for(b.port) as cb:
            ca.create_table(make_table("default", "old"))
            ca.create_table(make_table("default", "sink", params={**ACID, "_meta.batch": "0"}))
            ca.create_table(make_table("default", "acid", params=ACID))
            s0 = snapshot(cb, "default", "acid")
            for _ in range(2):
                cb.get_table("default", "old")
                cb.get_table_acid_aware("default", "sink")
                get_req(cb, "default", "acid", s0)
            wait_caught_up(cb)

            tbl = ca.get_table("default", "old")
            tbl.tableName = "new"
            ca.alter_table("default", "old", tbl)
            txn = ca.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
            ca.commit_txn(t.CommitTxnRequest(txnid=txn, keyValue=t.CommitTxnKeyValue(
                tableId=ca.get_table_acid_aware("default", "sink").id, key="_meta.batch", value="7")))
            txn = ca.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
            ca.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
                dbName="default", tableName="acid", txnIds=[txn]))
            ca.commit_txn(t.CommitTxnRequest(txnid=txn))

            wait_caught_up(cb)
            with pytest.raises(t.NoSuchObjectException):
                cb.get_table("default", "old")
            assert cb.get_table("default", "new").tableName == "new"
            assert cb.get_table_acid_aware("default", "sink").parameters["_meta.batch"] == "7"
            s1 = snapshot(cb, "default", "acid")
            assert s1 != s0
            base = counters(cb)
            get_req(cb, "default", "acid", s1)     # the entry's write ids moved with the log
            assert counters(cb)["hits"] == base["hits"] + 1
    finally:
        a.stop()
        b.stop()
