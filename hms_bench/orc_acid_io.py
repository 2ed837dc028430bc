"""Benchmark: ``python -m hms_bench.orc_acid_io [--rows 1000000] [--dir DIR]``.

Builds a table of N rows: a base (half the rows) plus 10 insert deltas, then delete deltas
removing 5% of the rows, and reports

* read: full scan with ``orc_acid.read_table`` vs ``pyarrow.orc`` reading the same data
  files raw (no ACID logic), in rows/s, and the ratio (target >= 0.5);
* write: ``orc_acid`` writing the rows (base + deltas) vs a raw ``pyarrow.orc.write_table``
  of the same rows with the same settings, and the ratio (target >= 0.5).

Not a test: timings depend on the machine. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc

from orc_acid import reader, writer
from orc_acid.valid_ids import ValidWriteIdList


def make_rows(n: int, start: int, rng) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "qty": rng.integers(0, 1000, n, dtype=np.int32),
        "price": rng.random(n),
        "name": pa.array(np.char.add("item-", (ids % 10007).astype(str))),
    })


def best_of(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run(n_rows: int, workdir: str) -> dict:
    rng = np.random.default_rng(42)
    table_dir = os.path.join(workdir, "acid")
    raw_dir = os.path.join(workdir, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    base_rows = n_rows // 2
    per_delta = (n_rows - base_rows) // 10
    chunks = [make_rows(base_rows, 0, rng)]
    for i in range(10):
        chunks.append(make_rows(per_delta, base_rows + i * per_delta, rng))
    total = sum(c.num_rows for c in chunks)

    # -- write ----------------------------------------------------------------------------
    def write_acid():
        shutil.rmtree(table_dir, ignore_errors=True)
        writer.write_base(table_dir, 1, 0, chunks[0])
        for i, c in enumerate(chunks[1:]):
            writer.write_delta(table_dir, 2 + i, 0, 0, c)

    def write_raw():
        shutil.rmtree(raw_dir, ignore_errors=True)
        os.makedirs(raw_dir)
        for i, c in enumerate(chunks):
            orc.write_table(c, os.path.join(raw_dir, f"part-{i}.orc"), compression="zlib",
                            stripe_size=writer.STRIPE_SIZE,
                            compression_block_size=writer.COMPRESSION_BLOCK_SIZE)

    t_write_raw = best_of(write_raw)
    t_write_acid = best_of(write_acid)

    # -- delete 5% --------------------------------------------------------------------------
    wids = ValidWriteIdList("bench.t", 11)
    with_ids = reader.read_table(table_dir, wids, with_row_id=True, columns=["id"])
    pick = rng.choice(with_ids.num_rows, size=int(total * 0.05), replace=False)
    victims = with_ids.take(pa.array(np.sort(pick)))
    schema = chunks[0].schema
    # five delete transactions, 1% each
    for k, part in enumerate(np.array_split(np.arange(victims.num_rows), 5)):
        writer.write_delete_delta(table_dir, 12 + k, 0,
                                  victims.take(pa.array(part)).select(["ROW__ID"]),
                                  row_schema=schema)
    wids = ValidWriteIdList("bench.t", 16)

    # -- read -------------------------------------------------------------------------------
    data_files = sorted(glob.glob(os.path.join(table_dir, "base_*", "bucket_*")) +
                        glob.glob(os.path.join(table_dir, "delta_*", "bucket_*")))

    def read_raw():
        return [orc.ORCFile(p).read() for p in data_files]

    result = {}

    def read_acid():
        result["t"] = reader.read_table(table_dir, wids)

    t_read_raw = best_of(read_raw)
    t_read_acid = best_of(read_acid)
    got = result["t"].num_rows
    expected = total - victims.num_rows
    if got != expected:
        raise AssertionError(f"read {got} rows, expected {expected}")
    return {
        "rows": total,
        "deleted": int(victims.num_rows),
        "read_raw_rows_per_s": round(total / t_read_raw),
        "read_acid_rows_per_s": round(total / t_read_acid),
        "read_ratio": round(t_read_raw / t_read_acid, 3),
        "write_raw_rows_per_s": round(total / t_write_raw),
        "write_acid_rows_per_s": round(total / t_write_acid),
        "write_ratio": round(t_write_raw / t_write_acid, 3),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None, help="work directory (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.dir:
        print(json.dumps(run(args.rows, args.dir)))
        return 0
    with tempfile.TemporaryDirectory() as d:
        print(json.dumps(run(args.rows, d)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
