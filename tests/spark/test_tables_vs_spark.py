"""hms_txn.tables (plain Python) and spark.hive_acid on the same tables: the same rows for
the same snapshot after every kind of write either makes, compactions and streaming deltas
still open; and Hive's write-write conflict rule between a writer of each.

The session's one metastore and Spark session (tests/spark/conftest.py) are shared; each
comparison reads with both engines with no writer in between (one snapshot).
"""

from __future__ import annotations

import pytest

from hms_txn import tables
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

SCHEMA = "id INT, qty BIGINT, note STRING, day STRING"


@pytest.fixture(scope="module")
def api(acid_hms):
    with tables.connect(acid_hms.uri) as conn:
        yield conn


def spark_rows(spark, table):
    df = spark.read.format("hive_acid").load(table)
    return sorted(tuple(r) for r in df.collect())


def api_rows(api, table, **kw):
    return sorted(tuple(r.values()) for r in api.read(table, **kw).to_pylist())


def same(spark, api, table):
    """Both engines' rows of ``table`` (fresh snapshots, nothing written in between)."""
    theirs, ours = spark_rows(spark, table), api_rows(api, table)
    assert ours == theirs
    return ours


def test_api_reads_what_spark_reads_after_every_write(acid_spark, acid_hms, api, tname):
    from hms_txn.service.compactor.worker import Worker
    from spark import hive_acid as H
    spark = acid_spark
    H.create_table(spark, tname, SCHEMA, partition_by=["day"])
    days = ["2024-01-01", "2024-01-02"]
    spark.createDataFrame([(i, i * 10, f"s{i}", days[i % 2]) for i in range(40)], SCHEMA) \
        .repartition(2).write.format("hive_acid").mode("append").save(tname)
    api.append(tname, {"id": list(range(40, 60)), "qty": [i * 10 for i in range(40, 60)],
                       "note": [f"p{i}" for i in range(40, 60)],
                       "day": [days[i % 2] for i in range(40, 60)]})
    assert api.read(tname).num_rows == 60
    # deletes and updates by both (compared with the appends)
    H.delete(spark, tname, "id % 7 = 0")
    api.delete(tname, "id % 5 = 0 AND day = '2024-01-02'")
    H.update(spark, tname, {"qty": "qty + 1"}, "id < 20")
    api.update(tname, {"note": "concat(note, '!')"}, where="id BETWEEN 30 AND 45")
    got = same(spark, api, tname)
    assert (31, 310, "s31!", "2024-01-02") in got and (11, 111, "s11", "2024-01-02") in got and all(r[0] % 7 for r in got)
    # merges by both (update, delete and insert clauses)
    src = spark.createDataFrame([(1, 1000, "m", "2024-01-02"), (3, 0, "x", "2024-01-02"),
                                 (100, 1, "new", "2024-01-03")], SCHEMA)
    H.merge(spark, tname, src, on="t.id = s.id",
            clauses=[("delete", "s.qty = 0"), ("update", None, {"qty": "s.qty"}),
                     ("insert", None, {"id": "s.id", "qty": "s.qty", "note": "s.note",
                                       "day": "s.day"})])
    res = api.merge(tname, {"id": [2, 9, 101], "qty": [2000, 0, 2], "note": ["m", "x", "n"],
                            "day": ["2024-01-01", "2024-01-02", "2024-01-04"]},
                    on="t.id = s.id AND t.day = s.day",
                    clauses=[("delete", "s.qty = 0"), ("update", None, {"qty": "s.qty"}),
                             ("insert", None, {"id": "s.id", "qty": "s.qty",
                                               "note": "s.note", "day": "s.day"})])
    assert res == {"updated": 1, "deleted": 1, "inserted": 1}
    got = {r[0]: r for r in same(spark, api, tname)}
    assert got[1][1] == 1000 and got[2][1] == 2000 and 3 not in got and 9 not in got
    assert {100, 101} <= set(got)
    # a major compaction of one partition (the server's worker): base + the other's deltas
    db, name = tname.split(".")
    assert acid_hms.client().compact2(T.CompactionRequest(
        dbname=db, tablename=name, partitionname="day=2024-01-01", type=2)).accepted
    assert Worker(acid_hms.ms.config, acid_hms.ms.units, acid_hms.ms.txns).run_once()
    same(spark, api, tname)
    # streaming ingest through the API's door: one committed transaction, one still open
    # with rows in the same delta file, and the batch left open
    stream = api.stream(tname, partition={"day": "2024-01-05"})
    try:
        stream.begin_batch(3)
        stream.write(
            [{"id": 200, "qty": 1, "note": "streamed"}, {"id": 201, "qty": 2, "note": "s"}])
        stream.commit()
        stream.write([{"id": 202, "qty": 3, "note": "open"}])
        got = same(spark, api, tname)
        assert {200, 201} <= {r[0] for r in got} and 202 not in {r[0] for r in got}
        # projection and a partition condition give the same rows as Spark's filter
        assert api_rows(api, tname, columns=["id"], where="day = '2024-01-05'") == \
            sorted(tuple(r) for r in spark.read.format("hive_acid").load(tname)
                   .where("day = '2024-01-05'").select("id").collect())
    finally:
        stream.close()


def test_api_and_spark_writers_follow_hives_conflict_rules(acid_spark, api, tname):
    from spark import hive_acid as H
    spark = acid_spark
    H.create_table(spark, tname, SCHEMA, partition_by=["day"])
    api.append(tname, {"id": list(range(10)), "qty": [0] * 10, "note": ["a"] * 10,
                       "day": ["d"] * 10})
    # an API UPDATE whose transaction overlaps a Spark UPDATE of the same partition that
    # commits first: the API's commit loses (Hive's write-write conflict check)
    with pytest.raises(tables.WriteConflictError):
        with api.transaction() as tx:
            tx.update(tname, {"qty": "1"}, where="id = 1")
            H.update(spark, tname, {"qty": "2"}, "id = 2")
    # the other way round: Spark's transaction loses to the API's committed DELETE
    with pytest.raises(H.WriteConflictError):
        with H.transaction(spark):
            H.update(spark, tname, {"qty": "3"}, "id = 3")
            api.delete(tname, "id = 4")
    # overlapping appends do not conflict: both commit
    with api.transaction() as tx:
        tx.append(tname, {"id": [20], "qty": [20], "note": ["api"], "day": ["d"]})
        spark.createDataFrame([(21, 21, "spark", "d")], SCHEMA) \
            .write.format("hive_acid").mode("append").save(tname)
    got = {r[0]: r[1] for r in same(spark, api, tname)}
    assert got[1] == 0 and got[2] == 2 and got[3] == 0 and 4 not in got
    assert {20, 21} <= set(got)
