"""Property test: random insert/delete/update transactions (some aborted, some left open),
read at random snapshots, always equal a simple in-memory model."""

from __future__ import annotations

import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import orc_acid
from orc_acid.layout import encode_bucket
from orc_acid.valid_ids import ValidWriteIdList

SCHEMA = pa.schema([("v", pa.int64())])

txn_strategy = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "update", "overwrite"]),
        st.sampled_from(["commit", "commit", "commit", "abort", "open"]),
        st.integers(0, 2),                                  # bucket for inserts
        st.integers(0, 6),                                  # rows to insert
        st.lists(st.integers(0, 10_000), max_size=4),       # picks of rows to delete/update
    ),
    min_size=1, max_size=8)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(txns=txn_strategy, data=st.data())
def test_random_transactions_match_model(txns, data):
    with tempfile.TemporaryDirectory() as d:
        # model: row id -> (value, creating write id); deletes: row id -> deleting write ids
        rows: dict = {}
        deleted_by: dict = {}
        overwrites: list = []           # write ids of INSERT OVERWRITE
        status: dict = {}
        counter = 0

        def committed_visible(upto):
            """Rows a new transaction with write id `upto` sees (committed before it)."""
            ok = {w for w, s in status.items() if s == "commit" and w < upto}
            return model_rows(ok)

        def model_rows(valid):
            last_ow = max((w for w in overwrites if w in valid), default=0)
            out = {}
            for rid, (val, w) in rows.items():
                if w not in valid or w < last_ow:
                    continue
                if any(x in valid for x in deleted_by.get(rid, ())):
                    continue
                out[rid] = val
            return out

        for w, (kind, outcome, bucket, n, picks) in enumerate(txns, start=1):
            status[w] = outcome
            visible = sorted(committed_visible(w))
            victims = sorted({visible[p % len(visible)] for p in picks}) if visible else []
            if kind in ("insert", "overwrite") or (kind == "update" and not victims):
                vals = list(range(counter, counter + n))
                counter += n
                if kind == "overwrite":
                    orc_acid.write_base(d, w, bucket, pa.table({"v": vals}, schema=SCHEMA))
                    overwrites.append(w)
                else:
                    orc_acid.write_delta(d, w, 0, bucket, pa.table({"v": vals}, schema=SCHEMA))
                for i, v in enumerate(vals):
                    rows[(w, encode_bucket(bucket, 0), i)] = (v, w)
            elif victims:
                ids = pa.table({"originalTransaction": [r[0] for r in victims],
                                "bucket": [r[1] for r in victims],
                                "rowId": [r[2] for r in victims]})
                if kind == "delete":
                    orc_acid.write_delete_delta(d, w, 0, ids, row_schema=SCHEMA)
                else:
                    vals = list(range(counter, counter + len(victims)))
                    counter += len(victims)
                    orc_acid.write_update(d, w, 0, bucket, ids,
                                          pa.table({"v": vals}, schema=SCHEMA))
                    for i, v in enumerate(vals):
                        rows[(w, encode_bucket(bucket, 1), i)] = (v, w)
                for r in victims:
                    deleted_by.setdefault(r, set()).add(w)

        # read at a random snapshot: high watermark anywhere in 0..W
        hwm = data.draw(st.integers(0, len(txns)))
        opens = [w for w, s in status.items() if s == "open" and w <= hwm]
        aborts = [w for w, s in status.items() if s == "abort" and w <= hwm]
        wids = ValidWriteIdList("default.t", hwm, opens, aborts)
        valid = {w for w in status if w <= hwm and status[w] == "commit"}
        expected = model_rows(valid)
        got = orc_acid.read_table(d, str(wids), with_row_id=True, schema=SCHEMA)
        got_map = {(r["ROW__ID"]["writeid"], r["ROW__ID"]["bucketid"], r["ROW__ID"]["rowid"]):
                   r["v"] for r in got.to_pylist()}
        assert got.num_rows == len(got_map)            # ROW__IDs are unique
        assert got_map == expected, (str(wids), txns)
