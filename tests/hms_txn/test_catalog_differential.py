"""Differential test of the partition and table calls hms-txn gained for issue 28, against
the Java metastore 2.3 in PySpark's jars (the calls 2.3 has): one sequence in the Hive 2.3
dialect (plain database names, no catalog fields) against both servers; answers and
exceptions, with their messages, must be the same.

Where Hive 4 (the specification) answers differently from 2.3, the step is listed in
``HIVE4_DIFFERS`` with the reason, and the test checks that 2.3 answers what is written
there and that we answer as Hive 4 does.

The Java metastore takes 30-60 s to start, so one instance serves the whole module.
"""

from __future__ import annotations

import shutil

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_sd, make_table
from tests.support.postgres import free_port
from tests.support.requirements import require, require_module
from tests.support.differential import paired_outcomes

pytestmark = pytest.mark.javahms

KEYS = (("region", "string"), ("day", "int"))
LOAD_DONE = T.PartitionEventType.LOAD_DONE


@pytest.fixture(scope="module")
def java_hms(tmp_path_factory):
    require(shutil.which("java") is not None, "java is not installed")
    require_module("pyspark")
    from hms_bench.javahms import start_java_metastore
    server = start_java_metastore(free_port(), str(tmp_path_factory.mktemp("javahms")))
    yield server
    server.stop()


def _rel(location: str | None) -> str | None:
    """A location below the database's directory (the warehouses differ)."""
    if location is None:
        return None
    marker = "/diff.db"
    return location[location.index(marker):] if marker in location else location


def _specs(specs) -> list:
    out = []
    for spec in specs:
        if spec.sharedSDPartitionSpec is not None:
            parts = [(p.values, p.relativePath) for p in spec.sharedSDPartitionSpec.partitions]
            kind = ("shared", _rel(spec.sharedSDPartitionSpec.sd.location))
        else:
            parts = [(p.values, _rel(p.sd.location)) for p in spec.partitionList.partitions]
            kind = ("list",)
        out.append((spec.dbName, spec.tableName, _rel(spec.rootPath), kind, parts))
    return out


def _parts(parts) -> list:
    return sorted((p.dbName, p.tableName, p.values, _rel(p.sd.location) if p.sd else None)
                  for p in parts)


def run_sequence(c) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []

    def step(name, fn):
        try:
            value = fn()
        except T.TApplicationException as err:  # pragma: no cover - reported as a mismatch
            value = ("TApplicationException", err.type, err.message)
        except Exception as err:  # noqa: BLE001 - the outcome is what we compare
            value = (type(err).__name__, getattr(err, "message", str(err)))
        out.append((name, value))
        return value

    c.create_database(T.Database(name="diff", description="", parameters={}))
    for name in ("src", "dst"):
        c.create_table(make_table("diff", name, keys=KEYS, params={"k": name}))
    c.create_table(make_table("diff", "other", keys=KEYS, cols=(("x", "int"),),
                              params={"k": "src"}))
    table = c.get_table("diff", "src")
    for region, day in (("eu", "1"), ("eu", "2"), ("us", "1")):
        c.add_partition(T.Partition(dbName="diff", tableName="src", values=[region, day],
                                    sd=make_sd(location=f"{table.sd.location}/region={region}/day={day}"),
                                    parameters={}))

    def names(tbl):
        return c.get_partition_names("diff", tbl, -1)

    # partition specs
    step("pspec all", lambda: _specs(c.get_partitions_pspec("diff", "src", -1)))
    step("pspec max 2", lambda: _specs(c.get_partitions_pspec("diff", "src", 2)))
    step("pspec missing table", lambda: _specs(c.get_partitions_pspec("diff", "nope", -1)))
    step("specs by filter", lambda: _specs(c.get_part_specs_by_filter(
        "diff", "src", 'region = "eu"', -1)))
    step("specs by bad filter", lambda: c.get_part_specs_by_filter("diff", "src", "region ==", -1))
    listed = T.PartitionSpec(dbName="diff", tableName="src", rootPath=table.sd.location,
                             partitionList=T.PartitionListComposingSpec(partitions=[
                                 T.Partition(dbName="diff", tableName="src", values=["fr", "1"],
                                             sd=make_sd(location=f"{table.sd.location}/region=fr/day=1"),
                                             parameters={})]))
    step("add pspec list", lambda: c.add_partitions_pspec([listed]))
    shared = T.PartitionSpec(dbName="diff", tableName="src", rootPath=table.sd.location,
                             sharedSDPartitionSpec=T.PartitionSpecWithSharedSD(
                                 sd=make_sd(location=table.sd.location), partitions=[
                                     T.PartitionWithoutSD(values=["jp", "1"], parameters={},
                                                          relativePath="/region=jp/day=1")]))
    step("add pspec shared", lambda: c.add_partitions_pspec([shared]))
    step("add pspec again", lambda: c.add_partitions_pspec([listed]))
    step("add pspec empty", lambda: c.add_partitions_pspec([]))
    step("jp partition", lambda: _parts([c.get_partition("diff", "src", ["jp", "1"])]))
    step("names after pspec", lambda: names("src"))
    # rename
    new = c.get_partition("diff", "src", ["jp", "1"])    # what Hive's client sends
    new.values = ["jp", "2"]
    step("rename", lambda: c.rename_partition("diff", "src", ["jp", "1"], new))
    step("renamed", lambda: _parts([c.get_partition("diff", "src", ["jp", "2"])]))
    step("rename missing", lambda: c.rename_partition("diff", "src", ["zz", "1"], new))
    # exchange
    step("exchange eu", lambda: _parts(c.exchange_partitions(
        {"region": "eu"}, "diff", "src", "diff", "dst")))
    step("names src after exchange", lambda: names("src"))
    step("names dst after exchange", lambda: names("dst"))
    step("dst partition", lambda: _parts([c.get_partition("diff", "dst", ["eu", "1"])]))
    step("exchange nothing", lambda: c.exchange_partitions(
        {"region": "eu"}, "diff", "src", "diff", "dst"))
    step("exchange other schema", lambda: c.exchange_partitions(
        {"region": "us"}, "diff", "src", "diff", "other"))
    step("exchange dest missing", lambda: c.exchange_partitions(
        {"region": "us"}, "diff", "src", "diff", "nope"))
    step("exchange one", lambda: c.exchange_partition(
        {"region": "us", "day": "1"}, "diff", "src", "diff", "dst"))
    step("names dst at end", lambda: names("dst"))
    # columns
    step("fields", lambda: [(f.name, f.type) for f in c.get_fields("diff", "src")])
    step("schema", lambda: [(f.name, f.type) for f in c.get_schema("diff", "src")])
    step("fields missing table", lambda: c.get_fields("diff", "nope"))
    # table names by filter
    # (2.3 answers in creation order, hms-txn in name order: compared as sets)
    step("filter param =", lambda: sorted(c.get_table_names_by_filter(
        "diff", 'hive_filter_field_params__k = "src"', -1)))
    step("filter param <>", lambda: sorted(c.get_table_names_by_filter(
        "diff", 'hive_filter_field_params__k <> "src"', -1)))
    step("filter owner", lambda: sorted(c.get_table_names_by_filter(
        "diff", 'hive_filter_field_owner__ = "tester"', -1)))
    step("filter owner max 0", lambda: c.get_table_names_by_filter(
        "diff", 'hive_filter_field_owner__ = "tester"', 0))
    step("filter no db name", lambda: c.get_table_names_by_filter(
        "", 'hive_filter_field_owner__ = "tester"', -1))
    # partition marks
    spec = {"region": "fr", "day": "1"}
    step("marked before", lambda: c.isPartitionMarkedForEvent("diff", "src", spec, LOAD_DONE))
    step("mark", lambda: c.markPartitionForEvent("diff", "src", spec, LOAD_DONE))
    step("marked after", lambda: c.isPartitionMarkedForEvent("diff", "src", spec, LOAD_DONE))
    step("marked other", lambda: c.isPartitionMarkedForEvent(
        "diff", "src", {"region": "fr", "day": "2"}, LOAD_DONE))
    step("mark missing table", lambda: c.markPartitionForEvent("diff", "nope", spec, LOAD_DONE))
    step("mark short spec", lambda: c.markPartitionForEvent(
        "diff", "src", {"region": "fr"}, LOAD_DONE))
    step("mark wrong key", lambda: c.markPartitionForEvent(
        "diff", "src", {"region": "fr", "hour": "1"}, LOAD_DONE))
    # drop by names, append by name
    step("drop_partitions_req names", lambda: _parts(c.drop_partitions_req(T.DropPartitionsRequest(
        dbName="diff", tblName="src", parts=T.RequestPartsSpec(names=["region=fr/day=1"]),
        deleteData=True, needResult=True)).partitions))
    step("append by name", lambda: _parts([c.append_partition_by_name(
        "diff", "src", "region=kr/day=3")]))
    # types
    typ = T.Type(name="point", type1="int", type2="int",
                 fields=[T.FieldSchema("x", "int", None)])
    step("create type", lambda: c.create_type(typ))
    step("create type again", lambda: c.create_type(typ))
    step("get type", lambda: c.get_type("point"))
    step("get type all", lambda: c.get_type_all("point"))
    step("drop type", lambda: c.drop_type("point"))
    step("get dropped type", lambda: c.get_type("point"))
    # file metadata
    step("file metadata", lambda: c.get_file_metadata(T.GetFileMetadataRequest([1, 2])))
    step("file metadata by expr", lambda: c.get_file_metadata_by_expr(
        T.GetFileMetadataByExprRequest([1], b"x")))
    step("cache file metadata", lambda: c.cache_file_metadata(
        T.CacheFileMetadataRequest("diff", "src")))
    step("put file metadata", lambda: c.put_file_metadata(T.PutFileMetadataRequest([1], [b"x"])))
    step("clear file metadata", lambda: c.clear_file_metadata(T.ClearFileMetadataRequest([1])))
    return out


# Steps whose exception messages are Java internals (an ANTLR parser error, the toString
# of a whole Partition): the exception type is compared, not the text.
TYPE_ONLY = {"specs by bad filter", "add pspec again"}

# step -> (why Hive 4 answers differently, what 2.3 answers, what Hive 4 and we answer)
HIVE4_DIFFERS: dict[str, tuple[str, object, object]] = {
    "pspec missing table": (
        "Hive 4's get_table_core names the catalog",
        ("NoSuchObjectException", "diff.nope table not found"),
        ("NoSuchObjectException", "hive.diff.nope table not found")),
    "fields missing table": (
        "Hive 4's get_table_core names the catalog",
        ("UnknownTableException", "diff.nope table not found"),
        ("UnknownTableException", "hive.diff.nope table not found")),
    "exchange nothing": (
        "Hive 4 checks that the spec matches a partition before moving anything; 2.3 goes "
        "on to move the directory, which the first exchange already moved",
        ("MetaException", "Got exception: java.io.IOException Cannot rename the source "
                          "path. The destination path already exists."),
        ("MetaException", "No partition is found with the values {region=eu} for the "
                          "table src")),
    "exchange dest missing": (
        "Hive 4 checks both tables exist; 2.3 fails with a NullPointerException",
        ("TApplicationException", 6, "Internal error processing exchange_partitions"),
        ("MetaException", "The destination table hive.diff.nope not found")),
}


@pytest.mark.parametrize("backend", ["sqlite"])
def test_same_answers_as_java_metastore(java_hms, hms):
    mismatches = []
    for name, mine, java in paired_outcomes(run_sequence, hms.port, java_hms.port):
        if name in HIVE4_DIFFERS:
            _, java_answer, hive4_answer = HIVE4_DIFFERS[name]
            if (java, mine) != (java_answer, hive4_answer):
                mismatches.append(f"{name} (Hive 4 differs): ours={mine!r} java={java!r}")
        elif name in TYPE_ONLY:
            if not (isinstance(mine, tuple) and isinstance(java, tuple) and mine[0] == java[0]):
                mismatches.append(f"{name} (type only): ours={mine!r} java={java!r}")
        elif mine != java:
            mismatches.append(f"{name}: ours={mine!r} java={java!r}")
    assert not mismatches, "\n".join(mismatches)
