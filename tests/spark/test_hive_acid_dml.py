"""hive_acid row-level DML (delete/update/merge), write-write conflicts, multi-statement
transactions, SQL, insert-only tables -- results compared with plain Spark computations."""

from __future__ import annotations

import os
import random
import threading

import pyarrow.orc as po
import pytest

from hms_txn.clients.acid import metastore as M

pytestmark = [pytest.mark.spark]


def rows(df):
    return sorted(tuple(r) for r in df.collect())


def acid(spark, table):
    return spark.read.format("hive_acid").load(table)


SCHEMA = "id INT, qty BIGINT, name STRING, p STRING"


def test_delete_update_merge_equal_plain_spark(acid_spark, tname, ms):
    import orc_acid
    from pyspark.sql import functions as F
    from spark import hive_acid as H
    spark = acid_spark
    rnd = random.Random(7)
    data = [(i, rnd.randint(0, 100), f"n{i}", rnd.choice("abc")) for i in range(300)]
    H.create_table(spark, tname, SCHEMA, partition_by=["p"])
    base = spark.createDataFrame(data, SCHEMA)
    base.repartition(2).write.format("hive_acid").mode("append").save(tname)
    assert rows(acid(spark, tname)) == sorted(data)

    # DELETE
    H.delete(spark, tname, "qty < 10 OR name = 'n77'")
    expect = base.where(~F.expr("qty < 10 OR name = 'n77'"))
    assert rows(acid(spark, tname)) == rows(expect)

    # UPDATE
    cond = "p = 'b' AND id % 3 = 0"
    H.update(spark, tname, set={"qty": "qty * 2", "name": "upper(name)"}, condition=cond)
    expect = expect.select("id",
                           F.when(F.expr(cond), F.expr("qty * 2")).otherwise(F.col("qty"))
                           .alias("qty"),
                           F.when(F.expr(cond), F.expr("upper(name)")).otherwise(F.col("name"))
                           .alias("name"), "p")
    assert rows(acid(spark, tname)) == rows(expect)

    # MERGE: matched & op='d' -> delete, matched -> update qty, not matched -> insert
    src_rows = [(i, rnd.randint(0, 100), "d" if i % 7 == 0 else "u") for i in range(250, 330)]
    src = spark.createDataFrame(src_rows, "id INT, qty BIGINT, op STRING")
    H.merge(spark, tname, src, on="t.id = s.id",
            when_matched_delete="s.op = 'd'",
            when_matched_update={"qty": "s.qty"},
            when_not_matched_insert={"id": "s.id", "qty": "s.qty", "name": "'new'",
                                     "p": "'c'"})
    t, s = expect.alias("t"), src.alias("s")
    kept = t.join(s, F.expr("t.id = s.id"), "left").where("s.op IS NULL OR s.op <> 'd'") \
        .select("t.id", F.coalesce("s.qty", "t.qty").alias("qty"), "t.name", "t.p")
    inserted = s.join(t, F.expr("t.id = s.id"), "left_anti") \
        .select("id", "qty", F.lit("new").alias("name"), F.lit("c").alias("p"))
    expect = kept.unionByName(inserted)
    assert rows(acid(spark, tname)) == rows(expect)

    # orc_acid reads the same snapshot from the files
    info = M.table_info(ms, tname)
    txns = M.valid_txn_list(ms)
    wids = M.valid_write_ids(ms, [tname], txns)[tname]
    got = []
    for name, values, loc in M.list_partitions(ms, info):
        tb = orc_acid.read_table(loc, wids, valid_txns=txns)
        got += [(i, q, n, values[0]) for i, q, n in zip(*(tb.column(c).to_pylist()
                                                          for c in ("id", "qty", "name")))]
    assert sorted(got) == rows(expect)


def test_update_writes_hive_split_update_layout(acid_spark, tname, ms):
    import orc_acid
    from spark import hive_acid as H
    spark = acid_spark
    H.create_table(spark, tname, "id INT, v STRING")
    spark.createDataFrame([(i, "x") for i in range(20)], "id INT, v STRING").repartition(2) \
        .write.format("hive_acid").mode("append").save(tname)
    H.update(spark, tname, {"v": "'y'"}, "id % 4 = 0")
    info = M.table_info(ms, tname)
    dirs = sorted(e for e in os.listdir(info.location) if not e.startswith((".", "_")))
    assert dirs == ["delete_delta_0000002_0000002_0000", "delta_0000001_0000001_0000",
                    "delta_0000002_0000002_0001"]
    dd = os.path.join(info.location, "delete_delta_0000002_0000002_0000")
    n_deleted = 0
    for name in sorted(os.listdir(dd)):
        if name.startswith("_"):
            continue
        f = po.ORCFile(os.path.join(dd, name))
        ev = f.read()
        writer = int(name.split("_")[1])
        keys = list(zip(*(ev.column(c).to_pylist()
                          for c in ("originalTransaction", "bucket", "rowId"))))
        assert keys == sorted(keys)
        assert set(ev.column("operation").to_pylist()) == {2}
        assert set(ev.column("currentTransaction").to_pylist()) == {2}
        # events live in the file of the deleted row's decoded bucket (writer id)
        assert {(b >> 16) & 0xFFF for _, b, _ in keys} == {writer}
        assert {o for o, _, _ in keys} == {1}
        assert ev.column("row").null_count == ev.num_rows
        assert f.metadata[b"hive.acid.stats"] == f"0,0,{ev.num_rows}".encode()
        n_deleted += ev.num_rows
    assert n_deleted == 5
    ins = os.path.join(info.location, "delta_0000002_0000002_0001")
    new = []
    for name in sorted(os.listdir(ins)):
        if name.startswith("_"):
            continue
        ev = po.ORCFile(os.path.join(ins, name)).read()
        writer = int(name.split("_")[1])
        assert set(ev.column("bucket").to_pylist()) == {orc_acid.encode_bucket(writer, 1)}
        new += [r["v"] for r in ev.column("row").to_pylist()]
    assert new == ["y"] * 5
    assert rows(acid(spark, tname)) == sorted((i, "y" if i % 4 == 0 else "x")
                                              for i in range(20))


def test_concurrent_updates_one_wins_other_gets_write_conflict(acid_spark, tname, ms):
    from spark import hive_acid as H
    spark = acid_spark
    H.create_table(spark, tname, SCHEMA, partition_by=["p"])
    spark.createDataFrame([(i, 0, "n", "a" if i < 10 else "b") for i in range(20)], SCHEMA) \
        .write.format("hive_acid").mode("append").save(tname)
    a_updated, b_updated, a_done = threading.Event(), threading.Event(), threading.Event()
    out = {}

    # B starts after A has written (but not committed): both transactions are open at once
    # and B's snapshot does not contain A. (A's write id is allocated first: see the report
    # about get_valid_write_ids' high watermark when write ids are allocated out of txn order.)
    def writer(name, qty, mine, other, wait_for):
        try:
            if name == "B":
                a_updated.wait(120)
            with H.transaction(spark):
                H.update(spark, tname, {"qty": str(qty)}, "p = 'a' AND id < 5")
                mine.set()
                other.wait(120)
                if wait_for is not None:
                    wait_for.wait(120)
            out[name] = "committed"
        except Exception as e:
            out[name] = e
        finally:
            mine.set()
            if name == "A":
                a_done.set()

    ta = threading.Thread(target=writer, args=("A", 1, a_updated, b_updated, None))
    tb = threading.Thread(target=writer, args=("B", 2, b_updated, a_updated, a_done))
    ta.start(), tb.start()
    ta.join(300), tb.join(300)
    assert out["A"] == "committed"
    assert isinstance(out["B"], H.WriteConflictError), out["B"]
    assert "write conflict" in str(out["B"]).lower()
    got = rows(acid(spark, tname))
    assert [r for r in got if r[3] == "a" and r[0] < 5] == [(i, 1, "n", "a") for i in range(5)]
    assert len(got) == 20
    # the loser's files are gone: one delete delta and one insert delta (A's) only
    info = M.table_info(ms, tname)
    pdir = os.path.join(info.location, "p=a")
    dirs = sorted(e for e in os.listdir(pdir) if e.startswith(("delta", "delete")))
    assert len([d for d in dirs if d.startswith("delete_delta")]) == 1
    assert len(dirs) == 3
    # updates of different partitions do not conflict
    H.update(spark, tname, {"qty": "5"}, "p = 'a'")
    with H.transaction(spark):
        H.update(spark, tname, {"qty": "6"}, "p = 'b'")
    assert {r[1] for r in rows(acid(spark, tname))} == {5, 6}


def test_multi_statement_transaction(acid_spark, tname, ms):
    from spark import hive_acid as H
    spark = acid_spark
    a, b = tname + "_a", tname + "_b"
    H.create_table(spark, a, "id INT, v STRING")
    H.create_table(spark, b, "id INT, qty INT", partition_by=["qty"])
    spark.createDataFrame([(1, "old")], "id INT, v STRING") \
        .write.format("hive_acid").mode("append").save(a)
    with H.transaction(spark) as tx:
        tx.append(a, spark.createDataFrame([(2, "x"), (3, "y")], "id INT, v STRING"))
        # reads inside the transaction see its own earlier statements ...
        assert rows(tx.read(a)) == [(1, "old"), (2, "x"), (3, "y")]
        # ... a reader outside does not
        assert rows(acid(spark, a)) == [(1, "old")]
        tx.delete(a, "id = 1")
        tx.update(a, {"v": "'z'"}, "id = 3")
        spark.createDataFrame([(10, 1), (11, 2)], "id INT, qty INT") \
            .write.format("hive_acid").options(**tx.writer_options()).mode("append").save(b)
        tx.merge(b, spark.createDataFrame([(11, 5), (12, 3)], "id INT, qty INT"),
                 on="t.id = s.id", when_matched_delete=True,
                 when_not_matched_insert={"id": "s.id", "qty": "s.qty"})
        assert rows(tx.read(a)) == [(2, "x"), (3, "z")]
        assert rows(tx.read(b)) == [(10, 1), (12, 3)]
        assert rows(acid(spark, b)) == []
    assert rows(acid(spark, a)) == [(2, "x"), (3, "z")]
    assert rows(acid(spark, b)) == [(10, 1), (12, 3)]
    info = M.table_info(ms, a)
    dirs = sorted(e for e in os.listdir(info.location) if not e.startswith((".", "_")))
    # one write id (2), statement ids 0 (append), 1 (delete), 2 + 3 (update)
    assert dirs == ["delete_delta_0000002_0000002_0001", "delete_delta_0000002_0000002_0002",
                    "delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
                    "delta_0000002_0000002_0003"]
    # an exception aborts every statement
    with pytest.raises(RuntimeError, match="stop"):
        with H.transaction(spark) as tx:
            tx.append(a, spark.createDataFrame([(99, "no")], "id INT, v STRING"))
            tx.delete(b, None)
            raise RuntimeError("stop")
    assert rows(acid(spark, a)) == [(2, "x"), (3, "z")]
    assert rows(acid(spark, b)) == [(10, 1), (12, 3)]
    assert not any("0000003" in e for e in os.listdir(info.location))


def test_sql_statements(acid_spark, tname):
    from spark import hive_acid as H
    spark = acid_spark
    t, src = tname, tname + "_src"
    H.create_table(spark, t, "id INT, qty INT, p STRING", partition_by=["p"])
    H.create_table(spark, src, "id INT, qty INT, op STRING")
    H.sql(spark, f"INSERT INTO {t} VALUES (1, 10, 'a'), (2, 20, 'a'), (3, 30, 'b')")
    H.sql(spark, f"INSERT INTO {src} (id, qty, op) VALUES (2, 200, 'u'), (3, 0, 'd'), "
                 f"(4, 40, 'i')")
    H.sql(spark, f"INSERT INTO {t} PARTITION (p = 'c') SELECT id + 100, qty FROM {src} "
                 f"WHERE op = 'i'")
    assert rows(H.sql(spark, f"SELECT * FROM {t}")) == \
        [(1, 10, "a"), (2, 20, "a"), (3, 30, "b"), (104, 40, "c")]
    H.sql(spark, f"UPDATE {t} SET qty = qty + 1 WHERE p = 'a'")
    H.sql(spark, f"DELETE FROM {t} WHERE id = 104")
    H.sql(spark, f"""
        MERGE INTO {t} AS tgt USING (SELECT * FROM {src}) AS upd ON tgt.id = upd.id
        WHEN MATCHED AND upd.op = 'd' THEN DELETE
        WHEN MATCHED THEN UPDATE SET qty = upd.qty
        WHEN NOT MATCHED THEN INSERT (id, qty, p) VALUES (upd.id, upd.qty, 'n')""")
    assert rows(acid(spark, t)) == [(1, 11, "a"), (2, 200, "a"), (4, 40, "n")]
    H.sql(spark, f"INSERT OVERWRITE TABLE {t} PARTITION (p = 'a') SELECT 7, 70")
    assert rows(acid(spark, t)) == [(4, 40, "n"), (7, 70, "a")]
    # statements on non-ACID objects go to Spark
    assert H.sql(spark, "SELECT 1 AS x").collect()[0].x == 1


@pytest.mark.parametrize("fmt", ["orc", "parquet"])
def test_insert_only_tables(acid_spark, tname, ms, fmt):
    import orc_acid
    from spark import hive_acid as H
    spark = acid_spark
    t = f"{tname}_{fmt}"
    H.create_table(spark, t, "id INT, v STRING", insert_only=True, file_format=fmt)
    tb = ms.get_table_acid_aware(*t.split("."))
    assert tb.parameters["transactional_properties"] == "insert_only"
    spark.createDataFrame([(1, "a")], "id INT, v STRING") \
        .write.format("hive_acid").mode("append").save(t)
    H.insert(spark, t, spark.createDataFrame([(2, "b")], "id INT, v STRING"))
    assert rows(acid(spark, t)) == [(1, "a"), (2, "b")]
    info = M.table_info(ms, t)
    txns = M.valid_txn_list(ms)
    got = orc_acid.read_table(info.location, M.valid_write_ids(ms, [t], txns)[t],
                              valid_txns=txns, insert_only=True)
    assert sorted(got.column("id").to_pylist()) == [1, 2]
    spark.createDataFrame([(3, "c")], "id INT, v STRING").coalesce(1) \
        .write.format("hive_acid").mode("overwrite").save(t)
    assert rows(acid(spark, t)) == [(3, "c")]
    with pytest.raises(H.HiveAcidError, match="insert-only"):
        H.delete(spark, t, "id = 3")


def test_bucketed_table(acid_spark, tname, ms):
    from spark import hive_acid as H
    spark = acid_spark
    H.create_table(spark, tname, "id INT, v STRING", buckets=4, bucket_by=["id"])
    H.insert(spark, tname, spark.createDataFrame([(i, "x") for i in range(40)],
                                                 "id INT, v STRING"))
    H.update(spark, tname, {"v": "'y'"}, "id < 8")
    assert rows(acid(spark, tname)) == sorted((i, "y" if i < 8 else "x") for i in range(40))
    info = M.table_info(ms, tname)
    files = sorted(os.listdir(os.path.join(info.location, "delta_0000001_0000001_0000")))
    assert [f for f in files if f.startswith("bucket_")] and \
        all(int(f.split("_")[1]) < 4 for f in files if f.startswith("bucket_"))
    with pytest.raises(Exception, match="bucketed"):
        spark.createDataFrame([(1, "z")], "id INT, v STRING") \
            .write.format("hive_acid").mode("append").save(tname)
