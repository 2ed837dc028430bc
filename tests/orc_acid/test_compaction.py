"""orc_acid.compaction: minor and major compaction output (names, events, footer metadata),
visibility through the compaction transaction, the compactor's watermark, cleanable dirs."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pytest

import orc_acid
from orc_acid import compaction as C
from orc_acid.layout import encode_bucket
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
VIS = 100     # the compaction transaction


def rows(ids, tag="r"):
    ids = np.asarray(list(ids), dtype=np.int64)
    return pa.table({"id": ids, "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def txns(committed=True, aborted=False):
    """A reader's ValidTxnList: the compaction txn VIS committed, open or aborted."""
    if committed:
        return ValidTxnList(200)
    if aborted:
        return ValidTxnList(200, aborted_ids=[VIS])
    return ValidTxnList(200, open_ids=[VIS])


def dirs(path):
    return sorted(n for n in os.listdir(path))


def read(path, wids, vt, **kw):
    t = orc_acid.read_table(str(path), wids, valid_txns=vt, with_row_id=True, **kw)
    rid = t.column("ROW__ID").to_pylist()
    return sorted(zip([(r["writeid"], r["bucketid"], r["rowid"]) for r in rid],
                      t.column("id").to_pylist(), t.column("name").to_pylist()))


def events_of(path):
    return po.ORCFile(str(path)).read()


def build(tmp_path):
    """base_1 (overwrite), inserts 2..7 over two buckets, deletes in 4 and 6, write id 5
    aborted, write id 8 open (its delta exists but no reader sees it)."""
    t = tmp_path / "t"
    orc_acid.write_base(str(t), 1, 0, rows(range(0, 50)))
    for w in (2, 3, 4, 5, 6, 7, 8):
        orc_acid.write_delta(str(t), w, 0, 0, rows(range(w * 100, w * 100 + 20)))
        orc_acid.write_delta(str(t), w, 0, 1, rows(range(w * 100 + 50, w * 100 + 55)))
    # write 4 deletes rows 0..9 of the base; write 6 deletes 3 rows of write 2 (bucket 0)
    b0 = encode_bucket(0, 0)
    orc_acid.write_delete_delta(str(t), 4, 1, pa.table({
        "originalTransaction": [1] * 10, "bucket": [b0] * 10, "rowId": list(range(10))}),
        row_schema=SCHEMA)
    orc_acid.write_delete_delta(str(t), 6, 1, pa.table({
        "originalTransaction": [2, 2, 2], "bucket": [b0] * 3, "rowId": [0, 5, 7]}),
        row_schema=SCHEMA)
    wids = ValidWriteIdList("d.t", 8, open_ids=[8], aborted_ids=[5])
    return t, wids


def test_compactor_write_ids_never_cross_lowest_open():
    w = ValidWriteIdList("d.t", 20, open_ids=[9, 15], aborted_ids=[3, 12])
    cw = C.compactor_write_ids(w)
    assert (cw.high_watermark, cw.exceptions, cw.aborted_ids) == (8, (3,), (3,))
    assert cw.min_open is None
    assert str(C.compactor_write_ids(ValidWriteIdList("d.t", 7))) == "d.t:7:9223372036854775807::"


def test_minor_compaction(tmp_path):
    t, wids = build(tmp_path)
    before = read(t, wids, txns())
    inputs = set(dirs(t))
    plan = C.plan_compaction(str(t), "minor", wids, visibility_txn_id=VIS, valid_txns=txns(False))
    assert plan.outputs == ("delta_0000002_0000007_v0000100",
                            "delete_delta_0000002_0000007_v0000100")
    assert (plan.min_write_id, plan.max_write_id) == (2, 7)
    st = C.stage_compaction(plan)
    # staged: hidden, nothing visible changed
    assert [n for n in dirs(t) if n not in inputs] == [os.path.basename(st.staging_dir)]
    assert os.path.basename(st.staging_dir).startswith(".hms-compactor-v0000100-")
    assert read(t, wids, txns(False)) == before
    C.publish_compaction(st)
    assert set(dirs(t)) - inputs == set(plan.outputs)
    # published but the compaction txn still open (or aborted): invisible
    assert read(t, wids, txns(False)) == before
    assert read(t, wids, txns(False, aborted=True)) == before
    # committed: same rows, now served by the compacted deltas
    assert read(t, wids, txns()) == before
    snap = orc_acid.get_acid_state(str(t), wids, txns())
    assert [d.path for d in snap.current] == list(plan.outputs[::-1])
    assert snap.base.path == "base_0000001"

    out = t / plan.outputs[0]
    assert sorted(os.listdir(out)) == ["_orc_acid_version", "bucket_00000", "bucket_00001"]
    assert (out / "_orc_acid_version").read_bytes() == b"2"
    # events unchanged, aborted write 5 dropped, open write 8 not included, sorted by ROW__ID
    for b in (0, 1):
        ev = events_of(out / f"bucket_0000{b}")
        expect = pa.concat_tables([events_of(t / f"delta_{w:07d}_{w:07d}_0000" / f"bucket_0000{b}")
                                   for w in (2, 3, 4, 6, 7)])
        assert ev.to_pylist() == expect.to_pylist()
        keys = list(zip(*(ev.column(c).to_pylist()
                          for c in ("originalTransaction", "bucket", "rowId"))))
        assert keys == sorted(keys)
        md = po.ORCFile(str(out / f"bucket_0000{b}")).metadata
        n = ev.num_rows
        assert md[b"hive.acid.stats"] == f"{n},0,0".encode()
        assert md[b"hive.acid.key.index"] == f"{keys[-1][0]},{keys[-1][1]},{keys[-1][2]};".encode()
        assert md[b"hive.acid.version"] == b"2"
    dd = events_of(t / plan.outputs[1] / "bucket_00000")
    assert dd.column("operation").to_pylist() == [2] * 13
    assert dd.column("currentTransaction").to_pylist() == [4] * 10 + [6] * 3
    assert dd.column("row").null_count == 13
    assert po.ORCFile(str(t / plan.outputs[1] / "bucket_00000")).metadata[b"hive.acid.stats"] \
        == b"0,0,13"

    # the cleaner may remove exactly the compacted inputs and the aborted delta
    clean = C.cleanable(str(t), plan.max_write_id, wids, txns())
    expected = {f"delta_{w:07d}_{w:07d}_0000" for w in (2, 3, 4, 5, 6, 7)} | \
        {"delete_delta_0000004_0000004_0001", "delete_delta_0000006_0000006_0001"}
    assert set(clean) == expected
    for n in clean:
        import shutil
        shutil.rmtree(t / n)
    assert read(t, wids, txns()) == before
    assert dirs(t) == ["base_0000001", "delete_delta_0000002_0000007_v0000100",
                       "delta_0000002_0000007_v0000100", "delta_0000008_0000008_0000"]
    # once write 8 commits, readers see it on top of the compacted delta
    after8 = read(t, ValidWriteIdList("d.t", 8, aborted_ids=[5]), txns())
    assert len(after8) == len(before) + 25


def test_major_compaction(tmp_path):
    t, wids = build(tmp_path)
    before = read(t, wids, txns())
    res = C.compact_major(str(t), wids, visibility_txn_id=VIS, valid_txns=txns(False))
    assert res.outputs == ("base_0000007_v0000100",)
    assert res.rows == len(before) and res.files == 2
    base = t / "base_0000007_v0000100"
    assert sorted(os.listdir(base)) == ["_metadata_acid", "_orc_acid_version", "bucket_00000",
                                       "bucket_00001"]
    assert json.loads((base / "_metadata_acid").read_text()) == \
        {"thisFileVersion": "0", "dataFormat": "compacted"}
    assert read(t, wids, txns(False)) == before
    assert read(t, wids, txns()) == before                     # ROW__IDs preserved
    snap = orc_acid.get_acid_state(str(t), wids, txns())
    assert snap.base.path == base.name and snap.current == ()
    ev = events_of(base / "bucket_00000")
    assert set(ev.column("operation").to_pylist()) == {0}
    assert ev.column("originalTransaction").to_pylist() == ev.column("currentTransaction").to_pylist()
    assert 5 not in set(ev.column("originalTransaction").to_pylist())   # aborted
    assert 8 not in set(ev.column("originalTransaction").to_pylist())   # open: never crossed
    keys = list(zip(*(ev.column(c).to_pylist() for c in ("originalTransaction", "bucket", "rowId"))))
    assert keys == sorted(keys)
    md = po.ORCFile(str(base / "bucket_00000")).metadata
    assert md[b"hive.acid.stats"] == f"{ev.num_rows},0,0".encode()
    clean = set(C.cleanable(str(t), 7, wids, txns()))
    assert clean == set(dirs(t)) - {base.name, "delta_0000008_0000008_0000"}
    # write 8 commits later: base_7 + delta_8
    w8 = ValidWriteIdList("d.t", 8, aborted_ids=[5])
    assert len(read(t, w8, txns())) == len(before) + 25
    # a reader whose snapshot predates write 7 cannot use the compacted base (needs history)
    old = ValidWriteIdList("d.t", 6, aborted_ids=[5])
    assert len(read(t, old, txns())) < len(before)
    for n in clean:
        import shutil
        shutil.rmtree(t / n)
    with pytest.raises(orc_acid.NotEnoughHistoryError):
        read(t, old, txns())


def test_major_compaction_of_original_files(tmp_path):
    t = tmp_path / "t"
    t.mkdir()
    po.write_table(rows(range(10)), str(t / "000000_0"))
    po.write_table(rows(range(10, 14)), str(t / "000001_0"))
    orc_acid.write_delta(str(t), 1, 0, 0, rows(range(100, 103)))
    orc_acid.write_delete_delta(str(t), 2, 0, pa.table({
        "originalTransaction": [0], "bucket": [encode_bucket(0, 0)], "rowId": [4]}),
        row_schema=SCHEMA)
    wids = ValidWriteIdList("d.t", 2)
    before = read(t, wids, txns())
    assert len(before) == 16
    res = C.compact_major(str(t), wids, visibility_txn_id=VIS, valid_txns=txns(False))
    assert res.outputs == ("base_0000002_v0000100",)
    assert read(t, wids, txns()) == before
    assert set(C.cleanable(str(t), 2, wids, txns())) == {
        "000000_0", "000001_0", "delta_0000001_0000001_0000", "delete_delta_0000002_0000002_0000"}


def test_nothing_to_compact(tmp_path):
    t = tmp_path / "t"
    orc_acid.write_delta(str(t), 1, 0, 0, rows(range(3)))
    w = ValidWriteIdList("d.t", 1)
    assert C.plan_compaction(str(t), "minor", w, visibility_txn_id=VIS) is None
    res = C.compact_major(str(t), w, visibility_txn_id=VIS)      # one delta: major still pays
    assert res.outputs == ("base_0000001_v0000100",)
    assert C.plan_compaction(str(t), "major", w, visibility_txn_id=101,
                             valid_txns=txns()) is None            # only a base now
    # a compacted twin pair is not compacted again into the same range
    t2 = tmp_path / "t2"
    orc_acid.write_update(str(t2), 1, 0, 0, pa.table({
        "originalTransaction": [1], "bucket": [encode_bucket(0, 0)], "rowId": [0]}),
        rows([1]), row_schema=SCHEMA)
    res = C.compact_minor(str(t2), w, visibility_txn_id=VIS)
    assert res.outputs == ("delta_0000001_0000001_v0000100", "delete_delta_0000001_0000001_v0000100")
    assert C.plan_compaction(str(t2), "minor", w, visibility_txn_id=101, valid_txns=txns()) is None


def test_streaming_delta_straddling_the_watermark_caps_the_compaction(tmp_path):
    t = tmp_path / "t"
    for w in (1, 2):
        orc_acid.write_delta(str(t), w, 0, 0, rows(range(w * 10, w * 10 + 3)))
    # a streaming delta_3_6 (no statement id) holding write ids 3..6; 5 still open
    ev = []
    for w in (3, 4, 5, 6):
        ev.append(pa.table({"operation": pa.array([0, 0], pa.int32()),
                            "originalTransaction": pa.array([w, w], pa.int64()),
                            "bucket": pa.array([encode_bucket(0, 0)] * 2, pa.int32()),
                            "rowId": pa.array([0, 1], pa.int64()),
                            "currentTransaction": pa.array([w, w], pa.int64()),
                            "row": pa.StructArray.from_arrays(
                                [pa.array([w * 10, w * 10 + 1], pa.int64()),
                                 pa.array(["s", "s"])], fields=list(SCHEMA))}))
    from orc_acid.writer import ensure_acid_dir as _ensure_dir_with_version, write_acid_file
    d = t / "delta_0000003_0000006"
    _ensure_dir_with_version(str(d))
    write_acid_file(str(d / "bucket_00000"), pa.concat_tables(ev), inserts=8)
    wids = ValidWriteIdList("d.t", 6, open_ids=[5])
    plan = C.plan_compaction(str(t), "minor", wids, visibility_txn_id=VIS)
    assert plan.max_write_id == 2 and plan.outputs == ("delta_0000001_0000002_v0000100",)
    before = read(t, wids, txns())
    C.publish_compaction(C.stage_compaction(plan))
    assert read(t, wids, txns()) == before
    assert C.plan_compaction(str(t), "major", wids, visibility_txn_id=101).max_write_id == 2


def test_schema_evolution_conformed_by_position(tmp_path):
    t = tmp_path / "t"
    old = pa.schema([("_col0", pa.int32())])
    orc_acid.write_delta(str(t), 1, 0, 0, pa.table({"_col0": pa.array([1, 2], pa.int32())}),
                         row_schema=old)
    orc_acid.write_delta(str(t), 2, 0, 0, rows([3]))
    w = ValidWriteIdList("d.t", 2)
    before = read(t, w, None)
    res = C.compact_minor(str(t), w, visibility_txn_id=VIS)
    out = events_of(t / res.outputs[0] / "bucket_00000")
    assert out.schema.field("row").type == pa.struct(list(SCHEMA))
    assert out.column("row").to_pylist() == [{"id": 1, "name": None}, {"id": 2, "name": None},
                                             {"id": 3, "name": "r3"}]
    assert read(t, w, txns()) == before


def test_stale_staging_and_aborted_output_are_cleanable(tmp_path):
    t, wids = build(tmp_path)
    vt = ValidTxnList(200, aborted_ids=[VIS, 101])
    before = read(t, wids, vt)
    plan = C.plan_compaction(str(t), "major", wids, visibility_txn_id=VIS)
    st = C.stage_compaction(plan)                                  # worker died here
    staging = os.path.basename(st.staging_dir)
    assert C.staging_txn_id(staging) == VIS
    plan2 = C.plan_compaction(str(t), "minor", wids, visibility_txn_id=101)
    C.publish_compaction(C.stage_compaction(plan2))                # ...or here, txn 101
    assert read(t, wids, vt) == before                            # aborted output: invisible
    got = C.cleanable(str(t), 0, wids, vt, txn_finished=lambda x: x in (VIS, 101))
    assert set(got) == {staging, *plan2.outputs}
    assert set(C.cleanable(str(t), 0, wids, vt, txn_finished=lambda x: False)) == \
        set(plan2.outputs)


def test_dir_size_ignores_hidden_files(tmp_path):
    orc_acid.write_delta(str(tmp_path), 1, 0, 0, rows(range(5)))
    d = tmp_path / "delta_0000001_0000001_0000"
    assert C.dir_size(str(d)) == os.path.getsize(d / "bucket_00000")
