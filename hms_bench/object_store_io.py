"""Benchmark: ``python -m hms_bench.object_store_io [--rows 2000000] [--out FILE]``.

The same ``orc_acid`` workload on local disk and on S3 (moto's S3 server, started here, on
this machine: the S3 numbers are the cost of the object-store protocol and the server, not
of a network), in one run:

* append: the rows written as one insert delta of 4 bucket files (what 4 Spark tasks of
  one INSERT write), then 10 small appends and a delete of 5% of the rows;
* scan: ``orc_acid.read_table`` of the table (best of 2), rows/s;
* compaction: a major compaction of it.

For S3 it reports the HTTP requests the server served for the scan and the compaction (from
moto's request log: pyarrow's S3 client has no request counter), by kind (LIST, GET, HEAD,
PUT, POST, DELETE). A scan lists the table directory once (one LIST page per 1000 keys) and
then reads each file it selected (a HEAD and ranged GETs: footer, then stripes).

Not a test: timings depend on the machine. Prints one JSON object (``emit_json``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid

import numpy as np
import pyarrow as pa

import orc_acid
from orc_acid import compaction
from orc_acid.fs import filesystem_for
from hms_bench.object_store import MotoS3
from hms_bench.orc_acid_io import make_rows
from hms_bench.results import emit_json

MAX = "9223372036854775807"
BUCKETS = 4


def _append(loc: str, fs, n_rows: int) -> float:
    rng = np.random.default_rng(42)
    data = make_rows(n_rows, 0, rng)
    per = -(-n_rows // BUCKETS)
    start = time.perf_counter()
    for b in range(BUCKETS):
        orc_acid.write_delta(loc, 1, 0, b, data.slice(b * per, per), filesystem=fs)
    return time.perf_counter() - start


def _more_writes(loc: str, fs, n_rows: int) -> int:
    """10 small appends (write ids 2..11) and a delete of 5% of the rows (write id 12)."""
    rng = np.random.default_rng(7)
    for w in range(2, 12):
        orc_acid.write_delta(loc, w, 0, 0, make_rows(1000, n_rows + w * 1000, rng),
                             filesystem=fs)
    t = orc_acid.read_table(loc, f"db.t:11:{MAX}::", filesystem=fs, with_row_id=True,
                            columns=["id"])
    victims = t.filter(pa.compute.equal(pa.compute.bit_wise_and(t["id"], 31), 0))
    orc_acid.write_delete_delta(loc, 12, 0, victims.select(["ROW__ID"]),
                                row_schema=make_rows(0, 0, rng).schema, filesystem=fs)
    return 12


def measure(loc: str, fs, n_rows: int, server: MotoS3 | None) -> dict:
    out = {"append_s": round(_append(loc, fs, n_rows), 3)}
    out["append_rows_per_s"] = round(n_rows / out["append_s"])
    hwm = _more_writes(loc, fs, n_rows)
    wids = f"db.t:{hwm}:{MAX}::"
    best, rows, requests = float("inf"), 0, None
    for _ in range(2):
        mark = server.mark() if server else 0
        start = time.perf_counter()
        rows = orc_acid.read_table(loc, wids, filesystem=fs).num_rows
        best = min(best, time.perf_counter() - start)
        if server:
            time.sleep(0.2)                   # the server logs a request after answering it
            requests = dict(server.requests_since(mark))
    out.update(scan_s=round(best, 3), scan_rows=rows, scan_rows_per_s=round(rows / best))
    if requests is not None:
        out["scan_requests"] = requests
    mark = server.mark() if server else 0
    start = time.perf_counter()
    res = compaction.compact(loc, "major", wids, visibility_txn_id=100, filesystem=fs)
    out["major_compaction_s"] = round(time.perf_counter() - start, 3)
    out["major_compaction_rows"] = res.rows
    if server:
        time.sleep(0.2)
        out["major_compaction_requests"] = dict(server.requests_since(mark))
    return out


def run(n_rows: int) -> dict:
    result = {"rows": n_rows, "buckets": BUCKETS}
    with tempfile.TemporaryDirectory() as d:
        result["local"] = measure(d + "/t", None, n_rows, None)
    server = MotoS3().start()
    try:
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        server.create_bucket(bucket)
        loc = f"s3a://{bucket}/warehouse/t"
        fs, _ = filesystem_for(loc, server.options())
        result["s3"] = measure(loc, fs, n_rows, server)
    finally:
        server.stop()
    result["s3_vs_local"] = {
        "scan": round(result["local"]["scan_s"] / result["s3"]["scan_s"], 3),
        "append": round(result["local"]["append_s"] / result["s3"]["append_s"], 3)}
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    emit_json(run(args.rows), args.out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
