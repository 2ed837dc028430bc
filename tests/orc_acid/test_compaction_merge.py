"""The streaming compaction (k-way merge of sorted event files, batch by batch) writes
byte for byte what the whole-file compaction wrote (tests/orc_acid/compaction_oracle.py):
over random histories (inserts, deletes, updates, overwrites, multi-write-id deltas with
aborted and open ids, statement ids, original files, files of many stripes, positional
``_colN`` schemas, a row deleted twice, Hive's newest-first order of such duplicates) and
over files Hive wrote; and it holds a bounded number of batches whatever the input size."""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import orc_acid
from orc_acid import compaction as C
from orc_acid.event_merge import EventOrderError
from orc_acid.layout import encode_bucket, format_delete_delta, format_delta
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList
from orc_acid.writer import OP_DELETE, WriterOptions, acid_schema, ensure_acid_dir, \
    write_acid_file
from tests.orc_acid.compaction_oracle import compact_whole, output_files

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
OLD = pa.schema([("_col0", pa.int32())])          # a file written before a column was added
SMALL = WriterOptions(stripe_size=1024, batch_size=4)   # inputs of many stripes
VIS = 900


def data(n, start, old=False):
    ids = np.arange(start, start + n)
    if old:
        return pa.table({"_col0": pa.array(ids, pa.int32())}, schema=OLD)
    names = [None if i % 7 == 3 else f"n{i}" for i in ids]
    return pa.table({"id": ids, "name": names}, schema=SCHEMA)


def events(keys, cur, op, row_type, rows=None):
    n = len(keys)
    o, b, r = (np.asarray([k[i] for k in keys], dtype=dt)
               for i, dt in ((0, np.int64), (1, np.int32), (2, np.int64)))
    row = rows if rows is not None else pa.nulls(n, type=row_type)
    return pa.Table.from_arrays([pa.array(np.full(n, op, np.int32)), pa.array(o), pa.array(b),
                                 pa.array(r), pa.array(np.asarray(cur, np.int64)), row],
                                schema=acid_schema(pa.schema(list(row_type))))


def write_range_dir(table, name, bucket_files):
    d = os.path.join(table, name)
    ensure_acid_dir(d)
    for bucket_id, t in bucket_files.items():
        write_acid_file(os.path.join(d, f"bucket_{bucket_id:05d}"), t, options=SMALL,
                        inserts=t.num_rows if name.startswith("delta") else 0,
                        deletes=t.num_rows if name.startswith("delete") else 0)


OPS = st.tuples(
    st.sampled_from(["insert"] * 3 + ["delete"] * 3 + ["update", "overwrite", "range_insert",
                                                       "range_delete", "range_delete"]),
    st.lists(st.sampled_from(["commit"] * 12 + ["abort"] * 2 + ["open"]),
             min_size=3, max_size=3),                    # outcome of each write id used
    st.integers(0, 2),                                   # bucket
    st.integers(0, 1),                                   # statement id
    st.integers(1, 25),                                  # rows
    st.lists(st.integers(0, 10 ** 6), max_size=8),       # picks of existing rows
    st.booleans())                                       # old schema / newest-first order


def build_history(table, originals, ops):
    """Write the history; returns the table's ValidWriteIdList after it."""
    os.makedirs(table)
    known, counter, status = [], 0, {}
    for i, (bucket, n) in enumerate(originals):
        name = f"{bucket:06d}_0" + ("" if i < 2 else f"_copy_{i}")
        if os.path.exists(os.path.join(table, name)):
            name += "_copy_9"
        po.write_table(data(n, counter), os.path.join(table, name), stripe_size=1024,
                       batch_size=4)
        counter += n
    originals_by_bucket = {}
    for name in sorted(os.listdir(table)):
        b = int(name[:6])
        start = originals_by_bucket.get(b, 0)
        nrows = po.ORCFile(os.path.join(table, name)).nrows
        known += [(0, encode_bucket(b, 0), start + j) for j in range(nrows)]
        originals_by_bucket[b] = start + nrows
    w = 1
    for kind, outcomes, bucket, stmt, n, picks, flag in ops:
        victims = sorted({known[p % len(known)] for p in picks}) if known else []
        if kind in ("range_insert", "range_delete"):
            ids = [w, w + 1, w + 2]
            for x, oc in zip(ids, outcomes):
                status[x] = oc
            if kind == "range_insert":
                keys, rows = [], []
                for x in ids:
                    keys += [(x, encode_bucket(bucket, 0), j) for j in range(n)]
                    rows.append(data(n, counter))
                    counter += n
                if keys:
                    t = pa.concat_tables(rows).combine_chunks()
                    row = pa.StructArray.from_arrays([c.chunk(0) for c in t.columns],
                                                     fields=list(SCHEMA))
                    write_range_dir(table, format_delta(w, w + 2, None), {bucket: events(
                        keys, [k[0] for k in keys], 0, pa.struct(list(SCHEMA)), row)})
                    known += keys
            elif victims:
                # each victim deleted by one or two of the range's write ids; duplicates in
                # Hive's newest-first order when the flag says so
                per_bucket = {}
                for j, v in enumerate(victims):
                    by = sorted({ids[j % 3], ids[(j * 2 + 1) % 3]}, reverse=flag)
                    for x in by:
                        per_bucket.setdefault((v[1] >> 16) & 0xFFF, []).append((v, x))
                event("a row deleted twice in one file, newest first" if flag
                      else "a row deleted twice in one file")
                write_range_dir(table, format_delete_delta(w, w + 2, None), {
                    b: events([v for v, _ in ev], [x for _, x in ev], OP_DELETE,
                              pa.struct(list(SCHEMA))) for b, ev in per_bucket.items()})
            w += 3
            continue
        status[w] = outcomes[0]
        if kind in ("insert", "overwrite") or (kind == "update" and not victims):
            t = data(n, counter, old=flag and kind == "insert")
            counter += n
            if kind == "overwrite":
                orc_acid.write_base(table, w, bucket, t, options=SMALL)
                known = [k for k in known if k[0] >= w]
            else:
                orc_acid.write_delta(table, w, stmt, bucket, t, options=SMALL,
                                     row_schema=OLD if t.schema == OLD else SCHEMA)
            known += [(w, encode_bucket(bucket, stmt), j) for j in range(n)]
        elif victims:
            ids = pa.table({"originalTransaction": [v[0] for v in victims],
                            "bucket": [v[1] for v in victims],
                            "rowId": [v[2] for v in victims]})
            if kind == "delete":
                orc_acid.write_delete_delta(table, w, stmt, ids, row_schema=SCHEMA,
                                            options=SMALL)
            else:
                orc_acid.write_update(table, w, stmt, bucket, ids, data(len(victims), counter),
                                      row_schema=SCHEMA, options=SMALL)
                known += [(w, encode_bucket(bucket, stmt + 1), j) for j in range(len(victims))]
                counter += len(victims)
        w += 1
    return ValidWriteIdList("d.t", w - 1,
                            open_ids=[x for x, s in status.items() if s == "open"],
                            aborted_ids=[x for x, s in status.items() if s == "abort"])


def assert_same_as_whole_file(table, kind, wids, batch_rows, out_batch):
    plan = C.plan_compaction(table, kind, wids, visibility_txn_id=VIS)
    if plan is None:
        return 0
    opts = WriterOptions(stripe_size=1024, batch_size=out_batch)
    staged = C.stage_compaction(plan, options=opts, batch_rows=batch_rows)
    try:
        got = output_files(staged.staging_dir, plan.outputs)
        with tempfile.TemporaryDirectory() as oracle:
            compact_whole(plan, oracle, options=opts)
            expected = output_files(oracle, plan.outputs)
        assert sorted(got) == sorted(expected)
        for name in expected:
            assert got[name] == expected[name], name
    finally:
        C.discard_staged(staged)
    return len(got)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(originals=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 20)), max_size=3),
       ops=st.lists(OPS, min_size=2, max_size=7), batch_rows=st.integers(1, 9),
       out_batch=st.integers(1, 6))
def test_streaming_merge_writes_what_the_whole_file_compaction_wrote(originals, ops,
                                                                     batch_rows, out_batch):
    with tempfile.TemporaryDirectory() as d:
        table = os.path.join(d, "t")
        wids = build_history(table, originals, ops)
        for kind in ("minor", "major"):
            n = assert_same_as_whole_file(table, kind, wids, batch_rows, out_batch)
            event(f"{kind}: {'files compared' if n else 'nothing to compact'}")


# -- files Hive wrote ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trino_fixtures(hive_fixtures_dir):
    return hive_fixtures_dir.parent / "trino-hive-written"


@pytest.mark.parametrize("layout, wids", [
    ({"nationFile25kRowsSortedOnNationKey/bucket_00000": "delta_0000002_0000002_0000/bucket_00000",
      "nation_delete_deltas/delete_delta_0000003_0000003_0000/bucket_00000":
          "delete_delta_0000003_0000003_0000/bucket_00000",
      "nation_delete_deltas/delete_delta_0000004_0000004_0000/bucket_00000":
          "delete_delta_0000004_0000004_0000/bucket_00000"}, "default.nation:4:MAX::"),
    ({f"dummy_id_data_orc/{n}": n for n in ("000000_0", "000001_0", "000002_0",
                                            "000002_0_copy_1", "000002_0_copy_2")}
     | {"dummy_id_data_orc/delete_delta_10000001_10000001_0000/bucket_00000":
        "delete_delta_10000001_10000001_0000/bucket_00000"}, "default.d:10000001:MAX::"),
    ({"fullacidNationTableWithOriginalFiles/000000_0": "000000_0",
      "fullacidNationTableWithOriginalFiles/delete_delta_10000001_10000001_0000/bucket_00000":
          "delete_delta_10000001_10000001_0000/bucket_00000"}, "default.nation:10000001:MAX::"),
    ({"fullacid_delete_delta_test/delete_delta_0000004_0000004_0000/bucket_00000":
      "delete_delta_0000004_0000004_0000/bucket_00000",
      "fullacid_delete_delta_test/delete_delta_0000007_0000007_0000/bucket_00000":
          "delete_delta_0000007_0000007_0000/bucket_00000",
      "acid_version_validation/acid_version_hive_3/00000_0":
          "delta_0000001_0000001_0000/bucket_00002"}, "default.t:9:MAX::"),
], ids=["nation-25k-5-stripes-and-deletes", "original-files-and-copies",
        "original-file-and-delete", "delete-deltas"])
def test_hive_written_files_compact_as_before(trino_fixtures, tmp_path, layout, wids):
    table = tmp_path / "t"
    for src, rel in layout.items():
        (table / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trino_fixtures / src, table / rel)
    wids = wids.replace("MAX", "9223372036854775807")
    before = orc_acid.read_table(str(table), wids, with_row_id=True)
    written = 0
    for kind in ("minor", "major"):
        written += assert_same_as_whole_file(str(table), kind, wids, 1000, 1024)
    assert written
    res = C.compact(str(table), "major", wids, visibility_txn_id=VIS)
    after = orc_acid.read_table(str(table), wids, valid_txns=ValidTxnList(VIS + 1),
                                with_row_id=True)
    key = lambda t: sorted(zip(*(c.to_pylist() for c in t.columns)), key=repr)  # noqa: E731
    assert key(after) == key(before) and res.rows == before.num_rows


def test_hive_streaming_file_with_two_write_ids(place_fixture):
    table = place_fixture("streaming.orc", "delta_0000001_0000002/bucket_00000")
    place_fixture("full_acid_schema_but_no_acid_version.orc", "delta_0000003_0000003_0000/bucket_00001")
    for wids in ("default.s:3:9223372036854775807::2", "default.s:3:9223372036854775807::"):
        for kind in ("minor", "major"):
            assert_same_as_whole_file(str(table), kind, wids, 1, 3)


# -- bounded memory ----------------------------------------------------------------------------

def test_merge_holds_a_few_batches_whatever_the_number_of_files(tmp_path):
    """40 deltas of successive write ids and 4 delete deltas: the merge opens a delta only
    when it reaches its key range, so at most two deltas (one ending, the next starting) and
    the delete files are open at once, each holding one batch."""
    t = str(tmp_path / "t")
    for w in range(1, 41):
        orc_acid.write_delta(t, w, 0, 0, data(500, w * 1000))
    for w in range(41, 45):
        picks = [(x, encode_bucket(0, 0), (x * 37 + w) % 500) for x in range(1, 41, 3)]
        orc_acid.write_delete_delta(t, w, 0, pa.table({
            "originalTransaction": [p[0] for p in picks], "bucket": [p[1] for p in picks],
            "rowId": [p[2] for p in picks]}), row_schema=SCHEMA)
    wids = ValidWriteIdList("d.t", 44)
    for kind in ("minor", "major"):
        plan = C.plan_compaction(t, kind, wids, visibility_txn_id=VIS)
        staged = C.begin_staging(plan)
        (task,) = C.plan_tasks(staged)
        res = C.run_task(task, batch_rows=128)
        assert res.rows == (20000 if kind == "minor" else orc_acid.read_table(t, wids).num_rows)
        # 2 insert deltas + 4 delete deltas open at most, one 128-row batch each
        assert res.max_open_inputs <= 2 + 4
        assert res.max_buffered_rows <= 128 * (2 + 4)
        C.discard_staged(staged)


def test_events_out_of_order_are_refused(tmp_path):
    t = str(tmp_path / "t")
    orc_acid.write_delta(t, 1, 0, 0, data(3, 0))
    d = os.path.join(t, "delta_0000002_0000002_0000")
    ensure_acid_dir(d)
    keys = [(2, encode_bucket(0, 0), r) for r in (0, 2, 1)]
    rows = pa.StructArray.from_arrays([c.chunk(0) for c in data(3, 10).columns],
                                      fields=list(SCHEMA))
    write_acid_file(os.path.join(d, "bucket_00000"),
                    events(keys, [2, 2, 2], 0, pa.struct(list(SCHEMA)), rows), inserts=3)
    before = sorted(os.listdir(t))
    with pytest.raises(EventOrderError, match=r"bucket_00000: events out of .* order at row 2"):
        C.compact(t, "minor", ValidWriteIdList("d.t", 2), visibility_txn_id=VIS)
    assert sorted(os.listdir(t)) == before          # nothing left behind


def test_a_row_deleted_by_several_write_ids_across_files(tmp_path):
    """Runs of one ROW__ID spread over files, in Hive's newest-first order in one of them:
    the merge emits each run whole, sorted by currentTransaction, ties in input order."""
    t = str(tmp_path / "t")
    orc_acid.write_delta(t, 1, 0, 0, data(6, 0))
    row_type = pa.struct(list(SCHEMA))
    b0 = encode_bucket(0, 0)
    write_range_dir(t, format_delete_delta(2, 4, None), {0: events(
        [(1, b0, 1), (1, b0, 1), (1, b0, 1), (1, b0, 4), (1, b0, 4)], [4, 3, 2, 4, 2],
        OP_DELETE, row_type)})
    write_range_dir(t, format_delete_delta(5, 6, None), {0: events(
        [(1, b0, 0), (1, b0, 1), (1, b0, 1), (1, b0, 4)], [5, 6, 5, 6], OP_DELETE, row_type)})
    wids = ValidWriteIdList("d.t", 6, aborted_ids=[3])
    for batch_rows in (1, 2, 100):
        assert assert_same_as_whole_file(t, "minor", wids, batch_rows, 2) == 4   # 2 dirs
    res = C.compact(t, "minor", wids, visibility_txn_id=VIS)
    got = po.ORCFile(os.path.join(t, res.outputs[1], "bucket_00000")).read()
    assert list(zip(got.column("rowId").to_pylist(),
                    got.column("currentTransaction").to_pylist())) == [
        (0, 5), (1, 2), (1, 4), (1, 5), (1, 6), (4, 2), (4, 4), (4, 6)]
