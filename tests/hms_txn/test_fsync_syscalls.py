"""Which calls reach the disk: the fdatasync system calls each call makes, seen by strace.

test_lazy_open.py checks the ``synchronous`` setting every COMMIT runs under. That is not
enough: SQLite fsyncs at a COMMIT only when the transaction wrote a page, and it writes
no page for an UPDATE that leaves its row as it was. The durable commit that follows lazy
ones once did exactly that (``UPDATE hms_schema_version SET version = version``), so a
commit_txn that recorded writes, answered from a lazy batch, was never fsynced, although
every COMMIT it ran had the right setting. Here a child process runs the calls between
marker writes on its stdout under ``strace -f``, and the fdatasyncs between two markers
are the ones the call made.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent('''
    import os, sys
    from hms_txn.common.config import Config
    from hms_txn.domain.locks.locks import DataOp, LockComponent, LockLevel, LockRequest, LockType
    from hms_txn.server.metastore import Metastore
    from hms_txn.domain.txn.txn import RESERVE_AHEAD
    from tests.support.inprocess import calls

    data = sys.argv[1]
    # No start(): no housekeeping thread commits anything between the markers.
    ms = Metastore(Config({"hive.metastore.warehouse.dir": data + "/wh"}), data_dir=data)
    assert ms.store.lazy_commits

    def mark(label):
        os.write(1, ("@" + label + "\\n").encode())

    def insert_lock(txn):
        calls(ms).lock(LockRequest(
            [LockComponent(int(LockType.SHARED_WRITE), int(LockLevel.TABLE), "db", "t",
                           operation_type=int(DataOp.INSERT))],
            txn_id=txn, user="u", hostname="h"))

    calls(ms).commit_txn(calls(ms).open_txns(1, "u", "h")[0])   # the writer connection exists
    ms.store.make_durable()

    mark("open")
    txn = calls(ms).open_txns(1, "u", "h")[0]
    mark("allocate")
    calls(ms).allocate_table_write_ids("db", "t", [txn])
    mark("lock")
    insert_lock(txn)
    mark("commit-of-a-writer-in-a-lazy-batch")
    with ms.store.batch(lazy=True):          # as the transaction loop runs it
        calls(ms).commit_txn(txn)
    mark("open-and-commit-of-a-reader-in-lazy-batches")
    with ms.store.batch(lazy=True):
        reader = calls(ms).open_txns(1, "u", "h")[0]
    with ms.store.batch(lazy=True):
        calls(ms).commit_txn(reader)
    mark("notification-read-after-lazy-calls")
    calls(ms).next_events(0)
    mark("open-2")
    txn = calls(ms).open_txns(1, "u", "h")[0]
    calls(ms).allocate_table_write_ids("db", "t", [txn])
    mark("commit-of-a-writer-outside-a-batch")
    calls(ms).commit_txn(txn)
    mark("open-beyond-the-id-reservation-in-a-lazy-batch")
    with ms.store.batch(lazy=True):
        calls(ms).open_txns(RESERVE_AHEAD, "u", "h")
    mark("end")
    ms.close()
''')


def _syncs_between_markers(trace: str) -> dict[str, int]:
    """marker -> fdatasync/fsync calls from it to the next marker."""
    counts: dict[str, int] = {}
    current = None
    for line in trace.splitlines():
        found = re.search(r'write\(1, "@([\w-]+)\\n"', line)
        if found:
            current = found.group(1)
            counts[current] = 0
        elif current is not None and re.search(r"\b(fdatasync|fsync)\(", line):
            counts[current] += 1
    return counts


def test_every_durable_call_fsyncs_and_lazy_ones_do_not(tmp_path):
    strace = shutil.which("strace")
    assert strace, "strace is needed to see the fsyncs (.ci/run installs it)"
    trace = tmp_path / "trace.txt"
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(
        [strace, "-f", "-s", "200", "-e", "trace=write,fdatasync,fsync", "-o", str(trace),
         sys.executable, "-c", _CHILD, str(data)],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    syncs = _syncs_between_markers(trace.read_text())
    syncs.pop("end")      # close() checkpoints: whatever fsyncs that takes are not a call's
    assert syncs == {
        "open": 0,                                   # lazy
        "allocate": 1,
        "lock": 1,
        "commit-of-a-writer-in-a-lazy-batch": 1,     # the durable touch after the lazy COMMIT
        "open-and-commit-of-a-reader-in-lazy-batches": 0,
        "notification-read-after-lazy-calls": 1,     # make_durable
        "open-2": 1,                                 # its allocate
        "commit-of-a-writer-outside-a-batch": 1,
        "open-beyond-the-id-reservation-in-a-lazy-batch": 1,   # raises the reservation
    }, syncs


@pytest.mark.parametrize("marker_rows", [0, 1])
def test_the_durable_touch_changes_a_value(tmp_path, marker_rows):
    """The touch's write must change the marker (a first touch creates its row), or its
    COMMIT would have no page to write."""
    from sqlalchemy import delete, select

    from hms_txn.common.config import Config
    from hms_txn.server.metastore import Metastore
    from hms_txn.store.engine import _touch
    from hms_txn.store.schema import durability_marker

    ms = Metastore(Config({"hive.metastore.warehouse.dir": str(tmp_path / "wh")}),
                   data_dir=str(tmp_path))
    try:
        def value():
            with ms.store.read() as conn:
                return conn.execute(select(durability_marker.c.n)).scalar_one_or_none()

        with ms.store.write() as conn:
            conn.execute(delete(durability_marker))
        if marker_rows:
            ms.store.transaction(_touch)
        before = value()
        ms.store.transaction(_touch)
        assert value() == (before or 0) + 1
    finally:
        ms.close()
