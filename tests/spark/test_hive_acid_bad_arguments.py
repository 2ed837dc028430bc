"""Issue 30: ``hive_acid``'s bad arguments end in a HiveAcidError naming the argument (not a
KeyError or a raw Thrift exception), and change nothing in the metastore. Table-driven:
each case is a call and its exact message."""

from __future__ import annotations

import pytest

from hms_txn.clients.acid.metastore import HiveAcidError

pytestmark = pytest.mark.spark


def _create(buckets=None, bucket_by=()):
    def call(spark, hive_acid, table):
        hive_acid.create_table(spark, table, "id INT, v STRING", buckets=buckets,
                               bucket_by=bucket_by)
    return call


CASES = [
    ("buckets=0", _create(buckets=0), "buckets must be a positive number of buckets, not 0"),
    ("buckets=-2", _create(buckets=-2), "buckets must be a positive number of buckets, not -2"),
    ("bucket_by unknown", _create(buckets=2, bucket_by=["nope"]),
     "bucket_by: ['nope'] are not data columns of {table} (its data columns: ['id', 'v'])"),
    ("bucket_by without buckets", _create(bucket_by=["id"]),
     "bucket_by needs buckets (the number of buckets)"),
    ("drop_table of a missing table", lambda spark, h, table: h.drop_table(
        spark, table, if_exists=False),
     "table {table} does not exist (drop_table with if_exists=False)"),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_arguments_name_the_argument(acid_spark, ms, tname, call, message):
    from spark import hive_acid
    db, name = tname.split(".")
    before = ms.call("get_all_tables", db)
    with pytest.raises(HiveAcidError) as err:
        call(acid_spark, hive_acid, tname)
    assert str(err.value) == message.format(table=tname)
    assert ms.call("get_all_tables", db) == before and name not in before


def test_an_unknown_column_in_columns_is_named(acid_spark, ms, tname):
    from spark import hive_acid
    hive_acid.create_table(acid_spark, tname, "id INT, v STRING")
    with pytest.raises(Exception) as err:
        acid_spark.read.format("hive_acid").option("columns", "id,nope").load(tname).collect()
    assert (f"HiveAcidError: columns: ['nope'] not in {tname}, whose columns are ['id', 'v']"
            in str(err.value)), str(err.value)[-2000:]
    assert "KeyError" not in str(err.value)
