"""compact / compact2 / show_compact queue bookkeeping over Thrift, on SQLite and PostgreSQL."""

from __future__ import annotations

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

MINOR, MAJOR = 1, 2


def req(table, part=None, ctype=MAJOR, **kw):
    return T.CompactionRequest(dbname="default", tablename=table, partitionname=part,
                               type=ctype, **kw)


def test_compact_enqueue_dedup_and_show(hms, client):
    r1 = client.compact2(req("T", runas="etl", properties={"compactor.mapreduce.map.memory.mb": "1024"}))
    assert (r1.id, r1.state, r1.accepted) == (1, "initiated", True)
    # the same table again while one is initiated: refused as Hive 4 refuses it (id -1,
    # state "refused", the queued entry in the message; Hive's CompactFunction.execute)
    r2 = client.compact2(req("t", ctype=MINOR))
    assert (r2.id, r2.state, r2.accepted) == (-1, "refused", False)
    assert r2.errormessage == "Compaction is already scheduled with state='initiated' and id=1"
    # a partition is its own object; compact (void) enqueues too
    r3 = client.compact2(req("t", part="k=1", ctype=MINOR))
    assert (r3.id, r3.accepted) == (2, True)
    client.compact(req("u"))
    shown = client.show_compact(T.ShowCompactRequest()).compacts
    assert [(c.id, c.tablename, c.partitionname, c.type, c.state) for c in shown] == [
        (1, "t", None, MAJOR, "initiated"), (2, "t", "k=1", MINOR, "initiated"),
        (3, "u", None, MAJOR, "initiated")]
    assert shown[0].runAs == "etl" and shown[0].enqueueTime > 0
    assert shown[0].hadoopJobId == "None"
    # 4.x filters
    assert [c.id for c in client.show_compact(T.ShowCompactRequest(tbName="u")).compacts] == [3]
    assert [c.id for c in client.show_compact(T.ShowCompactRequest(id=2)).compacts] == [2]
    assert [c.id for c in client.show_compact(
        T.ShowCompactRequest(type=MINOR)).compacts] == [2]
    assert [c.id for c in client.show_compact(
        T.ShowCompactRequest(state="initiated", limit=2)).compacts] == [1, 2]
    # once the worker moves an entry on, a new request is accepted
    from hms_txn.store.schema import compaction_queue
    with hms.ms.store.write() as conn:
        conn.execute(compaction_queue.update().where(compaction_queue.c.id == 1)
                     .values(state="r"))
    assert client.show_compact(T.ShowCompactRequest(id=1)).compacts[0].state == \
        "ready for cleaning"
    r4 = client.compact2(req("t"))
    assert (r4.id, r4.state, r4.accepted) == (4, "initiated", True)
