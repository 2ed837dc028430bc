"""Compaction memory does not grow with the data: one child process compacts a bucket (minor
and major), then one three times larger with the same number of files, and its peak RSS
barely moves -- the whole-file compaction needed about 200 MiB more for the 800,000 extra
rows. Peak RSS is read from /proc (``VmHWM``); no timing is involved. Both tables'
files have full-size stripes (small ones: 256 KiB in, 1 MiB out) and their delete deltas
more events than a batch, so every per-input buffer is at its bound in both runs.
``python -m hms_bench.compaction_memory`` measures the absolute peak at 20 million rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hms_bench.compaction_memory import build
from orc_acid.writer import WriterOptions

CHILD = r"""
import json, sys
from hms_bench.compaction_memory import _rss_kib
from orc_acid import compaction as C
from orc_acid.writer import WriterOptions
out = {}
for name in sys.argv[1:]:
    for kind in ("minor", "major"):
        plan = C.plan_compaction(name, kind, "b.t:13:9223372036854775807::",
                                 visibility_txn_id=500)
        staged = C.stage_compaction(plan, batch_rows=2048,
                                    options=WriterOptions(stripe_size=1 << 20))
        out[f"{kind} {name}"] = [staged.rows, max(
            r.max_buffered_rows for r in staged.results.values())]
        C.discard_staged(staged)
    out[name] = _rss_kib() / 1024
print(json.dumps(out))
"""


def test_peak_rss_does_not_grow_with_the_bucket(tmp_path):
    medium, large = str(tmp_path / "medium" / "table"), str(tmp_path / "large" / "table")
    for path, rows in ((medium, 400_000), (large, 1_200_000)):
        build(path, rows, 10, 3, 3.0, options=WriterOptions(stripe_size=256 << 10))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.getcwd(), os.environ.get("PYTHONPATH")])),
        # glibc: buffers of 64 KiB and more are mapped and unmapped, not kept in the heap
        # once freed, so the peak is what was live at once, not the heap's history
        MALLOC_MMAP_THRESHOLD_="65536")
    proc = subprocess.run([sys.executable, "-c", CHILD, medium, large], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got[f"minor {large}"][0] == 1_200_000 and got[f"major {large}"][0] < 1_200_000
    # the merge held as much at most in both: 4 open inputs (a delta, 3 delete deltas), a
    # batch each (and a row left of the one before)
    for name in (medium, large):
        assert 4 * 2048 <= got[f"major {name}"][1] <= 4 * 2049
    grown = got[large] - got[medium]
    assert grown < 48, f"peak RSS grew {grown:.0f} MiB for 3x the rows: {got}"
