"""ValidTxnList / ValidWriteIdList / ValidTxnWriteIdList: string forms and semantics."""

from __future__ import annotations

import random

import pytest

from orc_acid.valid_ids import (LONG_MAX, RangeResponse, ValidIdListError, ValidTxnList,
                                ValidTxnWriteIdList, ValidWriteIdList)

ALL, SOME, NONE = RangeResponse.ALL, RangeResponse.SOME, RangeResponse.NONE


# -- string forms (fact sheet examples) --------------------------------------------------------

def test_txn_list_no_exceptions_format():
    assert str(ValidTxnList(10)) == "10:9223372036854775807::"
    assert str(ValidTxnList.parse("10:9223372036854775807::")) == "10:9223372036854775807::"


def test_txn_list_open_and_aborted_format():
    v = ValidTxnList(10, open_ids=[5, 7], aborted_ids=[6])
    assert str(v) == "10:5:5,7:6"
    assert v.min_open == 5
    assert v.exceptions == (5, 6, 7)
    assert v.open_ids == (5, 7) and v.aborted_ids == (6,)
    p = ValidTxnList.parse("10:5:5,7:6")
    assert p == v and str(p) == "10:5:5,7:6"


def test_write_id_list_format():
    v = ValidWriteIdList("default.t", 4)
    assert str(v) == "default.t:4:9223372036854775807::"
    assert v.min_open is None
    w = ValidWriteIdList.parse("db.tbl:10:3:3,8:5")
    assert w.table_name == "db.tbl"
    assert w.high_watermark == 10 and w.min_open == 3
    assert w.exceptions == (3, 5, 8)
    assert str(w) == "db.tbl:10:3:3,8:5"


@pytest.mark.parametrize("src, expected", [
    ("10:9223372036854775807", "10:9223372036854775807::"),      # trailing fields omitted
    ("10:9223372036854775807:", "10:9223372036854775807::"),
    ("10:5:5", "10:5:5:"),                                        # no aborted field
    ("10:9223372036854775807::6", "10:9223372036854775807::6"),  # only aborted
    ("10:3:7,3:", "10:3:3,7:"),                                   # ids sorted on write
    ("10:3::", "10:3::"),                                         # stated min open kept
])
def test_txn_list_java_split_forms(src, expected):
    assert str(ValidTxnList.parse(src)) == expected


def test_empty_strings_mean_everything_valid():
    t = ValidTxnList.parse("")
    assert t.high_watermark == LONG_MAX and t.is_valid(123456789)
    assert str(t) == "9223372036854775807:9223372036854775807::"
    w = ValidWriteIdList.parse("")
    assert w.table_name is None and w.is_valid(42)
    assert str(w) == "null:9223372036854775807:9223372036854775807::"


def test_null_table_name():
    assert ValidWriteIdList.parse("NULL:5:9223372036854775807::").table_name is None
    assert str(ValidWriteIdList(None, 5)) == "null:5:9223372036854775807::"


@pytest.mark.parametrize("bad", ["x:1::", "10", "10:abc::", "10:1:1,,2:", "10:1: 3:",
                                 "10:99999999999999999999::"])
def test_bad_txn_lists_raise_naming_the_string(bad):
    with pytest.raises(ValidIdListError) as ei:
        ValidTxnList.parse(bad)
    assert repr(bad) in str(ei.value)


@pytest.mark.parametrize("bad", ["t", "t:1", "t:x:1::", "db:t:5:9223372036854775807::"])
def test_bad_write_id_lists_raise(bad):
    # a ':' inside the table name cannot be represented (Java splits it too)
    with pytest.raises(ValidIdListError):
        ValidWriteIdList.parse(bad)


def test_immutable():
    v = ValidTxnList(5)
    with pytest.raises(AttributeError):
        v.foo = 1
    with pytest.raises(AttributeError):
        v._hwm = 3


# -- semantics ------------------------------------------------------------------------------------

def test_validity_and_aborted():
    w = ValidWriteIdList.parse("t:10:5:5,9:7")
    assert [i for i in range(1, 13) if w.is_valid(i)] == [1, 2, 3, 4, 6, 8, 10]
    assert w.is_aborted(7) and not w.is_aborted(5) and not w.is_aborted(11)
    assert w.is_open(5) and w.is_open(9) and not w.is_open(7)


@pytest.mark.parametrize("lo, hi, valid, aborted", [
    (1, 4, ALL, NONE),
    (1, 5, SOME, NONE),
    (5, 5, NONE, NONE),
    (7, 7, NONE, ALL),
    (6, 8, SOME, SOME),
    (11, 12, NONE, NONE),     # above the high watermark
    (9, 12, SOME, NONE),      # 10 valid, 9 open, 11-12 beyond hwm
    (10, 12, SOME, NONE),
    (5, 9, SOME, SOME),
])
def test_range_responses(lo, hi, valid, aborted):
    w = ValidWriteIdList.parse("t:10:5:5,9:7")
    assert w.range_validity(lo, hi) is valid
    assert w.range_aborted(lo, hi) is aborted


def test_range_validity_matches_brute_force():
    rnd = random.Random(7)
    for _ in range(300):
        hwm = rnd.randint(0, 30)
        ids = rnd.sample(range(1, 35), rnd.randint(0, 8))
        opens = [i for i in ids if rnd.random() < 0.5]
        aborts = [i for i in ids if i not in opens]
        w = ValidWriteIdList("t", hwm, opens, aborts)
        lo = rnd.randint(1, 35)
        hi = rnd.randint(lo, 36)
        valid = [w.is_valid(i) for i in range(lo, hi + 1)]
        # Java counts ids above hwm plus exceptions in range; exceptions above hwm count twice,
        # which never happens in real lists, so the brute force agrees when exceptions <= hwm
        if all(i <= hwm for i in ids):
            expect = ALL if all(valid) else NONE if not any(valid) else SOME
            assert w.range_validity(lo, hi) is expect, (str(w), lo, hi)
        ab = [w.is_aborted(i) for i in range(lo, hi + 1)]
        if hwm >= lo:
            expect = ALL if all(ab) else NONE if not any(ab) else SOME
            assert w.range_aborted(lo, hi) is expect


def test_valid_base_rule():
    w = ValidWriteIdList.parse("t:20:5:5:")
    assert w.is_valid_base(4) and not w.is_valid_base(5) and not w.is_valid_base(10)
    w2 = ValidWriteIdList.parse("t:20:9223372036854775807::")
    assert w2.is_valid_base(20) and not w2.is_valid_base(21)


def test_constructor_min_open_rules():
    assert ValidTxnList(10, aborted_ids=[3]).min_open is None          # only aborted
    assert str(ValidTxnList(10, aborted_ids=[3])) == "10:9223372036854775807::3"
    assert ValidTxnList(10, open_ids=[4, 8]).min_open == 4
    assert ValidTxnList(10, min_open=2).min_open is None               # no exceptions: ignored


# -- ValidTxnWriteIdList ---------------------------------------------------------------------

def test_txn_write_id_list_round_trip():
    s = "42$default.t:5:9223372036854775807::"
    v = ValidTxnWriteIdList.parse(s)
    assert v.txn_id == 42
    assert v.table("default.t").high_watermark == 5
    assert str(v) == s
    assert v.table("nope") is None


def test_txn_write_id_list_java_hashmap_order():
    # java.util.HashMap order of these keys (checked against Java in the JVM test too)
    a = ValidWriteIdList.parse("default.a:1:9223372036854775807::")
    b = ValidWriteIdList.parse("default.b:2:2:2:")
    v = ValidTxnWriteIdList(9, [b, a])
    again = ValidTxnWriteIdList.parse(str(v))
    assert again == v
    assert str(again) == str(v)
    assert ValidTxnWriteIdList.parse("9").is_empty()


# -- round trips through Hive's own Java classes (PySpark's hive-storage-api jar) ---------------

SAMPLE_TXN_STRINGS = [
    "10:9223372036854775807::", "10:5:5,7:6", "10:5:5:", "10:9223372036854775807::6",
    "100:3:3,50,99:4,5,60", "0:9223372036854775807::", "9223372036854775807:9:9:",
    "10:9223372036854775807", "10:3::", "",
]
SAMPLE_WRITE_ID_STRINGS = [
    "default.t:4:9223372036854775807::", "db.tbl:10:3:3,8:5", "null:5:9223372036854775807::",
    "x.y:0:9223372036854775807::", "a.b:100:1:1,2,3:4,5", "a.b:10:9223372036854775807::7,8",
    "a.b:10:4", "a.b:10:4:4", "",
]


def _java_pkg(gw):
    return gw.jvm.org.apache.hadoop.hive.common


def _long_array(gw, values):
    arr = gw.new_array(gw.jvm.long, len(values))
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def _bitset(gw, bits):
    bs = gw.jvm.java.util.BitSet()
    for i in bits:
        bs.set(i)
    return bs


@pytest.mark.parametrize("s", SAMPLE_TXN_STRINGS)
def test_txn_string_through_java(storage_api_jvm, s):
    j = _java_pkg(storage_api_jvm)
    jv = j.ValidReadTxnList()
    jv.readFromString(s)
    ours = ValidTxnList.parse(s)
    assert jv.writeToString() == str(ours)
    assert jv.getHighWatermark() == ours.high_watermark
    assert list(jv.getInvalidTransactions()) == list(ours.exceptions)
    mo = jv.getMinOpenTxn()
    assert (None if mo is None else int(mo)) == ours.min_open
    for i in range(0, 12):
        assert jv.isTxnValid(i) == ours.is_valid(i)
        assert jv.isTxnAborted(i) == ours.is_aborted(i)
    for lo, hi in [(1, 3), (4, 7), (5, 5), (6, 6), (1, 12), (11, 20), (3, 60)]:
        assert jv.isTxnRangeValid(lo, hi).toString() == ours.range_validity(lo, hi).value
        assert jv.isTxnRangeAborted(lo, hi).toString() == ours.range_aborted(lo, hi).value


@pytest.mark.parametrize("s", SAMPLE_WRITE_ID_STRINGS)
def test_write_id_string_through_java(storage_api_jvm, s):
    j = _java_pkg(storage_api_jvm)
    jv = j.ValidReaderWriteIdList(s) if s else j.ValidReaderWriteIdList()
    if not s:
        jv.readFromString(s)
    ours = ValidWriteIdList.parse(s)
    assert jv.writeToString() == str(ours)
    assert jv.getTableName() == ours.table_name
    for i in range(0, 12):
        assert jv.isWriteIdValid(i) == ours.is_valid(i)
        assert jv.isWriteIdAborted(i) == ours.is_aborted(i)
        assert jv.isValidBase(i) == ours.is_valid_base(i)
    for lo, hi in [(1, 3), (4, 7), (5, 5), (1, 12), (11, 20)]:
        assert jv.isWriteIdRangeValid(lo, hi).toString() == ours.range_validity(lo, hi).value
        assert jv.isWriteIdRangeAborted(lo, hi).toString() == ours.range_aborted(lo, hi).value


def test_java_built_lists_parse_and_format_identically(storage_api_jvm):
    gw = storage_api_jvm
    j = _java_pkg(gw)
    rnd = random.Random(11)
    for _ in range(60):
        hwm = rnd.randint(0, 50)
        exc = sorted(rnd.sample(range(1, 51), rnd.randint(0, 6)))
        aborted_pos = [i for i in range(len(exc)) if rnd.random() < 0.4]
        open_ids = [x for i, x in enumerate(exc) if i not in aborted_pos]
        min_open = open_ids[0] if open_ids else LONG_MAX
        jt = j.ValidReadTxnList(_long_array(gw, exc), _bitset(gw, aborted_pos), hwm, min_open)
        js = jt.writeToString()
        assert str(ValidTxnList.parse(js)) == js
        ours = ValidTxnList(hwm, open_ids, [exc[i] for i in aborted_pos])
        assert str(ours) == js
        jw = j.ValidReaderWriteIdList("db.t", _long_array(gw, exc), _bitset(gw, aborted_pos),
                                      hwm, min_open)
        jws = jw.writeToString()
        assert str(ValidWriteIdList.parse(jws)) == jws
        assert str(ValidWriteIdList("db.t", hwm, open_ids,
                                    [exc[i] for i in aborted_pos])) == jws
    # only an aborted exception: no min open txn
    jt = j.ValidReadTxnList(_long_array(gw, [3]), _bitset(gw, [0]), 10, LONG_MAX)
    assert jt.writeToString() == str(ValidTxnList(10, aborted_ids=[3])) == "10:9223372036854775807::3"


def test_txn_write_id_list_through_java(storage_api_jvm):
    gw = storage_api_jvm
    j = _java_pkg(gw)
    names = [f"db{i}.tbl_{i * 7}" for i in range(14)] + ["default.a", "default.b", "x.Y"]
    tables = [ValidWriteIdList(n, i + 1, [i] if i else []) for i, n in enumerate(names)]
    ours = ValidTxnWriteIdList(77, tables)
    jl = j.ValidTxnWriteIdList(gw.jvm.java.lang.Long(77))
    for t in tables:
        jl.addTableValidWriteIdList(j.ValidReaderWriteIdList(str(t)))
    assert jl.toString() == str(ours)
    j2 = j.ValidTxnWriteIdList(str(ours))
    assert j2.toString() == str(ValidTxnWriteIdList.parse(jl.toString()))
