"""Compaction memory benchmark: ``python -m hms_bench.compaction_memory --rows 20000000``.

Builds one bucket of ``--rows`` rows as ``--deltas`` insert deltas (successive write ids)
with ``--delete-deltas`` delete deltas between them (each deleting ``--delete-percent`` of
the rows inserted so far, at random, never a row twice), then compacts it -- minor, then
major, both from the same files -- each in a child process of its own, and reports per
kind the child's peak RSS (``VmHWM``), its RSS after imports (the baseline), wall and
CPU seconds, seconds per million rows, and what it wrote. Issue 40's target: peak RSS under
1 GiB for 20 million rows with the local engine.

Engines: ``--engine local`` (default) runs ``orc_acid.compaction.stage_compaction`` in the
child, as the metastore's LOCAL worker does. Any other value is ``module:function``, called
in the child as ``function(table_dir, kind, valid_write_ids, visibility_txn_id, valid_txns,
batch_rows)`` (strings and ints) and returning a dict with at least ``rows`` and
``deletes``: the hook through which the same data is compacted by ``engine=SPARK`` on the
cluster fixture (the child's RSS is then the driver's; the function may add its own
figures to the dict). ``--data DIR`` reuses (or keeps) the built table, so several engines
compact the same bytes.

The compaction output is staged and then discarded (not published), so both kinds read the
same input; staging writes every output byte (publishing is a rename). Not a test: the
numbers depend on the machine; on a shared machine RSS is the figure that matters.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hms_bench.results import emit_json

SCHEMA = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("price", pa.float64()),
                    ("name", pa.string())])
VISIBILITY_TXN = 1_000_000
_MANIFEST = "bench-manifest.json"


def _rows(n: int, start: int, rng) -> pa.Table:
    ids = pa.array(np.arange(start, start + n, dtype=np.int64))
    names = pc.binary_join_element_wise("item-", pc.cast(pc.bit_wise_and(ids, 8191),
                                                         pa.string()), "")
    return pa.table({"id": ids, "qty": rng.integers(0, 1000, n, dtype=np.int32),
                     "price": rng.random(n), "name": names}, schema=SCHEMA)


def build(table_dir: str, rows: int, deltas: int, delete_deltas: int,
          delete_percent: float, seed: int = 40, options=None) -> dict:
    """Write the table; returns its manifest (also stored beside it). ``options``: the
    ``orc_acid.WriterOptions`` of its files (default Hive's delta writer's)."""
    import orc_acid
    from orc_acid.layout import encode_bucket
    rng = np.random.default_rng(seed)
    per = [rows // deltas + (1 if i < rows % deltas else 0) for i in range(deltas)]
    every = max(1, deltas // max(1, delete_deltas)) if delete_deltas else deltas + 1
    written, deleted, w, made = [], 0, 0, 0
    alive = np.ones(rows, dtype=bool)        # by global row number
    start = 0
    for i, n in enumerate(per):
        w += 1
        orc_acid.write_delta(table_dir, w, 0, 0, _rows(n, start, rng), options=options)
        written.append((w, start, n))
        start += n
        if made < delete_deltas and (i + 1) % every == 0:
            live = np.flatnonzero(alive[:start])
            k = min(len(live), int(start * delete_percent / 100))
            victims = np.sort(rng.choice(live, size=k, replace=False))
            alive[victims] = False
            deleted += k
            starts = np.asarray([s for _, s, _ in written], dtype=np.int64)
            pos = np.searchsorted(starts, victims, "right") - 1
            write_ids = np.asarray([x for x, _, _ in written], dtype=np.int64)[pos]
            w += 1
            orc_acid.write_delete_delta(table_dir, w, 0, pa.table({
                "originalTransaction": write_ids,
                "bucket": np.full(k, encode_bucket(0, 0), dtype=np.int32),
                "rowId": victims - starts[pos]}), row_schema=SCHEMA, options=options)
            made += 1
    manifest = {"rows": rows, "deltas": deltas, "delete_deltas": made, "deleted": deleted,
                "high_watermark": w, "bytes": _size(table_dir)}
    with open(_manifest_path(table_dir), "w") as fh:
        json.dump(manifest, fh)
    return manifest


def _manifest_path(table_dir: str) -> str:
    """Beside the table directory (inside it, it would be taken for an original file)."""
    return os.path.join(os.path.dirname(os.path.abspath(table_dir)), _MANIFEST)


def _size(d: str) -> int:
    return sum(os.path.getsize(os.path.join(p, f)) for p, _, fs in os.walk(d) for f in fs)


def _rss_kib(field: str = "VmHWM") -> int:
    """This process's peak RSS (``VmHWM``) or current RSS (``VmRSS``), KiB. Not
    ``ru_maxrss``: Linux carries that over from the parent across fork and exec, so a child
    would report the benchmark's own peak (the table build) when it is higher."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def compact_local(table_dir: str, kind: str, valid_write_ids: str, visibility_txn_id: int,
                  valid_txns: str, batch_rows: int) -> dict:
    """The LOCAL engine: every task of the compaction in this process, one after the other;
    the staged output is discarded afterwards."""
    from orc_acid import compaction as C
    plan = C.plan_compaction(table_dir, kind, valid_write_ids,
                             visibility_txn_id=visibility_txn_id, valid_txns=valid_txns)
    staged = C.stage_compaction(plan, batch_rows=batch_rows or None)
    out = {"rows": staged.rows, "deletes": staged.deletes, "files": staged.files,
           "outputs": list(plan.outputs), "output_bytes": sum(
               _size(os.path.join(staged.staging_dir, n)) for n in plan.outputs),
           "max_open_inputs": max(r.max_open_inputs for r in staged.results.values()),
           "max_buffered_rows": max(r.max_buffered_rows for r in staged.results.values())}
    C.discard_staged(staged)
    return out


def _child(args) -> int:
    """Run one compaction here and print its measurements (JSON, one line)."""
    from orc_acid.valid_ids import ValidTxnList
    from orc_acid import compaction  # noqa: F401 - imported before the baseline is taken
    baseline = _rss_kib("VmRSS")
    with open(_manifest_path(args.child_dir)) as fh:
        manifest = json.load(fh)
    wids = f"b.t:{manifest['high_watermark']}:9223372036854775807::"
    txns = str(ValidTxnList(VISIBILITY_TXN + 1, open_ids=[VISIBILITY_TXN]))
    if args.engine == "local":
        fn = compact_local
    else:
        mod, _, name = args.engine.partition(":")
        fn = getattr(importlib.import_module(mod), name)
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = fn(args.child_dir, args.child_kind, wids, VISIBILITY_TXN, txns, args.batch_rows)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    out.update(seconds=round(wall, 2), cpu_seconds=round(cpu, 2),
               baseline_rss_mib=round(baseline / 1024, 1),
               peak_rss_mib=round(_rss_kib() / 1024, 1))
    print(json.dumps(out))
    return 0


def _run_child(table_dir: str, kind: str, engine: str, batch_rows: int) -> dict:
    cmd = [sys.executable, "-m", "hms_bench.compaction_memory", "--child-dir", table_dir,
           "--child-kind", kind, "--engine", engine, "--batch-rows", str(batch_rows)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} compaction failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(rows: int, deltas: int, delete_deltas: int, delete_percent: float, engine: str,
        batch_rows: int, data: str | None, kinds=("minor", "major")) -> dict:
    own = data is None
    workdir = tempfile.mkdtemp(prefix="hms-compaction-memory-") if own else data
    table = os.path.join(workdir, "table")
    try:
        if os.path.exists(_manifest_path(table)):
            with open(_manifest_path(table)) as fh:
                manifest = json.load(fh)
            build_s = 0.0
        else:
            t0 = time.perf_counter()
            manifest = build(table, rows, deltas, delete_deltas, delete_percent)
            build_s = time.perf_counter() - t0
        out = {"engine": engine, "batch_rows": batch_rows or None, "table": manifest,
               "build_seconds": round(build_s, 1)}
        m = manifest["rows"] / 1e6
        for kind in kinds:
            r = _run_child(table, kind, engine, batch_rows)
            r["seconds_per_million_rows"] = round(r["seconds"] / m, 3)
            r["cpu_seconds_per_million_rows"] = round(r["cpu_seconds"] / m, 3)
            r["peak_rss_under_1_gib"] = r["peak_rss_mib"] < 1024
            out[kind] = r
        return out
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m hms_bench.compaction_memory",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=20_000_000, help="rows in the bucket")
    p.add_argument("--deltas", type=int, default=40, help="insert deltas (default 40)")
    p.add_argument("--delete-deltas", type=int, default=10, help="delete deltas (default 10)")
    p.add_argument("--delete-percent", type=float, default=1.0,
                   help="percent of the rows so far each delete delta deletes (default 1)")
    p.add_argument("--engine", default="local", help="local, or module:function (see above)")
    p.add_argument("--batch-rows", type=int, default=0,
                   help="rows read per input file at a time (default: the library's)")
    p.add_argument("--kinds", default="minor,major", help="compactions to run")
    p.add_argument("--data", help="directory to build the table in and keep (DIR/table; "
                                  "reused when already built)")
    p.add_argument("--out", help="also write the JSON result to this file")
    p.add_argument("--child-dir", help=argparse.SUPPRESS)
    p.add_argument("--child-kind", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child_dir:
        return _child(args)
    result = run(args.rows, args.deltas, args.delete_deltas, args.delete_percent, args.engine,
                 args.batch_rows, args.data, tuple(args.kinds.split(",")))
    emit_json(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
