"""orc_acid on object stores: a real S3-compatible server (moto's, started by the suite) and
Azurite, through ``orc_acid.fs``; every result compared with the same steps on local disk."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import orc_acid
from orc_acid import compaction
from orc_acid.fs import FileSystemError, filesystem_for, resolve, s3_options, scheme_of

MAX = "9223372036854775807"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def wids(hwm: int, *, aborted=(), opened=()) -> str:
    exc = sorted(set(aborted) | set(opened))
    low = min(opened) if opened else MAX
    return f"db.t:{hwm}:{low}:{','.join(map(str, exc))}:{','.join(map(str, sorted(aborted)))}"


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)),
                     "name": [f"n{i}" for i in range(start, start + n)]}, schema=SCHEMA)


def run_cycle(loc: str, fs) -> dict:
    """Insert, delete, update, overwrite, minor and major compaction: what a reader sees."""
    seen = {}
    orc_acid.write_delta(loc, 1, 0, 0, rows(50), filesystem=fs)
    orc_acid.write_delta(loc, 2, 0, 0, rows(30, 50), filesystem=fs)
    seen["insert"] = orc_acid.read_table(loc, wids(2), filesystem=fs, with_row_id=True)
    ids = seen["insert"].filter(pa.compute.less(seen["insert"]["id"], 5))
    orc_acid.write_delete_delta(loc, 3, 0, ids.select(["ROW__ID"]), row_schema=SCHEMA,
                                filesystem=fs)
    seen["delete"] = orc_acid.read_table(loc, wids(3), filesystem=fs)
    t = orc_acid.read_table(loc, wids(3), filesystem=fs, with_row_id=True)
    upd = t.filter(pa.compute.equal(t["id"], 10))
    orc_acid.write_update(loc, 4, 0, 0, upd.select(["ROW__ID"]),
                          pa.table({"id": [10], "name": ["ten"]}, schema=SCHEMA),
                          row_schema=SCHEMA, filesystem=fs)
    seen["update"] = orc_acid.read_table(loc, wids(4), filesystem=fs)
    orc_acid.write_delta(loc, 5, 0, 0, rows(5, 100), filesystem=fs)   # aborted write id 5
    seen["aborted"] = orc_acid.read_table(loc, wids(5, aborted=[5]), filesystem=fs)
    minor = compaction.compact(loc, "minor", wids(5, aborted=[5]), visibility_txn_id=20,
                               filesystem=fs)
    seen["minor_outputs"] = minor.outputs
    committed = "30:" + MAX + "::"
    seen["after_minor"] = orc_acid.read_table(loc, wids(5, aborted=[5]), filesystem=fs,
                                              valid_txns=committed)
    major = compaction.compact(loc, "major", wids(5, aborted=[5]), visibility_txn_id=21,
                               filesystem=fs)
    seen["major_outputs"] = major.outputs
    seen["after_major"] = orc_acid.read_table(loc, wids(5, aborted=[5]), filesystem=fs,
                                              valid_txns=committed)
    seen["cleanable"] = compaction.cleanable(loc, 5, wids(5, aborted=[5]), committed,
                                             filesystem=fs)
    orc_acid.write_base(loc, 6, 0, rows(3, 500), filesystem=fs)
    seen["overwrite"] = orc_acid.read_table(loc, wids(6, aborted=[5]), filesystem=fs,
                                            valid_txns=committed)
    return seen


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], pa.Table):
            assert a[k].sort_by("id").equals(b[k].sort_by("id")), k
        else:
            assert a[k] == b[k], k


def test_scheme_names_and_options():
    assert scheme_of("file:/w/t") == scheme_of("/w/t") == "file"
    assert scheme_of("s3a://b/w/t") == "s3a"
    assert resolve("s3a://bkt/w/t", pafs.LocalFileSystem())[1] == "bkt/w/t"
    assert resolve("abfss://c@acct.dfs.core.windows.net/w/t",
                   pafs.LocalFileSystem())[1] == "c/w/t"
    assert resolve("hdfs://nn:8020/w/t", pafs.LocalFileSystem())[1] == "/w/t"
    kw = s3_options({"fs.s3a.endpoint": "http://h:9000", "fs.s3a.path.style.access": "true",
                     "fs.s3a.access.key": "A", "fs.s3a.bucket.b1.access.key": "B1",
                     "fs.s3a.secret.key": "S", "fs.s3a.endpoint.region": "eu-west-1"}, "b1")
    assert kw["endpoint_override"] == "h:9000" and kw["scheme"] == "http"
    assert kw["force_virtual_addressing"] is False        # path style
    assert kw["access_key"] == "B1" and kw["region"] == "eu-west-1"
    assert s3_options({"fs.s3a.endpoint": "h:9000"}, "b")["force_virtual_addressing"] is True
    with pytest.raises(FileSystemError, match="no file system for scheme"):
        filesystem_for("ftp://h/x")
    with pytest.raises(FileSystemError, match="container@account"):
        filesystem_for("abfs://acct.dfs.core.windows.net/x")


def test_s3_cycle_equals_local(moto_s3, s3_bucket, tmp_path):
    loc = f"s3a://{s3_bucket}/wh/t"
    fs, path = filesystem_for(loc, moto_s3.options())
    on_s3 = run_cycle(loc, fs)
    on_disk = run_cycle(str(tmp_path / "t"), None)
    same(on_s3, on_disk)
    assert on_s3["after_major"].num_rows == 75 and on_s3["aborted"].num_rows == 75
    # the files are Hive's layout, under their final names, nothing staged or temporary left
    names = orc_acid.list_table_dir(loc, fs)
    assert "delta_0000001_0000001_0000/bucket_00000" in names
    assert "delta_0000001_0000001_0000/_orc_acid_version" in names
    assert not [n for n in names if n.startswith(".") or "/." in n]
    # the location as a URI with the file system chosen from the options
    assert orc_acid.read_table(loc, wids(6, aborted=[5]), filesystem=fs).num_rows == 3


def test_s3_compaction_that_does_not_commit_leaves_only_an_aborted_directory(
        moto_s3, s3_bucket):
    loc = f"s3a://{s3_bucket}/t"
    fs, _ = filesystem_for(loc, moto_s3.options())
    for w in (1, 2, 3):
        orc_acid.write_delta(loc, w, 0, 0, rows(10, 10 * w), filesystem=fs)
    plan = compaction.plan_compaction(loc, "major", wids(3), visibility_txn_id=9, filesystem=fs)
    st = compaction.stage_compaction(plan)
    # written under its final name, invisible while transaction 9 is open
    assert "base_0000003_v0000009/bucket_00000" in orc_acid.list_table_dir(loc, fs)
    assert orc_acid.read_table(loc, wids(3), filesystem=fs,
                               valid_txns="9:9:9:").num_rows == 30
    compaction.discard_staged(st)
    assert not [n for n in orc_acid.list_table_dir(loc, fs) if n.startswith("base_")]
    # an aborted compaction's output the cleaner finds (the process died before discarding)
    st = compaction.stage_compaction(plan)
    assert compaction.cleanable(loc, 3, wids(3), "10:" + MAX + ":9:9",
                                filesystem=fs) == ["base_0000003_v0000009"]


def test_s3_compaction_task_rerun_replaces_the_earlier_upload(moto_s3, s3_bucket):
    """A task shipped without its file system (an executor builds its own) and re-run after
    an attempt that uploaded its file: the upload is replaced by the same bytes."""
    import dataclasses
    import pickle
    loc = f"s3a://{s3_bucket}/rerun"
    fs, _ = filesystem_for(loc, moto_s3.options())
    for w in (1, 2, 3):
        orc_acid.write_delta(loc, w, 0, 0, rows(10, 10 * w), filesystem=fs)
    orc_acid.write_delete_delta(loc, 4, 0, pa.table({
        "originalTransaction": [2], "bucket": [536870912], "rowId": [3]}), row_schema=SCHEMA,
        filesystem=fs)
    plan = compaction.plan_compaction(loc, "major", wids(4), visibility_txn_id=9, filesystem=fs)
    staged = compaction.begin_staging(plan)
    (task,) = compaction.plan_tasks(staged)
    shipped = pickle.loads(pickle.dumps(dataclasses.replace(task, filesystem=None)))
    first = compaction.run_task(shipped, filesystem=fs)
    path = f"{staged.staging_dir}/{first.files[0]}"
    with fs.open_input_file(path) as fh:
        once = fh.read()
    compaction.record_task(staged, compaction.run_task(shipped, filesystem=fs))
    with fs.open_input_file(path) as fh:
        assert fh.read() == once
    compaction.publish_compaction(staged)
    assert orc_acid.read_table(loc, wids(4), filesystem=fs, valid_txns="10:" + MAX + "::"
                               ).num_rows == 29


def test_hive_written_fixtures_read_the_same_from_s3(moto_s3, s3_bucket, hive_fixtures_dir,
                                                    place_fixture):
    fs, _ = filesystem_for(f"s3a://{s3_bucket}", moto_s3.options())
    cases = [("streaming.orc", "delta_0000001_0000002/bucket_00000", "db.t:2:" + MAX + "::"),
             ("full_acid_schema_but_no_acid_version.orc", "delta_0000001_0000003/bucket_00000",
              "db.t:3:" + MAX + "::"),
             ("alltypes_non_acid.orc", "000000_0", "db.t:1:" + MAX + "::")]
    for i, (name, rel, w) in enumerate(cases):
        local = place_fixture(name, rel)
        loc = f"s3a://{s3_bucket}/f{i}"
        with fs.open_output_stream(f"{s3_bucket}/f{i}/{rel}") as out:
            out.write((hive_fixtures_dir / name).read_bytes())
        expect = orc_acid.read_table(str(local), w, with_row_id=name != "alltypes_non_acid.orc")
        got = orc_acid.read_table(loc, w, filesystem=fs,
                                  with_row_id=name != "alltypes_non_acid.orc")
        assert got.num_rows > 0 and got.equals(expect), name
        (local / rel).unlink()


def test_azure_cycle_equals_local(azurite, tmp_path):
    azurite.create_container("warehouse")
    loc = azurite.location("warehouse", "t")
    fs, _ = filesystem_for(loc, azurite.options())
    same(run_cycle(loc, fs), run_cycle(str(tmp_path / "t"), None))
