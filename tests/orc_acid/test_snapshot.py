"""Directory selection (getAcidState) against the vectors of Hive's TestAcidUtils and Impala's
AcidUtilsTest (inputs and expected outputs re-expressed as listings), plus our own cases."""

from __future__ import annotations

import pytest

from orc_acid.snapshot import NotEnoughHistoryError, get_acid_state, select_snapshot

MAX = "9223372036854775807"
ALL_TXNS_1000 = "1000:" + MAX + "::"   # ValidReadTxnList(no exceptions, hwm 1000)


def run(listing, wids, txns=None):
    s = select_snapshot(listing, wids, txns)
    return {
        "base": s.base_path,
        "current": [d.path for d in s.current],
        "originals": list(s.original_files),
        "obsolete": list(s.obsolete),
        "aborted": set(s.aborted),
        "snap": s,
    }


def files(*dirs, name="bucket_0"):
    return [f"{d}/{name}" for d in dirs]


# -- Hive TestAcidUtils ------------------------------------------------------------------------

def test_hive_original():
    r = run(["000000_0", "000000_0_copy_1", "000000_0_copy_2", "000001_1", "000002_0",
             "random", "_done", "subdir/000000_0"], f"tbl:100:{MAX}:")
    assert r["base"] is None and r["current"] == [] and r["obsolete"] == []
    assert r["originals"] == ["000000_0", "000000_0_copy_1", "000000_0_copy_2", "000001_1",
                              "000002_0", "random", "subdir/000000_0"]


def test_hive_original_deltas():
    r = run(["000000_0", "000001_1", "000002_0", "random", "_done", "subdir/000000_0"]
            + files("delta_025_025", "delta_029_029", "delta_025_030", "delta_050_100",
                    "delta_101_101"), f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["base"] is None
    assert r["obsolete"] == ["delta_025_025", "delta_029_029"]
    assert r["originals"] == ["000000_0", "000001_1", "000002_0", "random", "subdir/000000_0"]
    assert r["current"] == ["delta_025_030", "delta_050_100"]
    d = r["snap"].current[0]
    assert (d.min_write_id, d.max_write_id) == (25, 30)


def test_hive_base_deltas():
    r = run(files("base_5", "base_10", "base_49", "delta_025_025", "delta_029_029",
                  "delta_025_030", "delta_050_105", "delta_90_120"),
            f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["base"] == "base_49"
    assert set(r["obsolete"]) == {"base_5", "base_10", "delta_025_030", "delta_025_025",
                                  "delta_029_029"}
    assert r["originals"] == []
    assert r["current"] == ["delta_050_105"]


def test_hive_base_0_with_acid_version_file():
    r = run(["base_0/bucket_0", "base_0/_orc_acid_version"], "", ALL_TXNS_1000)
    assert r["base"] == "base_0"
    assert r["obsolete"] == [] and r["originals"] == [] and r["current"] == []
    assert r["snap"].base.files == ("base_0/bucket_0",)
    assert r["snap"].base.has_acid_version_file


def test_hive_obsolete_originals():
    r = run(["base_10/bucket_0", "base_5/bucket_0", "000000_0", "000001_1"],
            f"tbl:150:{MAX}:", ALL_TXNS_1000)
    assert r["base"] == "base_10"
    assert r["obsolete"] == ["base_5", "000000_0", "000001_1"]


def test_hive_overlapping_delta():
    r = run(files("delta_0000063_63", "delta_000062_62", "delta_00061_61", "delta_40_60",
                  "delta_0060_60", "delta_052_55", "base_50"), f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["base"] == "base_50"
    assert r["obsolete"] == ["delta_052_55", "delta_0060_60"]
    assert r["current"] == ["delta_40_60", "delta_00061_61", "delta_000062_62",
                            "delta_0000063_63"]


def test_hive_overlapping_delta_with_statement_ids():
    r = run(files("delta_0000063_63_0", "delta_000062_62_0", "delta_000062_62_3",
                  "delta_00061_61_0", "delta_40_60", "delta_0060_60_1", "delta_0060_60_4",
                  "delta_0060_60_7", "delta_052_55", "delta_058_58", "base_50"),
            f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["base"] == "base_50"
    assert r["obsolete"] == ["delta_052_55", "delta_058_58", "delta_0060_60_1",
                             "delta_0060_60_4", "delta_0060_60_7"]
    assert r["current"] == ["delta_40_60", "delta_00061_61_0", "delta_000062_62_0",
                            "delta_000062_62_3", "delta_0000063_63_0"]


def test_hive_deltas_with_open_txn_in_read():
    r = run(files("delta_1_1", "delta_2_5"), "tbl:100:4:4", "1000:55:50:")
    assert r["current"] == ["delta_1_1", "delta_2_5"]


def test_hive_deltas_with_open_txn_in_read_statement_ids():
    r = run(files("delta_1_1", "delta_2_5", "delta_4_4_1", "delta_4_4_3", "delta_101_101_1"),
            "tbl:100:4:4", "1000:55:50:")
    assert r["current"] == ["delta_1_1", "delta_2_5"]


def test_hive_base_with_delete_deltas():
    r = run(files("base_5", "base_10", "base_49", "delta_025_025", "delta_029_029",
                  "delete_delta_029_029", "delta_025_030", "delete_delta_025_030",
                  "delta_050_105", "delete_delta_050_105", "delete_delta_110_110"),
            f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["base"] == "base_49"
    assert set(r["obsolete"]) == {"base_5", "base_10", "delete_delta_025_030", "delta_025_030",
                                  "delta_025_025", "delete_delta_029_029", "delta_029_029"}
    assert r["originals"] == []
    assert r["current"] == ["delete_delta_050_105", "delta_050_105"]
    assert [d.path for d in r["snap"].delete_deltas] == ["delete_delta_050_105"]
    assert [d.path for d in r["snap"].deltas] == ["delta_050_105"]


def test_hive_overlapping_delta_and_delete_delta():
    r = run(files("delta_0000063_63", "delta_000062_62", "delta_00061_61",
                  "delete_delta_00064_64", "delta_40_60", "delete_delta_40_60", "delta_0060_60",
                  "delta_052_55", "delete_delta_052_55", "base_50"),
            f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["base"] == "base_50"
    assert r["obsolete"] == ["delete_delta_052_55", "delta_052_55", "delta_0060_60"]
    assert r["current"] == ["delete_delta_40_60", "delta_40_60", "delta_00061_61",
                            "delta_000062_62", "delta_0000063_63", "delete_delta_00064_64"]


def test_hive_minor_compacted_delta_hides_delete_delta_inside():
    r = run(files("delta_40_60", "delete_delta_50_50"), f"tbl:100:{MAX}:", ALL_TXNS_1000)
    assert r["obsolete"] == ["delete_delta_50_50"]
    assert r["current"] == ["delta_40_60"]


def test_hive_delete_deltas_with_open_txn_in_read():
    r = run(files("delta_1_1", "delta_2_5", "delete_delta_2_5", "delete_delta_3_3",
                  "delta_4_4_1", "delta_4_4_3", "delta_101_101_1"),
            "tbl:100:4:4", "1000:55:50:")
    assert r["current"] == ["delta_1_1", "delete_delta_2_5", "delta_2_5"]


# -- Impala AcidUtilsTest (expected file sets -> selected dirs / originals) ----------------------

def selected_files(r):
    s = r["snap"]
    out = set(s.original_files)
    if s.base:
        out |= set(s.base.files)
    for d in s.current:
        out |= set(d.files)
    return out


COMMON = ["base_01.txt", "post_upgrade.txt", "base_0000005/", "base_0000005/abc.txt",
          "base_0000005/0000/", "base_0000005/0000/abc.txt",
          "_tmp.base_0000005/000000_0.manifest"]
DELTAS_6_9 = ["delta_0000006_0000006_0000/", "delta_0000006_0000006_0000/000000_0",
              "delta_0000007_0000007_0000/", "delta_0000007_0000007_0000/000000_0",
              "delta_0000008_0000008_0000/", "delta_0000008_0000008_0000/000000_0",
              "delta_0000009_0000009_0000/", "delta_0000009_0000009_0000/000000_0",
              "delta_0000009_0000009_0000/0000/def.txt"]


def test_impala_base_predicate():
    r = run(COMMON + ["abc/", "abc/base_0000006/", "base_00000100/def.txt"],
            "default.test:10:1234:1,2,3")
    assert selected_files(r) == {"base_0000005/abc.txt", "base_0000005/0000/abc.txt"}
    assert r["base"] == "base_0000005"


def test_impala_open_transactions():
    r = run(COMMON + DELTAS_6_9, "default.test:10:6:6,7,8:")
    assert selected_files(r) == {"base_0000005/abc.txt", "base_0000005/0000/abc.txt",
                                 "delta_0000009_0000009_0000/000000_0",
                                 "delta_0000009_0000009_0000/0000/def.txt"}


def test_impala_in_progress_compaction():
    r = run(["base_01.txt", "post_upgrade.txt", "base_0000005_v900/",
             "base_0000005_v900/abc.txt", "base_0000005_v900/0000/",
             "base_0000005_v900/0000/abc.txt", "base_0000008_v1000/",
             "base_0000008_v1000/abc.txt"] + DELTAS_6_9,
            "default.test:10:10::", "1100:1000:1000:")
    assert r["base"] == "base_0000005_v900"
    assert selected_files(r) == {"base_0000005_v900/abc.txt", "base_0000005_v900/0000/abc.txt",
                                 "delta_0000006_0000006_0000/000000_0",
                                 "delta_0000007_0000007_0000/000000_0",
                                 "delta_0000008_0000008_0000/000000_0",
                                 "delta_0000009_0000009_0000/000000_0",
                                 "delta_0000009_0000009_0000/0000/def.txt"}
    assert r["aborted"] == set()   # txn 1000 is open, not aborted


def test_impala_aborted_compaction():
    r = run(["base_01.txt", "post_upgrade.txt", "base_0000005_v900/",
             "base_0000005_v900/abc.txt", "base_0000005_v900/0000/",
             "base_0000005_v900/0000/abc.txt", "base_0000007_v950/",
             "base_0000007_v950/abc.txt", "base_0000008_v1000/",
             "base_0000008_v1000/abc.txt"] + DELTAS_6_9,
            "default.test:10:10::", "1100:1100::1000")
    assert selected_files(r) == {"base_0000007_v950/abc.txt",
                                 "delta_0000008_0000008_0000/000000_0",
                                 "delta_0000009_0000009_0000/000000_0",
                                 "delta_0000009_0000009_0000/0000/def.txt"}
    assert r["aborted"] == {"base_0000008_v1000"}
    assert "base_0000005_v900" in r["obsolete"]


def test_impala_aborted_transactions():
    r = run(COMMON + DELTAS_6_9, "default.test:10:1337::7,8,9")
    assert selected_files(r) == {"base_0000005/abc.txt", "base_0000005/0000/abc.txt",
                                 "delta_0000006_0000006_0000/000000_0"}
    assert r["aborted"] == {"delta_0000007_0000007_0000", "delta_0000008_0000008_0000",
                            "delta_0000009_0000009_0000"}


def test_impala_post_compaction_base():
    r = run(["base_0000003_v0003217/", "base_0000003_v0003217/000000_0",
             "delta_0000001_0000001_0000/", "delta_0000001_0000001_0000/000000_0",
             "delta_0000002_0000002_0000/", "delta_0000002_0000002_0000/000000_0",
             "delta_0000003_0000003_0000/", "delta_0000003_0000003_0000/000000_0"],
            f"test_acid_compaction_676f9a30.tt:3:{MAX}::", "")
    assert selected_files(r) == {"base_0000003_v0003217/000000_0"}
    assert len(r["obsolete"]) == 3


def test_impala_delta_predicate():
    r = run(["delta_000005_0000005/", "delta_000005_0000005/abc.txt",
             "delta_000005_0000005_0000/", "delta_000005_0000005_0000/abc.txt",
             "delta_000006_0000020/", "delta_000006_0000020/def.txt", "delta_000005.txt"],
            "default.test:10:1234:1,2,3")
    assert selected_files(r) == {"delta_000005_0000005/abc.txt",
                                 "delta_000006_0000020/def.txt", "delta_000005.txt"}
    assert "delta_000005_0000005_0000" in r["obsolete"]


def test_impala_acid_state_filter():
    r = run(["base_0000009/", "base_0000009/abc.txt", "delta_000005_000005_0000/",
             "delta_000005_000005_0000/lmn.txt", "base_0000010/", "base_0000010/00000_0",
             "base_0000010/00001_0", "delta_0000012_0000012_0000/",
             "delta_0000012_0000012_0000/0000_0", "delta_0000012_0000012_0000/0000_1"], "")
    assert selected_files(r) == {"base_0000010/00000_0", "base_0000010/00001_0",
                                 "delta_0000012_0000012_0000/0000_0",
                                 "delta_0000012_0000012_0000/0000_1"}


def test_impala_acid_state_no_base():
    listing = ["base_01.txt", "post_upgrade.txt", "delta_000005_000005_0000/",
               "delta_000005_000005_0000/lmn.txt", "delta_0000012_0000012_0000/",
               "delta_0000012_0000012_0000/0000_0", "delta_0000012_0000012_0000/0000_1"]
    r = run(listing + ["base_000010/"], "")
    assert r["base"] == "base_000010"
    assert selected_files(r) == {"delta_0000012_0000012_0000/0000_0",
                                 "delta_0000012_0000012_0000/0000_1"}
    r = run(listing, "")
    assert r["base"] is None
    assert selected_files(r) == {"base_01.txt", "post_upgrade.txt",
                                 "delta_000005_000005_0000/lmn.txt",
                                 "delta_0000012_0000012_0000/0000_0",
                                 "delta_0000012_0000012_0000/0000_1"}


def test_impala_minor_compaction_all_txns_valid():
    r = run(["base_0000005/", "base_0000005/abc.txt", "delta_0000006_0000006_v01000/00000",
             "delta_0000007_0000007_v01000/00000", "delta_0000006_0000007_v01000/00000"],
            "default.test:10:1234:1,2,3", "")
    assert selected_files(r) == {"base_0000005/abc.txt", "delta_0000006_0000007_v01000/00000"}
    # minor compaction of a multi-statement transaction
    r = run(["base_0000005/", "base_0000005/abc.txt", "delta_0000006_0000006_00001/00000",
             "delta_0000006_0000006_00002/00000", "delta_0000006_0000006_00003/00000",
             "delta_0000006_0000006_v01000/00000", "delta_0000006_0000006_v01000/00001"],
            "default.test:10:1234:", "")
    assert selected_files(r) == {"base_0000005/abc.txt", "delta_0000006_0000006_v01000/00000",
                                 "delta_0000006_0000006_v01000/00001"}
    # disjoint minor compacted deltas
    disjoint = [f"delta_000000{i}_000000{i}/00000" for i in range(1, 8)] + [
        "delta_0000001_0000003_v00100/00000", "delta_0000004_0000005_v00101/00000",
        "delta_0000001_0000005_v00102/00000", "delta_0000006_0000007_v00123/00000",
        "delta_0000006_0000007_v00123/00001"]
    r = run(disjoint, "default.test:10:1234:", "")
    assert selected_files(r) == {"delta_0000001_0000005_v00102/00000",
                                 "delta_0000006_0000007_v00123/00000",
                                 "delta_0000006_0000007_v00123/00001"}
    # the compacted range contains an aborted write id
    r = run(["delta_0000001_0000001/00000", "delta_0000002_0000002/00000",
             "delta_0000003_0000003/00000", "delta_0000001_0000003_v01000/00000"],
            "default.test:10:5::2", "")
    assert selected_files(r) == {"delta_0000001_0000003_v01000/00000"}
    assert r["aborted"] == {"delta_0000002_0000002"}


def test_impala_in_progress_minor_compactions():
    r = run(["base_0000005/", "base_0000005/abc.txt", "delta_0000006_0000006/00000",
             "delta_0000007_0000007/00000", "delta_0000006_0000007_v100/00000"],
            "default.test:10:1234:1,2,3", "90:90::")
    assert selected_files(r) == {"base_0000005/abc.txt", "delta_0000006_0000006/00000",
                                 "delta_0000007_0000007/00000"}
    r = run(["base_0000005/", "base_0000005/abc.txt", "delta_0000006_0000006_00001/00000",
             "delta_0000006_0000006_00002/00000", "delta_0000006_0000006_00003/00000",
             "delta_0000006_0000006_v100/00000", "delta_0000006_0000006_v100/00001"],
            "default.test:10:1234:", "110:100:100:")
    assert selected_files(r) == {"base_0000005/abc.txt", "delta_0000006_0000006_00001/00000",
                                 "delta_0000006_0000006_00002/00000",
                                 "delta_0000006_0000006_00003/00000"}
    disjoint = [f"delta_000000{i}_000000{i}/00000" for i in range(1, 8)] + [
        "delta_0000001_0000003_v00100/00000", "delta_0000004_0000005_v00101/00000",
        "delta_0000001_0000005_v00102/00000", "delta_0000006_0000007_v00123/00000",
        "delta_0000006_0000007_v00123/00001"]
    r = run(disjoint, "default.test:10:1234:", "130:102:102:")
    assert selected_files(r) == {"delta_0000001_0000003_v00100/00000",
                                 "delta_0000004_0000005_v00101/00000",
                                 "delta_0000006_0000007_v00123/00000",
                                 "delta_0000006_0000007_v00123/00001"}


def test_impala_minor_compaction_before_base():
    r = run(["delta_000005_000008_0000/", "delta_000005_000008_0000/abc.txt", "base_000010/",
             "base_000010/0000_0", "delta_0000012_0000012_0000/",
             "delta_0000012_0000012_0000/0000_0", "delta_0000012_0000012_0000/0000_1"],
            "default.test:20:15::")
    assert selected_files(r) == {"base_000010/0000_0", "delta_0000012_0000012_0000/0000_0",
                                 "delta_0000012_0000012_0000/0000_1"}


def test_impala_deletes_before_base():
    r = run(["delta_000004_000004_0000/", "delta_000004_000004_0000/0000",
             "delete_delta_000005_000005_0000/", "delete_delta_000005_000005_0000/0000",
             "base_000010/", "base_000010/0000_0", "delta_0000012_0000012_0000/",
             "delta_0000012_0000012_0000/0000_0", "delta_0000012_0000012_0000/0000_1"],
            "default.test:20:15::")
    assert selected_files(r) == {"base_000010/0000_0", "delta_0000012_0000012_0000/0000_0",
                                 "delta_0000012_0000012_0000/0000_1"}
    assert r["snap"].delete_deltas == ()


# -- our own cases ---------------------------------------------------------------------------------

def test_not_enough_history_for_compacted_base():
    with pytest.raises(NotEnoughHistoryError) as ei:
        select_snapshot(files("base_0000010_v0000020", "delta_0000011_0000011_0000"),
                        "db.t:12:5:5:", "30:" + MAX + "::")
    assert "base_0000010_v0000020" in str(ei.value)
    assert ei.value.min_open == "5"


def test_not_enough_history_for_hive3_compacted_base_with_metadata_file():
    listing = ["base_0000010/bucket_00000", "base_0000010/_metadata_acid"]
    with pytest.raises(NotEnoughHistoryError):
        select_snapshot(listing, "db.t:12:5:5:")
    # an INSERT OVERWRITE base (no marker) only needs its own write id committed
    r = run(["base_0000010/bucket_00000"], "db.t:12:5:5:")
    assert r["base"] == "base_0000010"
    r = run(["base_0000010/bucket_00000"], "db.t:12:5:5,10:")
    assert r["base"] is None


def test_open_insert_overwrite_base_is_invisible():
    listing = files("delta_0000001_0000001_0000", "base_0000002", "delta_0000003_0000003_0000",
                    name="bucket_00000")
    r = run(listing, "db.t:3:2:2:")
    assert r["base"] is None
    assert r["current"] == ["delta_0000001_0000001_0000", "delta_0000003_0000003_0000"]
    r = run(listing, f"db.t:3:{MAX}::")
    assert r["base"] == "base_0000002"
    assert r["current"] == ["delta_0000003_0000003_0000"]
    assert "delta_0000001_0000001_0000" in r["obsolete"]


def test_aborted_insert_overwrite_base():
    r = run(files("delta_0000001_0000001_0000", "base_0000002"), f"db.t:2:{MAX}::2")
    assert r["base"] is None
    assert r["aborted"] == {"base_0000002"}
    assert r["current"] == ["delta_0000001_0000001_0000"]


def test_compacted_base_beats_insert_overwrite_base_of_same_write_id():
    r = run(files("base_0000005", "base_0000005_v0000009"), f"db.t:5:{MAX}::", "10:" + MAX + "::")
    assert r["base"] == "base_0000005_v0000009"
    assert r["obsolete"] == ["base_0000005"]
    assert r["snap"].base.is_compacted


def test_visibility_of_delete_delta_and_side_files_and_hidden_entries():
    listing = ["delta_0000001_0000002/bucket_00000",
               "delta_0000001_0000002/bucket_00000_flush_length",
               "delta_0000001_0000002/_orc_acid_version",
               "delta_0000001_0000002/.bucket_00001.tmp",
               "delete_delta_0000003_0000003_v0000050/bucket_00000",
               ".hive-staging_123/x", "_tmp.delta_0000004_0000004/bucket_00000"]
    r = run(listing, f"db.t:4:{MAX}::", "60:" + MAX + "::50")
    assert r["current"] == ["delta_0000001_0000002"]
    d = r["snap"].current[0]
    assert d.files == ("delta_0000001_0000002/bucket_00000",)
    assert d.side_files == ("delta_0000001_0000002/bucket_00000_flush_length",)
    assert d.has_acid_version_file and d.statement_id is None
    assert r["aborted"] == {"delete_delta_0000003_0000003_v0000050"}
    assert r["originals"] == []


def test_get_acid_state_reads_local_dirs(tmp_path):
    (tmp_path / "base_0000003").mkdir()
    (tmp_path / "base_0000003" / "bucket_00000").write_bytes(b"x")
    (tmp_path / "base_0000003" / "_metadata_acid").write_text(
        '{"thisFileVersion":"0","dataFormat":"compacted"}')
    (tmp_path / "delta_0000004_0000004_0000").mkdir()
    (tmp_path / "delta_0000004_0000004_0000" / "bucket_00000").write_bytes(b"x")
    with pytest.raises(NotEnoughHistoryError):   # write id 2 open: compacted base_3 unusable
        get_acid_state(str(tmp_path), "db.t:4:2:2:")
    s = get_acid_state("file://" + str(tmp_path), f"db.t:4:{MAX}::")
    assert s.base_path == "base_0000003" and s.base.is_compacted
    assert [d.path for d in s.deltas] == ["delta_0000004_0000004_0000"]
    (tmp_path / "base_0000003" / "_metadata_acid").write_text(
        '{"thisFileVersion":"0","dataFormat":"truncated"}')
    s = get_acid_state(str(tmp_path), "db.t:4:2:2:")  # not compacted: an IOW base of write 3
    assert s.base_path == "base_0000003" and not s.base.is_compacted
