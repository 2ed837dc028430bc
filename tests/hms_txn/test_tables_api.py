"""hms_txn.tables, the plain Python API of ACID tables, against one in-process metastore.

What it must do without Spark: snapshot reads (projection, partitions pruned through the
metastore, row filters), every write in Hive's transaction protocol with the write events
other engines read, a reader's lock released when it finishes or its process dies, DuckDB
and Polars on top, Hive-written tables read as Hive's readers read them. (What Spark reads
for the same snapshots: tests/spark/test_tables_vs_spark.py.)
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest

from hms_txn import tables
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T

TXN_TIMEOUT_S = 4
FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
_names = itertools.count(1)


@pytest.fixture(scope="module")
def hms():
    from tests.support.servers import InProcessServer
    root = tempfile.mkdtemp(prefix="tables-api-")
    server = InProcessServer(os.path.join(root, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(root, "warehouse"),
        "hive.txn.timeout": f"{TXN_TIMEOUT_S}s",
        "hive.timedout.txn.reaper.start": "1s",
        "hive.timedout.txn.reaper.interval": "1s",
    })
    server.root = root
    yield server
    server.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def ms(hms):
    with tables.connect(hms.uri) as conn:
        yield conn


@pytest.fixture
def client(hms):
    c = hms.client()
    yield c
    c.close()


def table_name() -> str:
    return f"default.api{next(_names)}_{os.getpid()}"


def orders(ms, name=None) -> str:
    name = name or table_name()
    ms.create_table(name, pa.schema([("id", pa.int32()), ("qty", pa.int64()),
                                     ("note", pa.string()), ("day", pa.string())]),
                    partition_by=["day"])
    ms.append(name, pa.table({"id": pa.array(range(20), pa.int32()),
                              "qty": [i * 10 for i in range(20)],
                              "note": [f"n{i}" for i in range(20)],
                              "day": ["2024-01-01"] * 10 + ["2024-01-02"] * 10}))
    return name


def rows(table: pa.Table, key="id"):
    return table.sort_by(key).to_pylist()


def locks_of(client, name):
    db, t = name.split(".")
    return [lk for lk in client.show_locks(T.ShowLocksRequest(dbname=db, tablename=t)).locks
            or []]


def poll(check, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout:.0f} s")


# -- reads ------------------------------------------------------------------------------------

def test_projection_condition_and_partitions_pruned_through_the_metastore(ms, hms):
    name = orders(ms)
    got = ms.read(name, columns=["ID", "qty"], where="day = '2024-01-02' AND qty >= 150")
    assert got.schema.names == ["id", "qty"]
    assert rows(got) == [{"id": i, "qty": i * 10} for i in range(15, 20)]
    # the other partition's files are never opened: its ORC file made unreadable, the
    # read of the pruned partition still works (the metastore answered one partition)
    other = Path(hms.root, "warehouse", name.split(".")[1], "day=2024-01-01")
    for f in other.rglob("bucket_*"):
        f.write_bytes(b"not orc")
    assert ms.read(name, where="day IN ('2024-01-02') AND id = 12").num_rows == 1
    with pytest.raises(Exception):
        ms.read(name, where="id = 1")
    assert ms.read(name, where="id > 100 AND day > '2024-01-01'").num_rows == 0


def test_sql_conditions_and_pyarrow_expressions(ms):
    import pyarrow.compute as pc
    name = orders(ms)
    assert [r["id"] for r in rows(ms.read(name, where="note LIKE 'n1%' AND id % 2 = 1"))] == \
        [1, 11, 13, 15, 17, 19]
    assert ms.read(name, where=pc.field("qty") > 180).column("id").to_pylist() == [19]
    with pytest.raises(tables.HiveAcidError, match="no column nope"):
        ms.read(name, where="nope = 1")
    with pytest.raises(tables.HiveAcidError, match="not a SQL expression|statement"):
        ms.read(name, where="id = 1; DROP TABLE x")
    with pytest.raises(tables.HiveAcidError, match="not in"):
        ms.read(name, columns=["id", "missing"])


def test_writes_in_transactions_with_write_events(ms, client):
    name = orders(ms)
    assert ms.delete(name, "id < 3") == 3
    assert ms.update(name, {"qty": "qty + 1", "note": "'changed'"}, where="id = 5") == 1
    got = ms.merge(name, {"id": [5, 50], "qty": [555, 5000], "note": ["m", "new"],
                          "day": ["2024-01-01", "2024-01-03"]},
                   on="t.id = s.id", when_matched_update={"qty": "s.qty"},
                   when_not_matched_insert={"id": "s.id", "qty": "s.qty", "note": "s.note",
                                            "day": "s.day"})
    assert got == {"updated": 1, "deleted": 0, "inserted": 1}
    with ms.transaction() as tx:
        tx.append(name, {"id": [60], "qty": [6], "note": ["x"], "day": ["2024-01-02"]})
        assert tx.read(name, where="id = 60").num_rows == 1      # its own statement
        tx.delete(name, "id = 19")
        txn_id = tx.id
    with pytest.raises(RuntimeError):
        with ms.transaction() as tx:
            tx.delete(name, "id = 3")
            raise RuntimeError("rolled back")
    final = {r["id"]: r for r in ms.read(name).to_pylist()}
    assert set(final) == set(range(3, 19)) | {50, 60}
    assert final[5]["qty"] == 555 and final[5]["note"] == "changed"
    assert final[50]["day"] == "2024-01-03"
    # the commit recorded one write event per partition it wrote (what Impala / Hive
    # replication read): the transaction wrote day=2024-01-02 (insert + delete)
    events = client.get_all_write_event_info(T.GetAllWriteEventInfoRequest(
        txnId=txn_id, dbName="default", tableName=name.split(".")[1]))
    assert [(e.partition, e.tableObj is not None) for e in events] == \
        [("day=2024-01-02", True)]
    assert all("delta_" in e.files for e in events)
    # overwrite: every partition replaced
    ms.overwrite(name, {"id": [1], "qty": [1], "note": ["o"], "day": ["2024-01-09"]})
    assert ms.read(name).to_pylist() == [{"id": 1, "qty": 1, "note": "o", "day": "2024-01-09"}]


def test_bad_input_is_refused_and_writes_nothing(ms):
    name = orders(ms)
    before = rows(ms.read(name))
    with pytest.raises(tables.HiveAcidError, match="columns"):
        ms.append(name, {"id": [1], "qty": [2]})
    with pytest.raises(tables.HiveAcidError, match="does not cast"):
        ms.append(name, {"id": ["x"], "qty": [1], "note": ["n"], "day": ["d"]})
    with pytest.raises(tables.HiveAcidError, match="partitioning"):
        ms.update(name, {"day": "'2024-02-02'"})
    with pytest.raises(tables.HiveAcidError, match="cardinality"):
        ms.merge(name, {"id": [4, 4], "qty": [1, 2]}, on="t.id = s.id",
                 when_matched_update={"qty": "s.qty"})
    with pytest.raises(tables.HiveAcidError, match="does not exist"):
        ms.read("default.no_such_table")
    assert rows(ms.read(name)) == before


# -- locks --------------------------------------------------------------------------------

def test_a_readers_lock_is_held_while_reading_and_released_after(ms, client):
    name = orders(ms)
    ms.read(name)
    assert locks_of(client, name) == []
    reader = ms.reader(name, threads=1)
    held = locks_of(client, name)
    assert [(lk.type, lk.state) for lk in held] == [(1, 1)]     # SHARED_READ, ACQUIRED
    assert held[0].agentInfo == "hms-txn-python"
    time.sleep(TXN_TIMEOUT_S * 1.5)        # heartbeated: outlives hive.txn.timeout
    assert locks_of(client, name) != []
    assert reader.read_all().num_rows == 20
    assert locks_of(client, name) == []
    # a reader closed before its end, and one dropped unread, release theirs too
    with ms.reader(name) as r:
        r.read_next_batch()
    assert locks_of(client, name) == []
    r = ms.reader(name)
    del r
    poll(lambda: locks_of(client, name) == [], what="the dropped reader's lock released")


def test_a_reader_whose_process_dies_loses_its_lock(ms, hms, client):
    name = orders(ms)
    code = textwrap.dedent(f"""
        import sys, time
        from hms_txn import tables
        ms = tables.connect({hms.uri!r})
        reader = ms.reader({name!r})
        print("reading", flush=True)
        time.sleep(600)
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "reading"
        assert len(locks_of(client, name)) == 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        # no more heartbeats: the metastore's reaper drops the lock after hive.txn.timeout
        poll(lambda: locks_of(client, name) == [], timeout=30 + TXN_TIMEOUT_S,
             what="the dead reader's lock timed out")
    finally:
        if proc.poll() is None:
            proc.kill()


# -- other engines on the API's Arrow ------------------------------------------------------

def test_duckdb_aggregates_over_the_reader_and_polars_reads_the_table(ms):
    import duckdb
    import polars as pl
    name = orders(ms)
    reader = ms.reader(name, columns=["day", "qty"])
    got = duckdb.sql("SELECT day, sum(qty) AS total, count(*) AS n FROM reader "
                     "GROUP BY day ORDER BY day").fetchall()
    assert got == [("2024-01-01", 450, 10), ("2024-01-02", 1450, 10)]
    df = pl.from_arrow(ms.read(name, where="qty > 100"))
    assert df.filter(pl.col("day") == "2024-01-02")["qty"].sum() == 1450 - 100
    assert df.height == 9


# -- Hive-written tables --------------------------------------------------------------------

def _hive_table(ms, client, name, columns, files, write_ids, tmp_path, seed=None):
    """A table whose directory holds Hive-written files (copied from shared/fixtures), with
    ``write_ids`` write ids committed in the metastore (after ``seed``)."""
    fixtures = FIXTURES / "trino-hive-written"
    assert fixtures.is_dir(), "Hive-written fixtures are missing: shared/ beside the checkout"
    ms.create_table(name, columns)
    db, t = name.split(".")
    loc = Path(ms.table_info(name).location)
    for src, rel in files:
        dest = loc / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fixtures / src, dest)
    if seed:
        client.seed_write_id(T.SeedTableWriteIdsRequest(dbName=db, tableName=t,
                                                        seedWriteId=seed))
    for _ in range(write_ids):
        txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="hive",
                                                hostname="h")).txn_ids[0]
        client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
            dbName=db, tableName=t, txnIds=[txn]))
        client.commit_txn(T.CommitTxnRequest(txnid=txn))


def test_hive_written_tables_read_as_hive_reads_them(ms, client, tmp_path):
    nation = [("n_nationkey", "int"), ("n_name", "string"), ("n_regionkey", "int"),
              ("n_comment", "string")]
    # Hive's insert delta and two delete deltas (nation keys 5 and 19 deleted)
    name = table_name()
    _hive_table(ms, client, name, nation, [
        ("nationFile25kRowsSortedOnNationKey/bucket_00000",
         "delta_0000002_0000002_0000/bucket_00000"),
        ("nation_delete_deltas/delete_delta_0000003_0000003_0000/bucket_00000",
         "delete_delta_0000003_0000003_0000/bucket_00000"),
        ("nation_delete_deltas/delete_delta_0000004_0000004_0000/bucket_00000",
         "delete_delta_0000004_0000004_0000/bucket_00000")], 4, tmp_path)
    t = ms.read(name)
    assert t.num_rows == 23000
    keys = t.column("n_nationkey").to_pylist()
    assert set(keys) == set(range(25)) - {5, 19} and keys.count(7) == 1000
    assert ms.read(name, columns=["n_regionkey"], where="n_nationkey = 7").num_rows == 1000
    # an original (pre-ACID) file with a Hive delete event on its 25th row
    name = table_name()
    _hive_table(ms, client, name, nation, [
        ("fullacidNationTableWithOriginalFiles/000000_0", "000000_0"),
        ("fullacidNationTableWithOriginalFiles/delete_delta_10000001_10000001_0000/"
         "bucket_00000", "delete_delta_10000001_10000001_0000/bucket_00000")],
        1, tmp_path, seed=10000000)
    t = ms.read(name)
    assert t.num_rows == 24 and 24 not in t.column("n_nationkey").to_pylist()
    assert "UNITED STATES" not in t.column("n_name").to_pylist()


def test_cat_and_head_print_the_snapshot_without_spark(ms, hms, tmp_path):
    """``hms-txn cat`` / ``head`` read through hms_txn.tables: a row deleted at the snapshot
    stays out, --where prunes, --limit bounds, every format round-trips, a missing table is
    one line and exit 2."""
    import csv
    import json
    import pyarrow.parquet as pq

    name = orders(ms)
    ms.delete(name, "id = 3")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "hms_txn.cli", *args, "--uri", hms.uri],
                              capture_output=True, text=True, timeout=120)

    out = cli("cat", name)
    assert out.returncode == 0, out.stderr
    got = list(csv.DictReader(out.stdout.splitlines()))
    assert sorted(int(r["id"]) for r in got) == [i for i in range(20) if i != 3]
    out = cli("cat", name, "--where", "day = '2024-01-02' AND qty >= 150", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert sorted(json.loads(line)["id"] for line in out.stdout.splitlines()) == [15, 16, 17,
                                                                                18, 19]
    target = tmp_path / "rows.parquet"
    out = cli("cat", name, "--columns", "id,note", "--format", "parquet", "--output",
              str(target))
    assert out.returncode == 0 and "19 row(s) written" in out.stderr, out.stderr
    assert pq.read_table(target).column_names == ["id", "note"]
    out = cli("head", name, "--limit", "4")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()       # header, rule, 4 rows, the count
    assert len(lines) == 7 and lines[-1] == "(4 row(s))", out.stdout
    assert [line.split()[0] for line in lines[2:6]] == ["0", "1", "2", "4"]
    out = cli("cat", "default.no_such_table")
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout)
    assert len(out.stderr.strip().splitlines()) == 1 and "no_such_table" in out.stderr
