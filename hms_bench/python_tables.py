"""Benchmark of ``hms_txn.tables`` against pyarrow on plain ORC files (issue 45's targets).

    python -m hms_bench.python_tables [--rows 8000000] [--append-rows 1000000] [--repeat 3]

Starts ``hms-txn serve`` (a child process, embedded SQLite) and measures, over
``--repeat`` runs each, the best wall time and the least CPU time of this process
(``time.process_time``, every thread: the client side; the server's few calls are not in
it) -- each the least disturbed of its runs on a shared machine:

* read: ``Connection.read`` of an ACID table of ``--rows`` rows (written by the API in
  appends of ``--append-rows``: one delta each, two files per delta) -- snapshot, read lock,
  planning, ACID decoding -- against ``pyarrow.dataset`` reading the same rows from plain
  ORC files of the same sizes and codec (multi-threaded, as a pyarrow user reads a
  directory). Target: ours >= 0.8x pyarrow's rows/s.
* append: ``Connection.append`` of ``--append-rows`` rows (one transaction: write id, lock,
  ACID files -- one per 500k rows, written on a thread each -- commit with write events)
  against ``pyarrow.orc.write_table`` of the same rows into one plain ORC file with the same
  codec (one call, as a pyarrow user writes a table). Target: >= 0.8x.

Both tables use SNAPPY (``create_table``'s default, Spark's). Prints one JSON object with
rows/s, seconds, CPU seconds, the ratios and what each baseline is; on a shared machine the
CPU ratios (the cost per row, whatever the threads) are the steadier numbers, the wall
ratios are what a user waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.orc as orc

from hms_bench.servers import OurServer
from hms_txn import tables

CODEC = "snappy"


def make_rows(n: int, start: int, rng) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "qty": rng.integers(0, 1000, n, dtype=np.int32),
        "price": rng.random(n),
        "name": pa.array(np.char.add("item-", (ids % 10007).astype(str))),
    })


def timed(fn, repeat: int):
    """(best wall seconds, least CPU seconds, a result) over ``repeat`` runs."""
    wall = cpu = out = None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        w, c = time.perf_counter() - w, time.process_time() - c
        wall = w if wall is None else min(wall, w)
        cpu = c if cpu is None else min(cpu, c)
    return wall, cpu, out


def run(rows: int, append_rows: int, repeat: int, workdir: str) -> dict:
    rng = np.random.default_rng(45)
    server = OurServer("python-tables", os.path.join(workdir, "hms"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{workdir}/metastore.sqlite"})
    try:
        ms = tables.connect(f"thrift://127.0.0.1:{server.port}")
        schema = make_rows(1, 0, rng).schema
        chunks = [make_rows(append_rows, i * append_rows, rng)
                  for i in range(max(1, rows // append_rows))]
        n = sum(c.num_rows for c in chunks)

        # -- append --------------------------------------------------------------------
        ms.create_table("default.bench_append", schema)
        raw_one = os.path.join(workdir, "raw-append.orc")
        ours_w = timed(lambda: ms.append("default.bench_append", chunks[0]), repeat)
        theirs_w = timed(lambda: orc.write_table(chunks[0], raw_one, compression=CODEC),
                         repeat)

        # -- read ----------------------------------------------------------------------
        ms.create_table("default.bench_read", schema)
        for c in chunks:
            ms.append("default.bench_read", c)
        raw_dir = os.path.join(workdir, "raw-read")
        os.makedirs(raw_dir)
        part = 0
        for c in chunks:            # the same cut as the API's writers (two per append)
            half = (c.num_rows + 1) // 2
            for piece in (c.slice(0, half), c.slice(half)):
                orc.write_table(piece, os.path.join(raw_dir, f"part-{part:05d}.orc"),
                                compression=CODEC)
                part += 1
        ours_r = timed(lambda: ms.read("default.bench_read"), repeat)
        theirs_r = timed(lambda: ds.dataset(raw_dir, format="orc").to_table(), repeat)
        assert ours_r[2].num_rows == theirs_r[2].num_rows == n
        ms.close()
    finally:
        server.stop()

    def side(t, count):
        return {"seconds": round(t[0], 3), "cpu_seconds": round(t[1], 3),
                "rows_per_s": round(count / t[0])}

    out = {
        "read": {"rows": n, "hms_txn.tables": side(ours_r, n),
                 "pyarrow.dataset(plain ORC)": side(theirs_r, n),
                 "baseline": f"pyarrow.dataset(format='orc').to_table() over {part} plain "
                             f"ORC files of the same rows (the API's file cut), {CODEC}, "
                             f"pyarrow's threads",
                 "ratio": round(theirs_r[0] / ours_r[0], 3),
                 "cpu_ratio": round(theirs_r[1] / ours_r[1], 3) if ours_r[1] else None},
        "append": {"rows": append_rows, "hms_txn.tables": side(ours_w, append_rows),
                   "pyarrow.orc.write_table": side(theirs_w, append_rows),
                   "baseline": f"one pyarrow.orc.write_table call: the same rows into one "
                               f"plain ORC file, {CODEC}, pyarrow's defaults otherwise",
                   "ratio": round(theirs_w[0] / ours_w[0], 3),
                   "cpu_ratio": round(theirs_w[1] / ours_w[1], 3) if ours_w[1] else None},
        "target": ">= 0.8 (ratio: ours rows/s over pyarrow's; cpu_ratio: pyarrow's CPU "
                  "seconds over ours)",
        "cpus": os.cpu_count(), "repeat": repeat, "codec": CODEC,
    }
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=8_000_000, help="rows of the read (8M)")
    p.add_argument("--append-rows", type=int, default=1_000_000,
                   help="rows of one append (1M)")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (best of)")
    p.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = p.parse_args(argv)
    workdir = args.dir or tempfile.mkdtemp(prefix="bench-python-tables-")
    try:
        print(json.dumps(run(args.rows, args.append_rows, args.repeat, workdir), indent=2))
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
