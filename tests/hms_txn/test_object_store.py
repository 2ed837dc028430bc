"""The metastore on S3: warehouse directories, automatic compaction and cleaning on s3a://
locations of a real S3-compatible server (moto's, started by the suite), configured with
S3A's keys in hive-site.xml exactly as Hive's would be."""

from __future__ import annotations

import orc_acid
from orc_acid.fs import filesystem_for, list_names, resolve
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_compactor import (ACID, FAST, MAJOR, SCHEMA, Engine, random_rows, rows,
                                          wait_until)


class S3Engine(Engine):
    """The test engine writing and reading through orc_acid with the S3 file system."""

    def __init__(self, client, fs, db="default"):
        super().__init__(client, db)
        self.fs = fs

    def location(self, name, part=None):
        if part is None:
            return self.c.get_table_acid_aware(self.db, name).sd.location
        return self.c.get_partition_by_name(self.db, name, part).sd.location

    def create(self, name, params=None, keys=(), location=None):
        self.c.create_table(make_table(self.db, name, cols=(("id", "int"), ("name", "string")),
                                       keys=keys, params={**ACID, **(params or {})},
                                       location=location))
        return self.location(name)

    def insert(self, table, data, part=None, bucket=0):
        txn, wid = self.begin_write(table, 2, part)
        orc_acid.write_delta(self.location(table, part), wid, 0, bucket, data, filesystem=self.fs)
        self.commit(txn, table, wid, part)
        return wid

    def overwrite(self, table, data):
        txn, wid = self.begin_write(table, 3)
        orc_acid.write_base(self.location(table), wid, 0, data, filesystem=self.fs)
        self.commit(txn, table, wid)
        return wid

    def delete(self, table, row_ids, part=None):
        txn, wid = self.begin_write(table, 4, part)
        orc_acid.write_delete_delta(self.location(table, part), wid, 0, row_ids,
                                    row_schema=SCHEMA, filesystem=self.fs)
        self.commit(txn, table, wid, part)
        return wid

    def aborted_insert(self, table, data, part=None):
        txn, wid = self.begin_write(table, 2, part)
        orc_acid.write_delta(self.location(table, part), wid, 0, 0, data, filesystem=self.fs)
        self.c.abort_txn(T.AbortTxnRequest(txnid=txn))
        return wid

    def read(self, table, part=None, snap=None):
        vt, wl = snap or self.snapshot(table)
        t = orc_acid.read_table(self.location(table, part), wl, valid_txns=vt,
                                with_row_id=True, filesystem=self.fs)
        return sorted(zip([tuple(r.values()) for r in t.column("ROW__ID").to_pylist()],
                          t.column("id").to_pylist(), t.column("name").to_pylist()))


def top_names(fs, location):
    _, path = resolve(location, fs)
    return sorted(n for n, _, _ in list_names(fs, path) if not n.startswith("."))


def start(hms_factory, moto_s3, bucket, extra=None):
    conf = {**moto_s3.options(), "hive.metastore.warehouse.dir": f"s3a://{bucket}/warehouse",
            **(extra or {})}
    hms = hms_factory(conf)
    fs, _ = filesystem_for(f"s3a://{bucket}", moto_s3.options())
    return hms, fs


def test_warehouse_directories_on_s3(hms_factory, moto_s3, s3_bucket):
    hms, fs = start(hms_factory, moto_s3, s3_bucket)
    c = hms.client()
    assert c.get_database("default").locationUri == f"s3a://{s3_bucket}/warehouse"
    c.create_database(T.Database(name="sales", description="", parameters={}))
    db_loc = c.get_database("sales").locationUri
    assert db_loc == f"s3a://{s3_bucket}/warehouse/sales.db"
    e = S3Engine(c, fs, db="sales")
    loc = e.create("orders", keys=(("day", "string"),))
    assert loc == f"{db_loc}/orders"
    assert "orders" in top_names(fs, db_loc)
    part = T.Partition(dbName="sales", tableName="orders", values=["2024-01-01"],
                       sd=c.get_table_acid_aware("sales", "orders").sd, parameters={})
    part.sd.location = None
    c.add_partition(part)
    p_loc = e.location("orders", "day=2024-01-01")
    assert p_loc == f"{loc}/day=2024-01-01"
    assert top_names(fs, loc) == ["day=2024-01-01"]
    e.insert("orders", rows(range(10)), part="day=2024-01-01")
    assert len(e.read("orders", part="day=2024-01-01")) == 10
    # quick stats of a partition added over existing data (one listing)
    c.add_partition(T.Partition(dbName="sales", tableName="orders", values=["2024-01-02"],
                                sd=c.get_table_acid_aware("sales", "orders").sd, parameters={}))
    # a table at an explicit s3a:// location outside the warehouse
    other = f"s3a://{s3_bucket}/elsewhere/t2"
    e.create("t2", location=other)
    assert e.location("t2") == other and fs.get_file_info(other[len("s3a://"):]).type.name == \
        "Directory"
    # drop partition, drop table, drop database with their data: the objects are gone
    c.drop_partition("sales", "orders", ["2024-01-01"], True)
    assert "day=2024-01-01" not in top_names(fs, loc)
    assert fs.get_file_info(p_loc[len("s3a://"):]).type.name == "NotFound"
    c.drop_table("sales", "orders", True)
    assert "orders" not in top_names(fs, db_loc)
    c.drop_table("sales", "t2", True)
    assert fs.get_file_info(other[len("s3a://"):]).type.name == "NotFound"
    c.drop_database("sales", True, True)
    assert "sales.db" not in top_names(fs, f"s3a://{s3_bucket}/warehouse")


def test_automatic_compaction_and_cleaning_on_s3(hms_factory, moto_s3, s3_bucket):
    hms, fs = start(hms_factory, moto_s3, s3_bucket, FAST)
    e = S3Engine(hms.client(), fs)
    loc = e.create("events")
    e.overwrite("events", random_rows(2000))
    for i in range(12):
        e.insert("events", rows(range(100000 + 10 * i, 100000 + 10 * i + 3)))
    e.aborted_insert("events", rows(range(900000, 900005)))
    expected = e.read_as_query("events")
    assert len(expected) == 2000 + 36 and not [r for r in expected if r[1] >= 900000]

    def compacted_up_to(names):
        """The highest write id a compactor's directory (``_v``) covers."""
        return max((int(n.split("_")[-2]) for n in names if "_v" in n), default=0)

    def left_over(names):
        """Deltas the compactions did not cover: only those written after the last one
        started may stay (the initiator runs while the inserts are still going, and a few
        deltas after it are below its thresholds)."""
        top = compacted_up_to(names)
        return [n for n in names if n.startswith("delta_") and "_v" not in n
                and int(n.split("_")[1]) <= top]

    def settled():
        cs = e.compactions("events")
        names = top_names(fs, loc)
        return cs and all(c.state == "succeeded" for c in cs) and \
            compacted_up_to(names) > 0 and not left_over(names)
    try:
        wait_until(settled, timeout=120, what="automatic compaction and cleaning on S3")
    except AssertionError as err:   # say where it stood
        raise AssertionError(
            f"{err}: compactions {[(c.type, c.state) for c in e.compactions('events')]}, "
            f"directories {top_names(fs, loc)}") from None
    assert e.read("events") == expected
    # a major compaction on request: one base, everything else cleaned
    e.insert("events", rows(range(7)))
    expected = e.read("events")
    # (the initiator may still have one of its own queued: Hive 4 refuses a second request
    # for an object with a compaction initiated, working or ready for cleaning, so the
    # request waits for it to be cleaned)
    wait_until(lambda: all(c.state not in ("initiated", "working", "ready for cleaning")
                           for c in e.compactions("events")),
               timeout=120, what="the initiator's compactions on S3 to finish")
    cid = e.compact("events", MAJOR)
    e.wait_state(cid, ("succeeded",), timeout=60)
    wait_until(lambda: len(top_names(fs, loc)) == 1, timeout=60, what="cleaning after major")
    assert top_names(fs, loc)[0].startswith("base_")
    assert e.read("events") == expected


def test_basic_cycle_on_azure(hms_factory, azurite):
    """Azurite (npm): database and table at abfs:// locations, writes and reads through
    orc_acid, a requested major compaction with cleaning, drop table deleting the blobs."""
    azurite.create_container("lake")
    hms = hms_factory({**azurite.options(), **FAST, "hive.compactor.initiator.on": "false"})
    c = hms.client()
    db_loc = azurite.location("lake", "sales.db")
    c.create_database(T.Database(name="sales", description="", parameters={},
                                 locationUri=db_loc))
    fs, _ = filesystem_for(db_loc, azurite.options())
    e = S3Engine(c, fs, db="sales")
    loc = e.create("orders")
    assert loc == f"{db_loc}/orders"
    for i in range(3):
        e.insert("orders", rows(range(10 * i, 10 * i + 10)))
    e.aborted_insert("orders", rows(range(900, 905)))
    expected = e.read("orders")
    assert [r[1] for r in expected] == list(range(30))
    cid = e.compact("orders", MAJOR)
    e.wait_state(cid, ("succeeded",), timeout=60)
    wait_until(lambda: len(top_names(fs, loc)) == 1, timeout=60, what="cleaning on Azure")
    assert top_names(fs, loc)[0].startswith("base_0000004_v")
    assert e.read("orders") == expected
    c.drop_table("sales", "orders", True)
    assert "orders" not in top_names(fs, db_loc)
