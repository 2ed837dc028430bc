"""Notification log calls through real Thrift clients: reading, filtering, counting,
client-fired INSERT events, ACID write notifications, configuration answers, the gzip
message format, purging, and dense ids with two server processes writing."""

from __future__ import annotations

import json
import threading
import time

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import ServerProcess, client_for


def events(client, last=0, max_events=None, skip=None):
    req = t.NotificationEventRequest(lastEvent=last, maxEvents=max_events, eventTypeSkipList=skip)
    return client.get_next_notification(req).events


def current(client) -> int:
    return client.get_current_notificationEventId().eventId


def test_read_filter_and_count(client):
    start = current(client)
    client.create_database(t.Database(name="n1"))
    client.create_table(make_table("n1", "a"))
    table = client.get_table("n1", "a")
    table.parameters["k"] = "v"
    client.alter_table("n1", "a", table)
    client.create_table(make_table("default", "b"))
    client.drop_table("n1", "a", True)
    got = events(client, start)
    assert [e.eventType for e in got] == ["CREATE_DATABASE", "CREATE_TABLE", "ALTER_TABLE",
                                          "CREATE_TABLE", "DROP_TABLE"]
    assert [e.eventId for e in got] == list(range(start + 1, start + 6))
    assert current(client) == start + 5
    for e in got:
        assert e.messageFormat == "json-0.2" and e.catName == "hive" and e.eventTime > 0
    create = json.loads(got[1].message)
    assert (create["db"], create["table"], create["tableType"]) == ("n1", "a", "MANAGED_TABLE")
    assert json.loads(create["tableObjJson"])["1"] == {"str": "a"}   # Thrift TJSONProtocol
    alter = json.loads(got[2].message)
    assert alter["isTruncateOp"] == "false" and alter["writeId"] == -1
    assert json.loads(alter["tableObjAfterJson"])["9"]["map"][3]["k"] == "v"
    assert {"tableObjBeforeJson", "server", "servicePrincipal", "timestamp"} <= set(alter)
    assert (got[2].dbName, got[2].tableName) == ("n1", "a")

    # maxEvents pages through the log; 0/unset means everything
    assert [e.eventId for e in events(client, start, 2)] == [start + 1, start + 2]
    assert [e.eventId for e in events(client, start + 2, 2)] == [start + 3, start + 4]
    assert len(events(client, start, 0)) == 5
    # eventTypeSkipList
    kept = events(client, start, skip=["CREATE_TABLE", "DROP_TABLE"])
    assert [e.eventType for e in kept] == ["CREATE_DATABASE", "ALTER_TABLE"]
    assert events(client, current(client)) == []

    count = lambda **kw: client.get_notification_events_count(  # noqa: E731
        t.NotificationEventsCountRequest(**kw)).eventsCount
    assert count(fromEventId=start, dbName="n1") == 4
    assert count(fromEventId=start, dbName="N1") == 4
    assert count(fromEventId=start, dbName="default") == 1
    assert count(fromEventId=start + 1, dbName="n1") == 3
    assert count(fromEventId=start, dbName="n1", toEventId=start + 2) == 2
    assert count(fromEventId=start, dbName="n1", limit=1) == 1


def test_filters_and_counts_as_hive4(hms_factory):
    """Hive 4's ObjectStore.getNextNotification filters (exact catalog and database, any of
    the tables, any of eventTypeList, none of eventTypeSkipList; the transaction events,
    whose columns are NULL, fall out of a catalog or database filter) and its maxEvents
    rule (0, negative or above metastore.max.event.response: the server maximum);
    getNotificationEventsCount's ("*" every database; NULL database or catalog rows
    counted; toEventId; at most limit)."""
    with hms_factory({"hive.metastore.max.event.response": "4"}).client() as c:
        start = current(c)
        c.create_database(t.Database(name="f1"))
        c.create_table(make_table("f1", "a"))
        c.create_table(make_table("f1", "b"))
        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
        c.commit_txn(t.CommitTxnRequest(txnid=txn))
        c.create_table(make_table("default", "a"))

        def types(**kw):
            rq = t.NotificationEventRequest(lastEvent=start, maxEvents=100, **kw)
            return [(e.eventType, e.dbName, e.tableName) for e in
                    c.get_next_notification(rq).events]

        everything = types()
        assert [e[0] for e in everything] == ["CREATE_DATABASE", "CREATE_TABLE", "CREATE_TABLE",
                                              "OPEN_TXN"]             # the server's maximum
        assert len(c.get_next_notification(t.NotificationEventRequest(
            lastEvent=start, maxEvents=-1)).events) == 4
        assert types(dbName="F1") == [("CREATE_DATABASE", "f1", None),
                                      ("CREATE_TABLE", "f1", "a"), ("CREATE_TABLE", "f1", "b")]
        assert types(catName="hive", tableNames=["A"]) == [("CREATE_TABLE", "f1", "a"),
                                                           ("CREATE_TABLE", "default", "a")]
        assert types(dbName="f1", tableNames=[]) == types(dbName="f1")
        assert types(eventTypeList=["OPEN_TXN", "COMMIT_TXN"]) == [
            ("OPEN_TXN", None, None), ("COMMIT_TXN", None, None)]
        assert types(eventTypeList=["CREATE_TABLE"], eventTypeSkipList=["CREATE_TABLE"]) == []
        assert types(catName="other") == []

        def count(**kw):
            return c.get_notification_events_count(
                t.NotificationEventsCountRequest(fromEventId=start, **kw)).eventsCount

        assert count(dbName="f1") == 5                     # 3 of f1, OPEN_TXN, COMMIT_TXN
        assert count(dbName="*") == 6
        assert count(dbName="F1", catName="other") == 2     # only the NULL-catalog rows
        assert count(dbName="f1", tableNames=["b"]) == 1
        assert count(dbName="*", toEventId=start + 2) == 2
        assert count(dbName="*", limit=3) == 3 and count(dbName="*", limit=0) == 0


def test_fire_listener_event_insert(client):
    client.create_table(make_table("default", "p", keys=[("ds", "string")]))
    client.add_partition(t.Partition(dbName="default", tableName="p", values=["2024-01-01"]))
    client.create_table(make_table("default", "u"))
    start = current(client)

    resp = client.fire_listener_event(t.FireEventRequest(
        successful=True, dbName="default", tableName="p", partitionVals=["2024-01-01"],
        data=t.FireEventRequestData(insertData=t.InsertEventRequestData(
            replace=False, filesAdded=["file:/w/p/ds=2024-01-01/f0", "file:/w/p/ds=2024-01-01/f1"],
            subDirectoryList=["delta_1_1", "delta_1_1"]))))
    assert resp.eventIds == [start + 1]
    (ev,) = events(client, start)
    assert (ev.eventType, ev.dbName, ev.tableName) == ("INSERT", "default", "p")
    msg = json.loads(ev.message)
    assert (msg["db"], msg["table"], msg["tableType"], msg["cat"]) == ("default", "p", "MANAGED_TABLE", "hive")
    assert msg["replace"] == "false"
    assert msg["files"] == ["file:/w/p/ds=2024-01-01/f0###delta_1_1", "file:/w/p/ds=2024-01-01/f1###delta_1_1"]
    assert json.loads(msg["ptnObjJson"])["1"]["lst"][2:] == ["2024-01-01"]
    assert json.loads(msg["tableObjJson"])["1"] == {"str": "p"}
    assert isinstance(msg["timestamp"], int)

    # 4.x list form; replace defaults to true; no partition object for an unpartitioned table
    resp = client.fire_listener_event(t.FireEventRequest(
        successful=True, dbName="default", tableName="u",
        data=t.FireEventRequestData(insertDatas=[
            t.InsertEventRequestData(filesAdded=["file:/w/u/a"]),
            t.InsertEventRequestData(filesAdded=["file:/w/u/b"], replace=True)])))
    assert resp.eventIds == [start + 2, start + 3]
    msgs = [json.loads(e.message) for e in events(client, start + 1)]
    assert [m["files"] for m in msgs] == [["file:/w/u/a###"], ["file:/w/u/b###"]]
    assert all(m["replace"] == "true" and m["ptnObjJson"] is None for m in msgs)

    # an unsuccessful operation fires nothing
    resp = client.fire_listener_event(t.FireEventRequest(
        successful=False, dbName="default", tableName="u",
        data=t.FireEventRequestData(insertData=t.InsertEventRequestData(filesAdded=["x"]))))
    assert resp.eventIds == [] and current(client) == start + 3
    # fire_listener_event declares no exceptions: errors arrive as TApplicationException
    with pytest.raises(TApplicationException, match="nosuch"):
        client.fire_listener_event(t.FireEventRequest(
            successful=True, dbName="default", tableName="nosuch",
            data=t.FireEventRequestData(insertData=t.InsertEventRequestData(filesAdded=["x"]))))
    with pytest.raises(TApplicationException, match="partition"):
        client.fire_listener_event(t.FireEventRequest(
            successful=True, dbName="default", tableName="p", partitionVals=["1999"],
            data=t.FireEventRequestData(insertData=t.InsertEventRequestData(filesAdded=["x"]))))
    assert current(client) == start + 3


def test_add_write_notification_log(client):
    client.create_table(make_table("default", "acid", params={"transactional": "true"}))
    txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    wid = client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
        dbName="default", tableName="acid", txnIds=[txn])).txnToWriteIds[0].writeId
    start = current(client)
    write = t.WriteNotificationLogRequest(
        txnId=txn, writeId=wid, db="default", table="acid",
        fileInfo=t.InsertEventRequestData(filesAdded=["file:/w/acid/delta_1_1/bucket_0"],
                                          subDirectoryList=["delta_1_1"]))
    client.add_write_notification_log(write)
    client.add_write_notification_log(write)            # a retry changes nothing
    # Hive 4 writes no notification event for an ACID write (TxnHandler.addWriteNotificationLog
    # stores a TXN_WRITE_NOTIFICATION_LOG row); get_all_write_event_info serves it
    assert events(client, start) == []
    (info,) = client.get_all_write_event_info(t.GetAllWriteEventInfoRequest(txnId=txn))
    assert (info.writeId, info.database, info.table, info.partition) == (wid, "default", "acid", "")
    assert info.files == "file:/w/acid/delta_1_1/bucket_0###delta_1_1"
    assert json.loads(info.tableObj)["1"] == {"str": "acid"} and info.partitionObj is None
    assert client.get_all_write_event_info(t.GetAllWriteEventInfoRequest(
        txnId=txn, dbName="default", tableName="other")) == []
    # a second write to the same table adds its files in front (TxnHandler's merge)
    client.add_write_notification_log(t.WriteNotificationLogRequest(
        txnId=txn, writeId=wid, db="default", table="acid",
        fileInfo=t.InsertEventRequestData(filesAdded=["file:/w/acid/delta_1_1/bucket_1"],
                                          subDirectoryList=["delta_1_1"])))
    (info,) = client.get_all_write_event_info(t.GetAllWriteEventInfoRequest(txnId=txn))
    assert info.files == ("file:/w/acid/delta_1_1/bucket_1###delta_1_1]"
                          "file:/w/acid/delta_1_1/bucket_0###delta_1_1")
    client.commit_txn(t.CommitTxnRequest(txnid=txn))
    (ev,) = events(client, start)                        # COMMIT_TXN: txnid, no write lists
    assert (ev.eventType, ev.catName, ev.dbName) == ("COMMIT_TXN", None, None)
    assert json.loads(ev.message)["txnid"] == txn and json.loads(ev.message)["files"] is None
    with pytest.raises(TApplicationException, match="committed"):   # declares no exceptions
        client.add_write_notification_log(t.WriteNotificationLogRequest(
            txnId=txn, writeId=wid, db="default", table="acid",
            fileInfo=t.InsertEventRequestData(filesAdded=["f"])))


def test_purge_after_time_to_live(hms_factory):
    """Events older than hive.metastore.event.db.listener.timetolive are purged by the
    housekeeping sweep; ids keep counting, and a cache tailer that missed purged events
    drops its cache instead of skipping them."""
    server = hms_factory({"hive.metastore.event.db.listener.timetolive": "1s",
                          "hive.timedout.txn.reaper.start": "0ms",
                          "hive.timedout.txn.reaper.interval": "200ms",
                          "hms_txn.cache.tailer.pausable": "true",
                          "hms_txn.cache.tail.interval": "0.05"})
    with client_for(server.port) as c:
        c.create_table(make_table("default", "x"))
        c.get_table("default", "x")                     # cached
        c.setOption("hms_txn.cache.tailer.paused", "true")
        c.create_table(make_table("default", "y"))
        c.create_table(make_table("default", "z"))
        last = current(c)
        deadline = time.time() + 30
        while events(c, 0) and time.time() < deadline:
            time.sleep(0.2)
        assert events(c, 0) == []
        assert current(c) == last                       # answered from the id counter
        c.setOption("hms_txn.cache.tailer.paused", "false")
        c.create_table(make_table("default", "w"))
        assert [e.eventId for e in events(c, 0)] == [last + 1]
        deadline = time.time() + 30
        while c.getCounters()["hms_txn.cache.position"] < last + 1 and time.time() < deadline:
            time.sleep(0.05)
        counters = c.getCounters()
        assert counters["hms_txn.cache.resets"] == 1 and counters["hms_txn.cache.entries"] == 0
        assert c.get_table("default", "x").tableName == "x"


def test_pause_option_needs_the_test_hook(client):
    with pytest.raises(TApplicationException, match="pausable"):
        client.setOption("hms_txn.cache.tailer.paused", "true")
    with pytest.raises(TApplicationException, match="not supported"):
        client.setOption("some.option", "1")
    assert client.getOption("hms_txn.cache.tailer.paused") == "false"


def test_dense_ids_with_two_server_processes(postgres, tmp_path):
    """Two `hms-txn serve` processes on one PostgreSQL database, four writers each: event
    ids are dense and strictly increasing, and a reader tailing the log while they write
    never sees a gap (ids become visible in id order)."""
    url = postgres.create_database()
    conf = {"javax.jdo.option.ConnectionURL": url,
            "hive.metastore.warehouse.dir": str(tmp_path / "warehouse")}
    procs = [ServerProcess(str(tmp_path / f"p{i}"), conf) for i in range(2)]
    try:
        with client_for(procs[0].port) as c:
            start = current(c)
        per_writer = 12
        errors: list[BaseException] = []

        def writer(proc, w):
            try:
                with client_for(proc.port) as c:
                    for i in range(per_writer):
                        name = f"t_{proc.port}_{w}_{i}"
                        c.create_table(make_table("default", name))          # 1 event
                        tbl = c.get_table("default", name)
                        tbl.parameters["i"] = str(i)
                        c.alter_table("default", name, tbl)                  # 1 event
                        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
                        c.commit_txn(t.CommitTxnRequest(txnid=txn))          # 2 events
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        seen: list[int] = []
        stop = threading.Event()

        def tail():
            with client_for(procs[1].port) as c:
                last = start
                while True:
                    done = stop.is_set()
                    batch = events(c, last, 50)
                    ids = [e.eventId for e in batch]
                    assert ids == list(range(last + 1, last + 1 + len(ids))), (last, ids)
                    seen.extend(ids)
                    if ids:
                        last = ids[-1]
                    elif done:
                        return

        threads = [threading.Thread(target=writer, args=(p, w)) for p in procs for w in range(4)]
        tailer = threading.Thread(target=tail)
        tailer.start()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        stop.set()
        tailer.join(60)
        assert not errors, errors
        total = 2 * 4 * per_writer * 4
        assert seen == list(range(start + 1, start + 1 + total))
        with client_for(procs[0].port) as c:
            assert current(c) == start + total
            got = events(c, start)
            assert [e.eventId for e in got] == seen
            assert sum(e.eventType == "OPEN_TXN" for e in got) == 2 * 4 * per_writer
    finally:
        for p in procs:
            p.stop()
