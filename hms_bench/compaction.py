"""Compaction benchmark: ``python -m hms_bench.compaction [--deltas 50] [--rows 20000]``.

Builds an ACID table directory with N small writes (by default 50 deltas: every 10th write
a DELETE of 1% of the live rows, the others INSERTs of ``--rows`` rows over 2 buckets), then
reports

* read throughput of the uncompacted table (``orc_acid.read_table``, best of ``--repeat``);
* minor compaction: time to compact (stage + publish, as a worker runs it) and read
  throughput afterwards;
* major compaction: the same.

The compacted reads use the snapshot in which the compaction transaction committed, i.e.
what a reader sees after the worker's commit and before (or after) the cleaner ran: the
obsolete directories are still on disk and must be skipped by the directory listing.

Not a test: timings depend on the machine. Prints (and with ``--out`` writes) one JSON object.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

import orc_acid

from hms_bench.results import emit_json
from orc_acid import compaction as C
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("price", pa.float64()),
                    ("name", pa.string())])


def _rows(n: int, start: int, rng) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "qty": rng.integers(0, 1000, n, dtype=np.int32),
                     "price": rng.random(n),
                     "name": pa.array(np.char.add("item-", (ids % 10007).astype(str)))},
                    schema=SCHEMA)


def build(table_dir: str, deltas: int, rows: int, seed: int = 7) -> ValidWriteIdList:
    rng = np.random.default_rng(seed)
    next_id = 0
    for w in range(1, deltas + 1):
        if w % 10 == 0:
            live = orc_acid.read_table(table_dir, ValidWriteIdList("b.t", w - 1), with_row_id=True,
                                       columns=["id"])
            pick = rng.choice(live.num_rows, size=max(1, live.num_rows // 100), replace=False)
            orc_acid.write_delete_delta(table_dir, w, 0,
                                        live.column("ROW__ID").take(pa.array(pick)),
                                        row_schema=SCHEMA)
        else:
            half = rows // 2
            orc_acid.write_delta(table_dir, w, 0, 0, _rows(half, next_id, rng))
            orc_acid.write_delta(table_dir, w, 0, 1, _rows(rows - half, next_id + half, rng))
            next_id += rows
    return ValidWriteIdList("b.t", deltas)


def _read(table_dir: str, wids, txns, repeat: int) -> dict:
    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = orc_acid.read_table(table_dir, wids, valid_txns=txns).num_rows
        best = min(best, time.perf_counter() - t0)
    return {"rows": n, "seconds": round(best, 4), "rows_per_s": round(n / best)}


def run(deltas: int = 50, rows: int = 20000, repeat: int = 3, workdir: str | None = None) -> dict:
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="hms-compaction-bench-")
    try:
        src = os.path.join(workdir, "t")
        t0 = time.perf_counter()
        wids = build(src, deltas, rows)
        out = {"deltas": deltas, "rows_per_insert": rows,
               "build_seconds": round(time.perf_counter() - t0, 2),
               "dirs_before": len(os.listdir(src))}
        committed = ValidTxnList(1000)                  # the compaction txn (100) committed
        out["read_before"] = _read(src, wids, committed, repeat)
        for kind in (C.MINOR, C.MAJOR):
            d = os.path.join(workdir, kind)
            shutil.copytree(src, d)
            t0 = time.perf_counter()
            res = C.compact(d, kind, wids, visibility_txn_id=100,
                            valid_txns=ValidTxnList(1000, open_ids=[100]))
            secs = time.perf_counter() - t0
            after = _read(d, wids, committed, repeat)
            assert after["rows"] == out["read_before"]["rows"], (kind, after)
            cleaned = C.cleanable(d, res.max_write_id, wids, committed)
            for name in cleaned:
                shutil.rmtree(os.path.join(d, name))
            out[kind] = {
                "compact_seconds": round(secs, 3), "outputs": list(res.outputs),
                "rows_written": res.rows, "deletes_written": res.deletes, "files": res.files,
                "read_after": after,
                "read_after_cleaning": _read(d, wids, committed, repeat),
                "speedup": round(out["read_before"]["seconds"] / after["seconds"], 2),
            }
        return out
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hms_bench.compaction",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--deltas", type=int, default=50, help="writes (delta directories), default 50")
    p.add_argument("--rows", type=int, default=20000, help="rows per INSERT, default 20000")
    p.add_argument("--repeat", type=int, default=3, help="reads per measurement (best of)")
    p.add_argument("--dir", help="work directory (kept); default a temporary one")
    p.add_argument("--out", help="also write the JSON result to this file")
    args = p.parse_args(argv)
    result = run(args.deltas, args.rows, args.repeat, args.dir)
    emit_json(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
