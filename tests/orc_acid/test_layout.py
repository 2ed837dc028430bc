"""Directory / file name forms and the bucket property codec."""

from __future__ import annotations

import pytest

from orc_acid import layout as L


@pytest.mark.parametrize("name, wid, vis", [
    ("base_0000123", 123, 0), ("base_000123", 123, 0), ("base_567", 567, 0),
    ("base_0000005_v0000900", 5, 900), ("base_00002_v12345", 2, 12345),
    ("base_1234567890", 1234567890, 0),
])
def test_parse_base(name, wid, vis):
    b = L.parse_base(name)
    assert (b.write_id, b.visibility_txn_id) == (wid, vis)
    assert L.parse_base("/tmp/tbl/" + name) == b


@pytest.mark.parametrize("name", ["base_01.txt", "base_01_02", "base_", "basex_1", "delta_1_1"])
def test_parse_base_rejects(name):
    assert L.parse_base(name) is None


@pytest.mark.parametrize("name, lo, hi, stmt, vis, delete", [
    ("delta_000005_000006", 5, 6, None, 0, False),
    ("delete_delta_000005_000006", 5, 6, None, 0, True),
    ("delta_0000100_0000200_0007", 100, 200, 7, 0, False),
    ("delta_0000006_0000006_00001", 6, 6, 1, 0, False),
    ("delta_0000001_0000005_v01000", 1, 5, None, 1000, False),
    ("delete_delta_0000003_0000003_0001_v0000009", 3, 3, 1, 9, True),
    ("delta_10000001_10000001_0000", 10000001, 10000001, 0, 0, False),
])
def test_parse_delta(name, lo, hi, stmt, vis, delete):
    d = L.parse_delta(name)
    assert (d.min_write_id, d.max_write_id, d.statement_id, d.visibility_txn_id,
            d.is_delete) == (lo, hi, stmt, vis, delete)


def test_formats():
    assert L.format_base(200) == "base_0000200"
    assert L.format_base(1234567890) == "base_1234567890"
    assert L.format_base(5, 17) == "base_0000005_v0000017"
    assert L.format_delta(100, 200, 0) == "delta_0000100_0000200_0000"
    assert L.format_delta(100, 200) == "delta_0000100_0000200"
    assert L.format_delta(100, 200, -1) == "delta_0000100_0000200"
    assert L.format_delta(100, 200, 7) == "delta_0000100_0000200_0007"
    assert L.format_delete_delta(1, 10) == "delete_delta_0000001_0000010"
    assert L.format_delete_delta(1, 10, 5) == "delete_delta_0000001_0000010_0005"
    assert L.format_delta(1234567880, 1234567890, 0) == "delta_1234567880_1234567890_0000"
    assert L.format_delta(3, 3, 1, 42) == "delta_0000003_0000003_0001_v0000042"
    assert L.format_bucket_file(23) == "bucket_00023"
    assert L.format_bucket_file(1, 2) == "bucket_00001_2"
    assert L.format_original_file(1) == "000001_0"
    assert L.format_original_file(123) == "000123_0"
    assert L.format_original_file(0, 0, 2) == "000000_0_copy_2"
    with pytest.raises(L.LayoutError):
        L.format_delta(5, 4)


@pytest.mark.parametrize("name", [
    "base_0000200", "base_0000005_v0000017", "delta_0000100_0000200_0007",
    "delta_0000001_0000005", "delete_delta_0000001_0000001_0000_v0000003"])
def test_round_trip_names(name):
    parsed = L.parse_base(name) or L.parse_delta(name)
    assert parsed.name == name


def test_bucket_and_original_files():
    assert L.parse_bucket_file("bucket_00001") == L.ParsedBucketName(1, None)
    assert L.parse_bucket_file("bucket_00001_3") == L.ParsedBucketName(1, 3)
    assert L.parse_bucket_file("bucket_00001_flush_length") is None
    assert L.is_side_file("bucket_00001_flush_length")
    assert L.side_file_for("bucket_00000") == "bucket_00000_flush_length"
    assert L.parse_original_file("000123_0") == L.ParsedOriginalName(123, 0, None)
    assert L.parse_original_file("000000_0_copy_1") == L.ParsedOriginalName(0, 0, 1)
    assert L.parse_original_file("random") is None
    assert L.bucket_id_of_file("000002_0_copy_3") == 2
    assert L.bucket_id_of_file("bucket_00007_1") == 7
    assert L.bucket_id_of_file("part-0001.orc") == 0
    for hidden in ["_done", ".hive-staging", "_tmp.base_1", "_orc_acid_version"]:
        assert L.is_hidden(hidden)
    assert not L.is_hidden("000000_0")


@pytest.mark.parametrize("bucket, stmt, value", [
    (0, 0, 536870912), (1, 0, 536936448), (0, 1, 536870913), (4095, 4095, 805244927),
])
def test_bucket_codec_v1(bucket, stmt, value):
    assert L.encode_bucket(bucket, stmt) == value
    assert L.decode_bucket(value) == (1, bucket, stmt)
    assert L.decode_writer_id(value) == bucket and L.decode_statement_id(value) == stmt


def test_bucket_codec_v0_and_limits():
    assert L.decode_bucket(7) == (0, 7, 0)
    assert L.encode_bucket(7, version=0) == 7
    with pytest.raises(L.LayoutError):
        L.encode_bucket(4096)
    with pytest.raises(L.LayoutError):
        L.encode_bucket(0, 4096)
    with pytest.raises(L.LayoutError):
        L.decode_bucket(2 << 29)


@pytest.mark.parametrize("location, path", [
    ("file:/w/t", "/w/t"),
    ("file:///w/t", "/w/t"),
    ("file://localhost/w/t", "/w/t"),
    ("/w/t", "/w/t"),
    # a partition's escapes are part of its directory's name, not URI encoding
    ("file:/w/t/ds=2024-01-01 10%3A00%2Fx", "/w/t/ds=2024-01-01 10%3A00%2Fx"),
    ("file:/w/t/k=a%23b?c", "/w/t/k=a%23b?c"),
    ("hdfs://nn:8020/w/t", None),
    ("s3a://bucket/w/t", None),
    ("file://otherhost/w/t", None),
    ("", None),
    (None, None),
])
def test_location_path(location, path):
    assert L.location_path(location) == path
