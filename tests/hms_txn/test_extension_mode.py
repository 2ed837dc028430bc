"""Extension mode: hms-txn in front of an existing metastore (docs/extension-mode.md).

The first group uses another hms-txn server (normal mode) as the upstream, which is fast
and has a notification log and SASL: forwarding, exceptions, SASL, failover, the upstream
notification tailer and the TTL. The second group runs against the real Java metastore
2.3 (PySpark's jars; one instance for the module, restarted once): Spark SQL through us
lands there, ACID writes/reads with our write ids and locks on a table that lives there,
and the upstream stopping and coming back mid-test.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest
from thrift.Thrift import TException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from hms_txn.wire.client import table_request
from tests.hms_txn.test_catalog import make_table
from tests.support.postgres import free_port
from hms_txn.domain.events import notifications
from tests.support.servers import InProcessServer, connect
from tests.support.requirements import require_module

SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])
SHARED_WRITE, TABLE_LEVEL, OP_INSERT = 2, 2, 2


def _server(root, name: str, conf: dict) -> InProcessServer:
    base = os.path.join(str(root), name)
    return InProcessServer(os.path.join(base, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{base}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(base, "warehouse"),
        **conf})


def _ext_conf(uri: str, **extra) -> dict:
    return {"hms_txn.upstream.uris": uri, "hms_txn.upstream.retries": "1",
            "hms_txn.upstream.retry.delay": "50ms", "hms_txn.upstream.socket.timeout": "30s",
            **extra}


def _wait(predicate, timeout=30.0, what="condition"):
    """Poll until ``predicate`` holds (a loaded machine may be slow). A change made directly
    upstream shows within this deadline only through the cache TTL (300 ms or 2 s where the
    tests wait for it; never with the 1 h TTL), so no tighter wall-clock bound is asserted."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _events(client, after=0):
    rsp = client.get_next_notification(t.NotificationEventRequest(lastEvent=after))
    return [(e.eventType, e.dbName, e.tableName) for e in rsp.events]


# =========================================================================== hms-txn upstream

@pytest.fixture
def pair(tmp_path):
    """(upstream hms-txn, extension-mode hms-txn in front of it)."""
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", _ext_conf(upstream.uri, **{"hms_txn.upstream.cache.ttl": "1h"}))
    yield upstream, ext
    ext.stop()
    upstream.stop()


def test_catalog_calls_are_forwarded_with_exceptions_unchanged(pair):
    upstream, ext = pair
    c, u = ext.client(), upstream.client()
    c.create_database(t.Database(name="fw"))
    assert u.get_all_databases() == ["default", "fw"]
    with pytest.raises(t.AlreadyExistsException) as ours:
        c.create_database(t.Database(name="fw"))
    with pytest.raises(t.AlreadyExistsException) as theirs:
        u.create_database(t.Database(name="fw"))
    assert ours.value.message == theirs.value.message
    with pytest.raises(t.NoSuchObjectException) as ours:
        c.get_table("fw", "nope")
    with pytest.raises(t.NoSuchObjectException) as theirs:
        u.get_table("fw", "nope")
    assert ours.value.message == theirs.value.message

    c.create_table(make_table("fw", "p", keys=(("dt", "string"),)))
    assert u.get_table("fw", "p").partitionKeys[0].name == "dt"
    c.add_partitions([t.Partition(values=[d], dbName="fw", tableName="p", sd=u.get_table("fw", "p").sd)
                      for d in ("1", "2")])
    assert u.get_partition_names("fw", "p", -1) == ["dt=1", "dt=2"]
    # translated request-style calls
    assert c.get_database_req(t.GetDatabaseRequest(name="fw")).name == "fw"
    got = c.get_partitions_by_names_req(t.GetPartitionsByNamesRequest(
        db_name="fw", tbl_name="p", names=["dt=2"]))
    assert [p.values for p in got.partitions] == [["2"]]
    assert [x.tableName for x in c.get_table_objects_by_name_req(
        t.GetTablesRequest(dbName="fw", tblNames=["p"], tablesPattern="p*")).tables] == ["p"]
    table = c.get_table("fw", "p")
    table.parameters["k"] = "v"
    c.alter_table_req(t.AlterTableRequest(dbName="fw", tableName="p", table=table))
    assert u.get_table("fw", "p").parameters["k"] == "v"
    assert c.get_table("fw", "p").parameters["k"] == "v"    # our cache saw our own change
    c.drop_partition("fw", "p", ["1"], True)
    assert u.get_partition_names("fw", "p", -1) == ["dt=2"]
    c.drop_table("fw", "p", True)
    with pytest.raises(t.NoSuchObjectException):
        u.get_table("fw", "p")
    # every change made through us is in OUR notification log
    assert _events(c) == [("CREATE_DATABASE", "fw", None), ("CREATE_TABLE", "fw", "p"),
                          ("ADD_PARTITION", "fw", "p"), ("ALTER_TABLE", "fw", "p"),
                          ("DROP_PARTITION", "fw", "p"), ("DROP_TABLE", "fw", "p")]
    # transactions are ours: the upstream's transaction system is untouched
    txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    assert u.get_open_txns().open_txns == []
    c.commit_txn(t.CommitTxnRequest(txnid=txn))


def test_write_ids_and_cache_on_upstream_table(pair):
    upstream, ext = pair
    c, u = ext.client(), upstream.client()
    c.create_table(make_table("default", "acid", params={"transactional": "true"}))
    full = "default.acid"
    txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    wid = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
        dbName="default", tableName="acid", txnIds=[txn])).txnToWriteIds[0].writeId
    assert wid == 1
    c.commit_txn(t.CommitTxnRequest(txnid=txn))
    snapshot = f"{full}:1:9223372036854775807::"
    first = c.get_table_req(table_request("default", "acid",
                                        validWriteIdList=snapshot))
    assert first.table.parameters["transactional"] == "true"
    _wait(lambda: c.get_table_req(table_request("default", "acid",
                                              validWriteIdList=snapshot))
          and ext.ms.counters()["hms_txn.cache.hits"] >= 1, what="a cache hit")
    # a change through us is seen at once by the next read of the new snapshot
    table = c.get_table_acid_aware("default", "acid")
    table.parameters["through"] = "us"
    c.alter_table("default", "acid", table)
    got = c.get_table_req(table_request("default", "acid",
                                      validWriteIdList=snapshot))
    assert got.table.parameters["through"] == "us"
    assert u.get_table_acid_aware("default", "acid").parameters["through"] == "us"


def _following_upstream_log(tmp_path):
    """An hms-txn upstream (it has a notification log) and an extension server in front of
    it that reads that log every 50 ms and keeps cached objects for an hour: whatever it
    sees of direct upstream changes, it saw through the log."""
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", _ext_conf(upstream.uri, **{
        "hms_txn.upstream.cache.ttl": "1h", "hms_txn.upstream.events.enabled": "true",
        "hms_txn.upstream.events.interval": "50ms"}))
    return upstream, ext


def test_upstream_event_log_evicts_changes_made_directly_upstream(tmp_path):
    upstream, ext = _following_upstream_log(tmp_path)
    try:
        c, u = ext.client(), upstream.client()
        u.create_table(make_table("default", "direct"))
        assert "x" not in (c.get_table("default", "direct").parameters or {})
        c.get_table("default", "direct")   # now cached (TTL 1 h)
        table = u.get_table("default", "direct")
        table.parameters["x"] = "1"
        u.alter_table("default", "direct", table)      # directly on the upstream
        _wait(lambda: (c.get_table("default", "direct").parameters or {}).get("x") == "1",
              what="the upstream's ALTER_TABLE to reach our cache")
        assert ext.ms.counters()["hms_txn.cache.upstream_evictions"] >= 1
    finally:
        ext.stop()
        upstream.stop()


def test_without_upstream_events_changes_are_seen_within_the_ttl(tmp_path):
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", _ext_conf(upstream.uri, **{"hms_txn.upstream.cache.ttl": "300ms"}))
    try:
        c, u = ext.client(), upstream.client()
        u.create_table(make_table("default", "ttl"))
        c.get_table("default", "ttl")
        table = u.get_table("default", "ttl")
        table.parameters["y"] = "2"
        u.alter_table("default", "ttl", table)
        _wait(lambda: (c.get_table("default", "ttl").parameters or {}).get("y") == "2",
              what="the TTL to expire")
    finally:
        ext.stop()
        upstream.stop()


_POLLER_METHODS = ("get_current_notificationEventId", "get_next_notification")


def _caught_up(ext, upstream_client) -> None:
    """Wait until the extension server has read the upstream's notification log to its end."""
    head = upstream_client.get_current_notificationEventId().eventId
    _wait(lambda: (ext.ms.cache.upstream_pos or 0) >= head,
          what=f"the upstream event poller to reach event {head}")
    # ... and our own log: the events we logged for forwarded changes evict table names when
    # the local tailer applies them (ExtensionCache.applied), as another process's would.
    ours = ext.ms.units.read(notifications.current_event_id)
    _wait(lambda: ext.ms.cache.pos >= ours, what=f"the local tailer to reach event {ours}")


def _catalog_calls(pool) -> int:
    """Upstream calls made for clients, leaving out the upstream event poller's."""
    return sum(n for m, n in pool.calls_by_method.items() if m not in _POLLER_METHODS)


def test_database_reads_are_cached_and_kept_current(tmp_path):
    """get_database / get_all_databases / get_databases and get_tables / get_all_tables come
    from a read-through cache:
    repeated reads do not reach the upstream, changes through us are seen at once, and
    changes made directly upstream within the upstream's event log delay."""
    upstream, ext = _following_upstream_log(tmp_path)
    try:
        c, u = ext.client(), upstream.client()
        pool = ext.ms.upstream
        assert c.get_database("default").name == "default"
        assert c.get_all_databases() == ["default"]
        before = _catalog_calls(pool)
        for _ in range(5):
            assert c.get_database("default").name == "default"
            assert c.get_database_req(t.GetDatabaseRequest(name="default")).name == "default"
            assert c.get_all_databases() == ["default"]
            assert c.get_databases("def*") == ["default"]
        assert _catalog_calls(pool) == before              # all from the cache
        # a missing database: the upstream's own exception, never cached
        with pytest.raises(t.NoSuchObjectException) as ours:
            c.get_database("nope")
        with pytest.raises(t.NoSuchObjectException) as theirs:
            u.get_database("nope")
        assert ours.value.message == theirs.value.message
        # changes through us are visible at once
        c.create_database(t.Database(name="mine", description="one"))
        assert c.get_all_databases() == ["default", "mine"]
        assert c.get_databases("m*|x") == ["mine"]
        db = c.get_database("mine")
        db.description = "two"
        c.alter_database("mine", db)
        assert c.get_database("mine").description == "two"
        c.drop_database("mine", True, False)
        assert c.get_all_databases() == ["default"]
        with pytest.raises(t.NoSuchObjectException):
            c.get_database("mine")
        # changes made directly on the upstream arrive through its notification log
        u.create_database(t.Database(name="direct", description="a"))
        _wait(lambda: c.get_all_databases() == ["default", "direct"],
              what="the upstream's CREATE_DATABASE")
        db = u.get_database("direct")
        db.description = "b"
        u.alter_database("direct", db)
        _wait(lambda: c.get_database("direct").description == "b",
              what="the upstream's ALTER_DATABASE")

        # table names: the same cache, kept current the same ways
        c.create_table(make_table("default", "t1"))
        # the upstream logged that create too: once our poller has read it (and evicted the
        # names it had), the names come from the cache
        _caught_up(ext, u)
        assert c.get_all_tables("default") == ["t1"]
        before = _catalog_calls(pool)
        for _ in range(3):
            assert c.get_tables("default", "t*") == ["t1"]
            assert c.get_tables("default", "x*") == []
            assert c.get_all_tables("default") == ["t1"]
        assert _catalog_calls(pool) == before
        table = c.get_table("default", "t1")
        table.tableName = "t2"
        c.alter_table("default", "t1", table)                 # a rename through us
        assert c.get_all_tables("default") == ["t2"]
        c.drop_table("default", "t2", True)
        assert c.get_tables("default", "*") == []
        u.create_table(make_table("default", "up"))           # directly upstream
        _wait(lambda: c.get_all_tables("default") == ["up"], what="the upstream's CREATE_TABLE")
    finally:
        ext.stop()
        upstream.stop()


def test_columns_come_from_the_cached_table_when_the_serde_keeps_them(pair):
    upstream, ext = pair
    c, u = ext.client(), upstream.client()
    c.create_table(make_table("default", "orc", keys=(("dt", "string"),)))
    avro = make_table("default", "avro")
    avro.sd.serdeInfo.serializationLib = "org.apache.hadoop.hive.serde2.avro.AvroSerDe"
    c.create_table(avro)
    expected_fields = u.get_fields("default", "orc")
    expected_schema = u.get_schema("default", "orc")
    assert [f.name for f in expected_schema][-1] == "dt"
    c.get_table("default", "orc")                          # cached from here on
    before = _catalog_calls(ext.ms.upstream)
    for _ in range(3):
        assert c.get_fields("default", "orc") == expected_fields
        assert c.get_schema("default", "orc") == expected_schema
        assert c.get_fields_req(t.GetFieldsRequest(dbName="default", tblName="orc")).fields == \
            expected_fields
        assert c.get_schema_req(t.GetSchemaRequest(dbName="default", tblName="orc")).fields == \
            expected_schema
    assert _catalog_calls(ext.ms.upstream) == before
    # a serde that derives columns from the data: the upstream answers
    assert c.get_fields("default", "avro") == u.get_fields("default", "avro")
    assert _catalog_calls(ext.ms.upstream) > before
    errors = []
    for client in (c, u):
        try:
            client.get_fields("default", "missing")
        except TException as err:
            errors.append((type(err), getattr(err, "message", None)))
    assert len(errors) == 2 and errors[0][0] is errors[1][0]   # the same declared exception


def test_database_reads_expire_with_the_ttl_and_follow_other_processes(tmp_path):
    upstream = _server(tmp_path, "upstream", {})
    shared_db = f"jdbc:sqlite:{tmp_path}/ext-shared.sqlite"
    conf = _ext_conf(upstream.uri, **{"hms_txn.upstream.cache.ttl": "300ms",
                                      "javax.jdo.option.ConnectionURL": shared_db})
    one = InProcessServer(os.path.join(str(tmp_path), "one"), {
        **conf, "hive.metastore.warehouse.dir": os.path.join(str(tmp_path), "wh")})
    two = InProcessServer(os.path.join(str(tmp_path), "two"), {
        **conf, "hms_txn.upstream.cache.ttl": "1h",
        "hive.metastore.warehouse.dir": os.path.join(str(tmp_path), "wh")})
    try:
        a, b, u = one.client(), two.client(), upstream.client()
        assert a.get_all_databases() == b.get_all_databases() == ["default"]
        u.create_database(t.Database(name="late"))          # directly upstream, no events
        _wait(lambda: "late" in a.get_all_databases(), what="the TTL to expire")
        # through process one: process two (TTL 1 h) sees it from our shared notification log
        a.create_database(t.Database(name="shared"))
        _wait(lambda: "shared" in b.get_all_databases(), what="our CREATE_DATABASE event")
    finally:
        one.stop()
        two.stop()
        upstream.stop()


def test_partition_reads_are_cached_and_follow_the_upstream_event_log(tmp_path):
    """Partition reads of a non-transactional upstream table come from the table's cache
    entry; a change through us is seen at once, one made directly upstream when the
    upstream's ADD/ALTER/DROP_PARTITION event is polled (TTL 1 h: only the log can do it)."""
    upstream, ext = _following_upstream_log(tmp_path)
    try:
        c, u = ext.client(), upstream.client()
        c.create_table(make_table("default", "pt", keys=(("dt", "string"),)))
        sd = u.get_table("default", "pt").sd
        c.add_partitions([t.Partition(values=[d], dbName="default", tableName="pt", sd=sd)
                          for d in ("1", "2", "3")])
        # the upstream logged our changes too; once its log is read they evict no more
        _caught_up(ext, u)
        assert c.get_partition_names("default", "pt", -1) == u.get_partition_names("default", "pt", -1)
        # (the cache's counters tell what was answered from it)
        before = ext.ms.counters()
        for _ in range(3):
            assert c.get_partition_names("default", "pt", 2) == ["dt=1", "dt=2"]
            assert c.get_partitions("default", "pt", -1) == u.get_partitions("default", "pt", -1)
            assert c.get_partition("default", "pt", ["2"]) == u.get_partition("default", "pt", ["2"])
        after = ext.ms.counters()
        assert after["hms_txn.cache.partition_listing_hits"] - \
            before["hms_txn.cache.partition_listing_hits"] == 9           # all from the cache
        assert after["hms_txn.cache.partition_listing_fills"] == \
            before["hms_txn.cache.partition_listing_fills"]
        assert after["hms_txn.cache.misses"] == before["hms_txn.cache.misses"]
        # through us: at once
        c.drop_partition("default", "pt", ["1"], True)
        assert c.get_partition_names("default", "pt", -1) == ["dt=2", "dt=3"]
        # directly upstream: when its event log is read
        u.add_partitions([t.Partition(values=["4"], dbName="default", tableName="pt", sd=sd)])
        _wait(lambda: c.get_partition_names("default", "pt", -1) == ["dt=2", "dt=3", "dt=4"],
              what="the upstream's ADD_PARTITION")
        part = u.get_partition("default", "pt", ["3"])
        part.parameters["x"] = "y"
        u.alter_partition("default", "pt", part)
        _wait(lambda: (c.get_partition("default", "pt", ["3"]).parameters or {}).get("x") == "y",
              what="the upstream's ALTER_PARTITION")
        u.drop_partition("default", "pt", ["2"], True)
        _wait(lambda: c.get_partition_names("default", "pt", -1) == ["dt=3", "dt=4"],
              what="the upstream's DROP_PARTITION")
        assert c.get_partitions("default", "pt", -1) == u.get_partitions("default", "pt", -1)
        counters = ext.ms.counters()
        assert counters["hms_txn.cache.partition_listing_hits"] > 0
        assert counters["hms_txn.cache.upstream_evictions"] >= 3
        # a transactional table's partition reads carry no snapshot: forwarded
        c.create_table(make_table("default", "acid", keys=(("dt", "string"),),
                                  params={"transactional": "true"}))
        _caught_up(ext, u)    # the upstream's CREATE_TABLE would evict the entry below
        c.get_partition_names("default", "acid", -1)
        before = ext.ms.counters()
        assert c.get_partition_names("default", "acid", -1) == []
        after = ext.ms.counters()
        for name in ("misses", "partition_listing_fills", "partition_listing_hits"):
            assert after[f"hms_txn.cache.{name}"] == before[f"hms_txn.cache.{name}"], name
    finally:
        ext.stop()
        upstream.stop()


def test_ps_memo_is_not_installed_after_a_concurrent_invalidation(pair):
    """The memo of a multi-match _ps read (``ExtensionCache.select``) goes onto the entry
    its read started from only if that entry is still installed: an invalidation during
    the upstream read (here: the upstream's log reporting the table) keeps it out. An
    exception is passed on and never kept."""
    upstream, ext = pair
    c, u = ext.client(), upstream.client()
    c.create_table(make_table("default", "memo_race", keys=(("dt", "string"),)))
    sd = u.get_table("default", "memo_race").sd
    c.add_partitions([t.Partition(values=[d], dbName="default", tableName="memo_race", sd=sd)
                      for d in ("b", "a", "c")])
    cache, key = ext.ms.cache, ("default", "memo_race")

    def select(memo_key, fetch):
        return cache.select("default", "memo_race", limit=-1, partial_values=[""],
                            memo=(memo_key, fetch))

    def invalidating_fetch():
        cache.invalidate("default", "memo_race")
        return ["raced"]

    assert select(("k",), invalidating_fetch).value == ["raced"]
    entry = cache._entries.get(key)
    assert entry is None or not entry.memos
    assert select(("k",), lambda: ["kept"]).value == ["kept"]
    assert select(("k",), lambda: pytest.fail("asked the upstream again")).value == ["kept"]

    def failing_fetch():
        raise RuntimeError("upstream down")

    with pytest.raises(RuntimeError):
        select(("e",), failing_fetch)
    assert ("e",) not in cache._entries[key].memos and ("k",) in cache._entries[key].memos
    # a change through us drops the entry and its memos
    c.drop_partition("default", "memo_race", ["c"], True)
    assert select(("k",), lambda: ["after"]).value == ["after"]
    c.drop_table("default", "memo_race", True)


def test_partition_reads_of_tables_over_the_limit_are_forwarded(tmp_path):
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", _ext_conf(upstream.uri, **{
        "hms_txn.upstream.cache.ttl": "1h", "hms_txn.upstream.cache.max.partitions": "2"}))
    try:
        c, u = ext.client(), upstream.client()
        for name, n in (("small", 2), ("big", 3)):
            c.create_table(make_table("default", name, keys=(("dt", "string"),)))
            sd = u.get_table("default", name).sd
            c.add_partitions([t.Partition(values=[str(d)], dbName="default", tableName=name, sd=sd)
                              for d in range(n)])
        for _ in range(2):
            assert c.get_partition_names("default", "small", -1) == ["dt=0", "dt=1"]
            assert c.get_partition_names("default", "big", -1) == ["dt=0", "dt=1", "dt=2"]
        counters = ext.ms.counters()
        assert counters["hms_txn.cache.partition_listing_fills"] == 1       # small only
        assert counters["hms_txn.cache.partition_listing_hits"] == 1
        assert counters["hms_txn.cache.partition_listing_too_large"] == 1   # asked once
        before = _catalog_calls(ext.ms.upstream)
        assert c.get_partitions("default", "big", 2) == u.get_partitions("default", "big", 2)
        assert _catalog_calls(ext.ms.upstream) == before + 1     # forwarded
    finally:
        ext.stop()
        upstream.stop()


def test_sasl_to_upstream_and_failover(tmp_path):
    upstream = _server(tmp_path, "upstream", {
        "hive.metastore.sasl.enabled": "true", "hive.metastore.authentication": "CONFIG",
        "hive.metastore.authentication.config.username": "hms",
        "hive.metastore.authentication.config.password": "pw"})
    dead = f"thrift://127.0.0.1:{free_port()}"
    ext = _server(tmp_path, "ext", _ext_conf(f"{dead},{upstream.uri}", **{
        "hms_txn.upstream.sasl.enabled": "true", "hms_txn.upstream.sasl.user": "hms",
        "hms_txn.upstream.sasl.password": "pw"}))
    bad = _server(tmp_path, "bad", _ext_conf(upstream.uri, **{
        "hms_txn.upstream.sasl.enabled": "true", "hms_txn.upstream.sasl.user": "hms",
        "hms_txn.upstream.sasl.password": "wrong"}))
    try:
        c = ext.client()
        c.create_database(t.Database(name="viasasl"))   # first URI refuses: failover
        assert "viasasl" in c.get_all_databases()
        with pytest.raises(t.MetaException, match="upstream metastore .* unreachable"):
            bad.client().get_all_databases()
    finally:
        for s in (bad, ext, upstream):
            s.stop()


def test_unreachable_upstream_is_a_clear_meta_exception(tmp_path):
    port = free_port()
    ext = _server(tmp_path, "ext", _ext_conf(f"thrift://127.0.0.1:{port}"))
    try:
        c = ext.client()
        with pytest.raises(t.MetaException,
                           match=rf"upstream metastore thrift://127.0.0.1:{port} unreachable"):
            c.get_all_databases()
        with pytest.raises(t.MetaException, match="unreachable"):
            c.get_table("default", "x")
        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
        c.commit_txn(t.CommitTxnRequest(txnid=txn))
        assert c.getStatus() == 2  # fb303 ALIVE: ours
        assert ext.ms.health()["upstream"]["status"] == "unavailable"
    finally:
        ext.stop()


# =========================================================================== Java metastore 2.3

@pytest.fixture(scope="module")
def java_upstream(tmp_path_factory):
    """The Java metastore 2.3 (one for the module; ``restart()`` keeps its Derby database
    and port) and one extension-mode hms-txn in front of it."""
    from hms_bench.javahms import start_java_metastore
    root = tmp_path_factory.mktemp("ext-java")
    port = free_port()
    workdir = str(root / "hms")
    state = {"java": start_java_metastore(port, workdir)}
    ext = _server(root, "ext", _ext_conf(f"thrift://127.0.0.1:{port}",
                                         **{"hms_txn.upstream.cache.ttl": "2s"}))

    class Env:
        root_dir = str(root)
        server = ext

        @property
        def java(self):
            return state["java"]

        def stop_upstream(self):
            state["java"].stop()

        def start_upstream(self):
            state["java"] = start_java_metastore(port, workdir)

    yield Env()
    ext.stop()
    state["java"].stop()


def _engine_snapshot(c, full):
    from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList
    r = c.get_open_txns()
    vt = ValidTxnList(r.txn_high_water_mark, open_ids=list(r.open_txns))
    tw = c.get_valid_write_ids(t.GetValidWriteIdsRequest(
        fullTableNames=[full], validTxnList=str(vt))).tblValidWriteIds[0]
    wl = ValidWriteIdList(tw.fullTableName, tw.writeIdHighWaterMark,
                          open_ids=list(tw.invalidWriteIds), min_open=tw.minOpenWriteId)
    return vt, wl


@pytest.mark.javahms
def test_acid_writes_and_reads_on_a_table_in_the_java_metastore(java_upstream):
    import orc_acid
    from tests.hms_txn.test_catalog import local
    env = java_upstream
    c = env.server.client()
    direct = connect(env.java.port)
    c.create_database(t.Database(name="acid_ext", locationUri=f"file:{env.root_dir}/acid_ext.db"))
    table = make_table("acid_ext", "orders", params={"transactional": "true"})
    table.sd.bucketCols, table.sd.numBuckets = ["id"], 1   # Hive 2.3: ACID tables are bucketed
    c.create_table(table)
    there = direct.get_table("acid_ext", "orders")            # it lives in the upstream
    assert there.parameters["transactional"] == "true"
    location = local(c.get_table_acid_aware("acid_ext", "orders").sd.location)

    def write(ids):
        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="eng", hostname="h")).txn_ids[0]
        wid = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="acid_ext", tableName="orders", txnIds=[txn])).txnToWriteIds[0].writeId
        lock = c.lock(t.LockRequest(component=[t.LockComponent(
            type=SHARED_WRITE, level=TABLE_LEVEL, dbname="acid_ext", tablename="orders",
            operationType=OP_INSERT, isTransactional=True)], txnid=txn, user="eng", hostname="h"))
        assert lock.state == 1     # ACQUIRED
        shown = c.show_locks(t.ShowLocksRequest(dbname="acid_ext", tablename="orders")).locks
        assert [(x.lockid, x.txnid) for x in shown] == [(lock.lockid, txn)]
        orc_acid.write_delta(location, wid, 0, 0, pa.table(
            {"id": pa.array(ids, pa.int32()), "name": [f"n{i}" for i in ids]}, schema=SCHEMA))
        return txn, wid

    txn1, w1 = write([1, 2, 3])
    vt, wl = _engine_snapshot(c, "acid_ext.orders")
    assert sorted(orc_acid.read_table(location, wl, valid_txns=vt).column("id").to_pylist()) == []
    c.commit_txn(t.CommitTxnRequest(txnid=txn1, writeEventInfos=[t.WriteEventInfo(
        writeId=w1, database="acid_ext", table="orders", files="")]))
    txn2, w2 = write([4, 5])
    assert (w1, w2) == (1, 2)
    vt, wl = _engine_snapshot(c, "acid_ext.orders")
    assert sorted(orc_acid.read_table(location, wl, valid_txns=vt).column("id").to_pylist()) == [1, 2, 3]
    c.commit_txn(t.CommitTxnRequest(txnid=txn2))
    vt, wl = _engine_snapshot(c, "acid_ext.orders")
    assert sorted(orc_acid.read_table(location, wl, valid_txns=vt).column("id").to_pylist()) == [1, 2, 3, 4, 5]
    assert c.show_locks(t.ShowLocksRequest(dbname="acid_ext", tablename="orders")).locks == []
    # get_table_req with the reader's ValidWriteIdList: served by our cache, source upstream
    req = table_request("acid_ext", "orders", validWriteIdList=str(wl))
    assert c.get_table_req(req).table.parameters["transactional"] == "true"
    hits = env.server.ms.counters()["hms_txn.cache.hits"]
    _wait(lambda: c.get_table_req(req) and env.server.ms.counters()["hms_txn.cache.hits"] > hits,
          what="a cache hit for the reader's snapshot")
    assert c.get_max_allocated_table_write_id(t.MaxAllocatedTableWriteIdRequest(
        dbName="acid_ext", tableName="orders")).maxWriteId == 2
    # the Java metastore's own transaction system was not used
    assert direct.get_open_txns_info().open_txns == []
    types = [e[0] for e in _events(c) if e[2] == "orders"]
    assert "CREATE_TABLE" in types and "ALLOC_WRITE_ID_EVENT" in types
    c.drop_database("acid_ext", True, True)      # forwarded, cascades upstream
    assert "acid_ext" not in direct.get_all_databases()
    direct.close()


def _answer(call):
    """A call's result, or its exception's type and message (to compare two servers)."""
    try:
        return call()
    except TException as err:
        return type(err), getattr(err, "message", None)


def _same(ours, direct, method, *args):
    got = _answer(lambda: getattr(ours, method)(*args))
    want = _answer(lambda: getattr(direct, method)(*args))
    assert got == want, (method, args, got, want)
    return got


@pytest.mark.javahms
def test_name_patterns_match_the_java_metastore(java_upstream):
    """get_databases / get_tables / get_tables_by_type / get_functions patterns, answered
    by us from cached names, equal the Java metastore's answers: "*" and ".*" any run,
    "." any one character, "|" alternatives (not trimmed), everything else literal."""
    env = java_upstream
    c, direct = env.server.client(), connect(env.java.port)
    try:
        c.create_database(t.Database(name="pat_ext", locationUri=f"file:{env.root_dir}/pat_ext.db"))
        for name in ("t_1", "tx1", "t1", "abc", "a_bc", "t11", "xt1"):
            c.create_table(make_table("pat_ext", name))
            c.create_function(_function("pat_ext", "f" + name))
        patterns = ("t.1", "t_1", "t*1", "t.*", ".*1", "T1", "t1|abc", " t1 | abc ", "t1 |abc",
                    "t?1", "t+1", "t[x_]1", "[", "a.c", "(t1)", "t1$", "^t1", "t\\d", "a_c",
                    "%1", "t%", "*", "", " ", "..", "...", "t.1|a.c")
        calls = [(m, a) for pattern in patterns for m, a in (
            ("get_tables", ("pat_ext", pattern)),
            ("get_tables_by_type", ("pat_ext", pattern, "MANAGED_TABLE")),
            ("get_functions", ("pat_ext", "f" + pattern if pattern.strip() else pattern)),
            ("get_databases", (pattern.replace("t", "p", 1),)))]
        differ = [(m, a, got, want) for m, a in calls
                  for got, want in [(_answer(lambda: getattr(c, m)(*a)),
                                     _answer(lambda: getattr(direct, m)(*a)))]
                  if got != want]
        assert not differ, differ
        assert c.get_tables("pat_ext", "t.1") == ["t11", "t_1", "tx1"]
        assert c.get_databases("pat.ext") == ["pat_ext"]
    finally:
        c.drop_database("pat_ext", True, True)
        direct.close()


def _function(db, name, cls="com.example.Udf"):
    return t.Function(functionName=name, dbName=db, className=cls, ownerName="tester",
                      ownerType=t.PrincipalType.USER, createTime=int(time.time()),
                      functionType=t.FunctionType.JAVA,
                      resourceUris=[t.ResourceUri(resourceType=t.ResourceType.JAR,
                                                  uri="file:///tmp/udfs.jar")])


@pytest.mark.javahms
def test_functions_come_from_the_cache_and_match_the_java_metastore(java_upstream):
    env = java_upstream
    c, direct = env.server.client(), connect(env.java.port)
    pool = env.server.ms.upstream
    try:
        c.create_database(t.Database(name="fn_ext", locationUri=f"file:{env.root_dir}/fn_ext.db"))
        # (Hive 2.3 keeps a function name's case but looks names up lower-cased, so it
        # cannot get or drop a mixed-case one: the names here are lower-case)
        for name in ("upper_a", "mixed_c", "lower_b"):
            c.create_function(_function("fn_ext", name))
        direct.create_function(_function("default", "in_default"))
        patterns = ("*", "u*", "U*|l*", "*_c", "m*|*b", "nomatch", "", " ", None)
        dbs = ("fn_ext", "FN_EXT", "default", "missing_db")

        def compare():
            for db in dbs:
                for pattern in patterns:
                    _same(c, direct, "get_functions", db, pattern)
            for db, name in (("fn_ext", "upper_a"), ("fn_ext", "Mixed_C"), ("FN_EXT", "lower_b"),
                             ("default", "in_default"), ("fn_ext", "nope"), ("nodb", "upper_a")):
                _same(c, direct, "get_function", db, name)
            _same(c, direct, "get_all_functions")

        compare()
        env.server.ms.cache.functions.invalidate()   # a fresh snapshot for the 2 s TTL below
        assert c.get_functions("fn_ext", "*") == ["lower_b", "mixed_c", "upper_a"]
        before = _catalog_calls(pool)
        for _ in range(3):
            c.get_functions("fn_ext", "u*|m*")
            c.get_function("fn_ext", "upper_a")
            c.get_all_functions()
        assert _catalog_calls(pool) == before            # all from the cache
        # changes through us are visible at once
        c.drop_function("fn_ext", "lower_b")
        assert c.get_functions("fn_ext", "*") == ["mixed_c", "upper_a"]
        c.alter_function("fn_ext", "upper_a", _function("fn_ext", "upper_a", cls="com.example.Other"))
        assert c.get_function("fn_ext", "upper_a").className == "com.example.Other"
        c.create_function(_function("fn_ext", "new_one"))
        assert c.get_functions("fn_ext", "n*") == ["new_one"]
        compare()
        # ... and in our notification log (Hive's EventType has no ALTER_FUNCTION: an altered
        # function is seen by other processes within the function cache's time to live)
        types = [e[0] for e in _events(c) if e[1] == "fn_ext"]
        assert types.count("CREATE_FUNCTION") == 4 and "DROP_FUNCTION" in types \
            and "ALTER_FUNCTION" not in types
        # directly upstream (no notification log there): within the TTL (2 s)
        c.get_functions("fn_ext", "*")
        direct.create_function(_function("fn_ext", "direct_fn"))
        _wait(lambda: "direct_fn" in c.get_functions("fn_ext", "*"),
              what="the TTL to expire")
        direct.drop_function("fn_ext", "direct_fn")
        _wait(lambda: "direct_fn" not in c.get_functions("fn_ext", "*"),
              what="the TTL to expire")
        compare()
    finally:
        for db, name in (("default", "in_default"),):
            try:
                direct.drop_function(db, name)
            except TException:
                pass
        c.drop_database("fn_ext", True, True)
        direct.close()


@pytest.mark.javahms
def test_partition_reads_come_from_the_cache_and_match_the_java_metastore(java_upstream):
    env = java_upstream
    c, direct = env.server.client(), connect(env.java.port)
    pool = env.server.ms.upstream
    db, name = "pt_ext", "events"
    try:
        c.create_database(t.Database(name=db, locationUri=f"file:{env.root_dir}/{db}.db"))
        c.create_table(make_table(db, name, keys=(("dt", "string"), ("hr", "int"))))
        sd = direct.get_table(db, name).sd
        days = ("2024-01-01", "2024-01-02", "a b", "x/y", "a_b", "axb", "v1.2", "v1x2", "Ünï")
        c.add_partitions([t.Partition(values=[d, h], dbName=db, tableName=name, sd=sd,
                                      parameters={"n": f"{d}{h}"})
                          for d in days for h in ("1", "10", "2")])
        all_names = direct.get_partition_names(db, name, -1)
        assert len(all_names) == 27
        specs = ([], [""], ["2024-01-02"], ["", "10"], ["a_b"], ["v1.2"], ["x/y", "2"],
                 ["a b", ""], ["nope"], ["2024-01-01", "1", "extra"], ["a_b", "1"],
                 ["v1x2", "10"], ["Ünï", "2"], ["", "2"])
        filters = ('dt = "2024-01-01"', "hr > 1", "dt >= '2024' and hr = 10",
                   "hr = 2 or dt = 'axb'", "(hr < 10) and dt <> 'a b'", "not (hr < 10)",
                   "dt like 'a%'", "hr = '2'",
                   "nokey = 1", "dt = ", "")
        by_names = [all_names[3], all_names[0], "dt=missing/hr=1", all_names[3],
                    "DT=2024-01-01/hr=1", all_names[-1]]

        def compare():
            for max_parts in (-1, 0, 1, 5):
                _same(c, direct, "get_partition_names", db, name, max_parts)
                _same(c, direct, "get_partitions", db, name, max_parts)
                _same(c, direct, "get_partitions_with_auth", db, name, max_parts, "u", ["g"])
            for spec in specs:
                for max_parts in (-1, 2):
                    _same(c, direct, "get_partition_names_ps", db, name, spec, max_parts)
                    _same(c, direct, "get_partitions_ps", db, name, spec, max_parts)
                    _same(c, direct, "get_partitions_ps_with_auth", db, name, spec, max_parts,
                          "u", ["g"])
            for text in filters:
                for max_parts in (-1, 3):
                    _same(c, direct, "get_partitions_by_filter", db, name, text, max_parts)
                _same(c, direct, "get_num_partitions_by_filter", db, name, text)
            _same(c, direct, "get_partitions_by_names", db, name, by_names)
            _same(c, direct, "get_partitions_by_names", db, name, [])
            for values in (["2024-01-01", "1"], ["x/y", "10"], ["Ünï", "2"], ["2024-01-01"],
                           ["missing", "1"]):
                _same(c, direct, "get_partition", db, name, values)
            for pname in (all_names[5], "dt=x%2Fy/hr=10", "DT=2024-01-01/HR=1", "dt=missing/hr=1"):
                _same(c, direct, "get_partition_by_name", db, name, pname)
            _same(c, direct, "get_partition_names", db, "no_such_table", -1)
            _same(c, direct, "get_partitions", db, "no_such_table", -1)

        compare()
        # A fresh entry for the loop below (compare() may have taken most of the 2 s TTL,
        # and a re-read after the TTL would be an upstream call).
        env.server.ms.cache.invalidate(db, name)
        # several matches: the upstream's answer (Hive lists those in row order), memoized
        multi = [c.get_partitions_ps(db, name, ["", "10"], 2),
                 c.get_partition_names_ps(db, name, ["2024-01-02"], -1)]
        before = _catalog_calls(pool)
        for _ in range(3):
            c.get_partition_names(db, name, -1)
            c.get_partitions(db, name, 5)
            c.get_partitions_ps_with_auth(db, name, ["2024-01-01", "10"], -1, "u", ["g"])
            c.get_partition_names_ps(db, name, ["a_b", "1"], -1)
            assert [c.get_partitions_ps(db, name, ["", "10"], 2),
                    c.get_partition_names_ps(db, name, ["2024-01-02"], -1)] == multi
            c.get_partitions_by_names(db, name, all_names[:3])
            c.get_partitions_by_filter(db, name, "hr = 2 or dt = 'axb'", -1)
            c.get_partition(db, name, ["2024-01-01", "1"])
        assert _catalog_calls(pool) == before            # all from the cache
        # changes through us are visible at once
        c.add_partition(t.Partition(values=["2025-01-01", "3"], dbName=db, tableName=name, sd=sd))
        assert "dt=2025-01-01/hr=3" in c.get_partition_names(db, name, -1)
        part = c.get_partition(db, name, ["2024-01-01", "1"])
        part.parameters["changed"] = "yes"
        c.alter_partition(db, name, part)
        assert c.get_partition(db, name, ["2024-01-01", "1"]).parameters["changed"] == "yes"
        c.drop_partition(db, name, ["axb", "1"], True)
        assert "dt=axb/hr=1" not in c.get_partition_names(db, name, -1)
        renamed = c.get_partition(db, name, ["axb", "2"])
        renamed.values = ["axb", "20"]
        c.rename_partition(db, name, ["axb", "2"], renamed)
        assert c.get_partition_names_ps(db, name, ["axb"], -1) == ["dt=axb/hr=10", "dt=axb/hr=20"]
        compare()
        # directly upstream (no notification log there): within the TTL (2 s)
        c.get_partition_names(db, name, -1)
        direct.add_partitions([t.Partition(values=["2026-01-01", "1"], dbName=db, tableName=name,
                                           sd=sd)])
        _wait(lambda: "dt=2026-01-01/hr=1" in c.get_partition_names(db, name, -1),
              what="the TTL to expire")
        part = direct.get_partition(db, name, ["2024-01-02", "1"])
        part.parameters["direct"] = "yes"
        direct.alter_partition(db, name, part)
        _wait(lambda: (c.get_partitions_ps(db, name, ["2024-01-02", "1"], -1)[0].parameters
                       or {}).get("direct") == "yes", timeout=10, what="the TTL to expire")
        compare()
    finally:
        c.drop_database(db, True, True)
        direct.close()


@pytest.mark.javahms
def test_multi_match_ps_reads_are_memoized_answers_of_the_java_metastore(java_upstream):
    """A _ps read matching several partitions is answered by the upstream (Hive 2.3 lists
    those in its database's row order); its answer is memoized on the table's cache entry
    per method, partial values, max_parts (and user and groups for _with_auth), so the
    same read again makes no upstream call, and it goes with the entry: changes through
    us at once, changes made directly upstream within the TTL (2 s). Errors are not kept."""
    from hms_txn.domain.extension.upstream_catalog import MAX_MEMOS
    env = java_upstream
    c, direct = env.server.client(), connect(env.java.port)
    cache, pool = env.server.ms.cache, env.server.ms.upstream
    db, name = "ps_memo", "events"

    def fills():
        return env.server.ms.counters()["hms_txn.cache.partition_memo_fills"]

    try:
        c.create_database(t.Database(name=db, locationUri=f"file:{env.root_dir}/{db}.db"))
        c.create_table(make_table(db, name, keys=(("dt", "string"), ("hr", "int"))))
        sd = direct.get_table(db, name).sd
        # created out of name order: Hive's answers below follow creation order
        for values in (("b", "2"), ("a", "10"), ("b", "1"), ("a", "1"), ("b", "10"), ("a", "2"),
                       ("c", "1")):
            c.add_partition(t.Partition(values=list(values), dbName=db, tableName=name, sd=sd))
        reads = [("get_partition_names_ps", [""], -1), ("get_partition_names_ps", ["a"], -1),
                 ("get_partition_names_ps", ["a"], 2), ("get_partition_names_ps", ["", "1"], -1),
                 ("get_partitions_ps", [""], -1), ("get_partitions_ps", ["b"], -1),
                 ("get_partitions_ps", ["b"], 1), ("get_partitions_ps", ["", "1"], 5),
                 ("get_partitions_ps_with_auth", ["a"], -1, "u", ["g"]),
                 ("get_partitions_ps_with_auth", ["a"], -1, "v", ["g"]),
                 ("get_partitions_ps_with_auth", ["a"], -1, "u", ["g", "h"])]

        def run(client):
            return [getattr(client, m)(db, name, *rest) for m, *rest in reads]

        want = run(direct)
        # the reads are order-sensitive: Hive 2.3's order is not the names' order
        assert want[0] != sorted(want[0]) and want[1] != sorted(want[1])
        c.get_partition_names(db, name, -1)      # the entry and its partition listing
        before, filled = _catalog_calls(pool), fills()
        first = run(c)
        assert _catalog_calls(pool) == before + len(reads)    # each asked upstream once
        assert fills() == filled + len(reads)                 # ... and kept separately
        again = run(c)
        assert _catalog_calls(pool) == before + len(reads)    # the same reads: memoized
        # the _req forms share the memos of their plain forms
        assert c.get_partition_names_ps_req(t.GetPartitionNamesPsRequest(
            dbName=db, tblName=name, partValues=["a"], maxParts=2)).names == want[2]
        assert c.get_partitions_ps_with_auth_req(t.GetPartitionsPsWithAuthRequest(
            dbName=db, tblName=name, partVals=["a"], maxParts=-1, userName="u",
            groupNames=["g"])).partitions == want[8]
        assert _catalog_calls(pool) == before + len(reads)
        assert first == want and again == want                # order included
        assert len(want[2]) == 2 and len(want[6]) == 1        # max_parts: separate memos

        # changes through us: the entry and its memos are dropped at once
        c.add_partition(t.Partition(values=["a", "5"], dbName=db, tableName=name, sd=sd))
        assert c.get_partition_names_ps(db, name, ["a"], -1) == \
            direct.get_partition_names_ps(db, name, ["a"], -1)
        assert "dt=a/hr=5" in c.get_partition_names_ps(db, name, ["a"], -1)
        c.drop_partition(db, name, ["b", "1"], True)
        for m, *rest in reads:
            _same(c, direct, m, db, name, *rest)
        assert "dt=b/hr=1" not in c.get_partition_names_ps(db, name, [""], -1)

        # directly on the upstream (no notification log there): within the TTL
        c.get_partition_names_ps(db, name, ["a"], -1)
        direct.add_partitions([t.Partition(values=["a", "7"], dbName=db, tableName=name, sd=sd)])
        _wait(lambda: "dt=a/hr=7" in c.get_partition_names_ps(db, name, ["a"], -1),
              what="the TTL to expire")
        for m, *rest in reads:
            _same(c, direct, m, db, name, *rest)

        # bounded: at most MAX_MEMOS per entry, the least recently used dropped
        for max_parts in range(1, MAX_MEMOS + 7):
            c.get_partition_names_ps(db, name, [""], max_parts)
        memos = cache._entries[(db, name)].memos
        assert len(memos) <= MAX_MEMOS
        assert ("get_partition_names_ps", ("",), MAX_MEMOS + 6) in memos
        assert ("get_partition_names_ps", ("",), 1) not in memos

        # _with_auth of a table with partition-level privileges: always the upstream's
        table = c.get_table(db, name)
        table.parameters = {**(table.parameters or {}), "PARTITION_LEVEL_PRIVILEGE": "true"}
        c.alter_table(db, name, table)
        c.get_partition_names(db, name, -1)      # the entry again, with its listing
        before, filled = _catalog_calls(pool), fills()
        for _ in range(2):
            _same(c, direct, "get_partitions_ps_with_auth", db, name, ["a"], -1, "u", ["g"])
        assert _catalog_calls(pool) == before + 2 and fills() == filled

        # an error is passed on, never kept: the table dropped directly upstream, while
        # our entry (and its listing) may still be valid
        c.get_partition_names_ps(db, name, ["b"], -1)
        direct.drop_table(db, name, True)
        filled = fills()
        for _ in range(2):
            before = _catalog_calls(pool)
            _same(c, direct, "get_partition_names_ps", db, name, ["b"], 3)
            assert _catalog_calls(pool) > before
        assert fills() == filled
    finally:
        c.drop_database(db, True, True)
        direct.close()


@pytest.mark.javahms
def test_upstream_stop_and_restart(java_upstream):
    env = java_upstream
    c = env.server.client()
    c.create_table(make_table("default", "survivor"))
    env.stop_upstream()
    try:
        # catalog calls: a clear MetaException naming the upstream
        with pytest.raises(t.MetaException, match=rf"upstream metastore {env.java.uri} unreachable"):
            c.get_all_databases()
        with pytest.raises(t.MetaException, match="unreachable"):
            c.create_table(make_table("default", "while_down"))
        # transactions, write ids and locks keep working (on the same client connection)
        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
        wid = c.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
            dbName="default", tableName="survivor", txnIds=[txn])).txnToWriteIds[0].writeId
        lock = c.lock(t.LockRequest(component=[t.LockComponent(
            type=SHARED_WRITE, level=TABLE_LEVEL, dbname="default", tablename="survivor",
            operationType=OP_INSERT, isTransactional=True)], txnid=txn, user="u", hostname="h"))
        assert lock.state == 1 and wid >= 1
        c.commit_txn(t.CommitTxnRequest(txnid=txn))
        assert env.server.ms.health()["upstream"]["status"] == "unavailable"
    finally:
        env.start_upstream()
    # the same client connection recovers: our pool reconnects
    assert "default" in c.get_all_databases()
    assert c.get_table("default", "survivor").tableName == "survivor"
    assert env.server.ms.health()["upstream"]["status"] == "ok"
    c.drop_table("default", "survivor", True)


@pytest.mark.javahms
@pytest.mark.spark
def test_spark_sql_through_extension_mode_lands_in_the_java_metastore(java_upstream):
    require_module("pyspark")
    from tests.spark.test_spark_sql_catalog import _check_expected
    from tests.support.spark import run_scenario
    env = java_upstream
    workdir = os.path.join(env.root_dir, "spark")
    seen: dict = {}
    before = env.server.ms.units.read(notifications.current_event_id)

    def check_upstream() -> None:
        # after phase 1: what Spark did through us is in the Java metastore
        with_direct = connect(env.java.port)
        try:
            table = with_direct.get_table("spark_it", "events")
            seen["params"] = dict(table.parameters)
            seen["names"] = with_direct.get_partition_names("spark_it", "events", -1)
            seen["dbs"] = with_direct.get_all_databases()
        finally:
            with_direct.close()

    results = run_scenario(env.server.uri, workdir, on_pause=check_upstream)
    _check_expected(results)
    assert seen["names"] == ["dt=2024-01-01", "dt=2024-01-02"]
    assert seen["params"]["owner_team"] == "data" and seen["params"]["retention_days"] == "30"
    assert "spark_it" in seen["dbs"]
    direct = connect(env.java.port)
    assert "spark_it" not in direct.get_all_databases()     # phase 2 dropped it, upstream too
    direct.close()
    c = env.server.client()
    types = {e[0] for e in _events(c, before) if e[1] == "spark_it"}
    assert {"CREATE_DATABASE", "CREATE_TABLE", "ADD_PARTITION", "ALTER_TABLE", "DROP_TABLE",
            "DROP_DATABASE"} <= types, types
