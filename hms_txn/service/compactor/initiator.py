"""The Initiator: find tables/partitions due for compaction and queue requests (Hive's
``Initiator``).

Every ``hive.compactor.check.interval`` it

1. re-queues requests whose worker has been silent for ``hive.compactor.worker.timeout``;
2. collects the tables/partitions written since the previous check (completed transaction
   components, which cleaning removes once a compaction absorbed them) plus those with more
   than ``hive.compactor.abortedtxn.threshold`` aborted transactions, and those it had to skip
   last time because a compaction was queued or running;
3. for each: skips it when the table is gone, not a managed transactional table, has
   ``NO_AUTO_COMPACTION=true``, is a partitioned table's table-level entry (dynamic
   partitioning), already has an initiated or working request, or failed its last
   ``hive.compactor.initiator.failed.compacts.threshold`` compactions in a row; otherwise
   decides, on the compactor's snapshot (never crossing the lowest open write id):

   * too many aborted transactions -> MAJOR;
   * no base (and no original files) but deltas -> MAJOR once there are more than
     ``delta.num.threshold`` deltas (Hive: "if there's no base file, do a major compaction");
   * delta size / base size > ``delta.pct.threshold`` -> MAJOR;
   * more than ``delta.num.threshold`` deltas (insert and delete) -> MINOR;

   thresholds overridable per table with ``compactorthreshold.<key>`` properties;
4. purges the compaction history beyond the retention counts and forgets aborted
   transactions that wrote nothing.

A check that fails records an "attempted" history entry (and counts nowhere else).
"""

from __future__ import annotations

import logging
import os
import time

from orc_acid import fs as afs
from orc_acid.compaction import compactor_write_ids, dir_size
from orc_acid.snapshot import get_acid_state

from hms_txn import __version__
from hms_txn.common.config import Config
from hms_txn.common.errors import NoSuchObject
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.txn import compaction_queue
from hms_txn.domain.txn.compaction_queue import ATTEMPTED, CompactionType
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.service.compactor.common import (HOSTNAME, Loop, is_acid_table, is_insert_only,
                                              no_auto_compaction, object_location,
                                              revoke_timed_out, snapshot, threshold)
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)

_SLACK_MS = 60_000      # re-scan writes this far before the previous check (clock skew)


class Initiator:
    def __init__(self, config: Config, units: UnitOfWork, txns: TxnManager, tables=None):
        self.config = config
        self.units = units
        self.txns = txns
        self.tables = tables        # extension mode: the upstream's (``object_location``)
        self.initiator_id = f"{HOSTNAME}-{os.getpid()}-initiator"
        self._prev_start_ms: int | None = None
        self._recheck: set = set()
        self._last_reap = 0.0
        self.loop = Loop("hms-compactor-initiator", self.run_once,
                         lambda: self.config["hive.compactor.check.interval"])

    def start(self) -> Loop:
        return self.loop.start()

    # -- one check --------------------------------------------------------------------------

    def run_once(self) -> dict:
        cfg = self.config
        done = {"requested": [], "skipped": {}, "revoked": []}
        units = self.units
        done["revoked"] = revoke_timed_out(units, self.txns, cfg["hive.compactor.worker.timeout"])
        started = int(time.time() * 1000)
        since = 0 if self._prev_start_ms is None else self._prev_start_ms - _SLACK_MS
        self._prev_start_ms = started
        aborted = units.read(bk.aborted_counts)
        candidates = units.read(lambda conn: bk.written_since(conn, since)) | self._recheck
        self._recheck = set()
        global_aborted = cfg["hive.compactor.abortedtxn.threshold"]
        candidates |= {k for k, n in aborted.items() if n > global_aborted}
        active = units.read(bk.active_objects)
        for obj in sorted(candidates, key=lambda o: (o[0], o[1], o[2] or "")):
            try:
                outcome = self._check(obj, active, aborted.get(obj, 0))
            except Exception as err:  # noqa: BLE001 - record and go on with the others
                log.exception("compaction check of %s failed", _name(obj))
                message = f"initiator check failed: {err}"
                units.write(lambda conn: bk.record_history(
                    conn, *obj, int(CompactionType.MAJOR), ATTEMPTED, message,
                    initiator_id=self.initiator_id, initiator_version=__version__,
                    retention=bk.retention_of(cfg)))
                outcome = "check failed"
            if isinstance(outcome, tuple):
                done["requested"].append((obj, outcome[0], outcome[1]))
            else:
                done["skipped"][obj] = outcome
        if time.monotonic() - self._last_reap >= cfg["hive.compactor.history.reaper.interval"]:
            self._last_reap = time.monotonic()
            units.write(lambda conn: bk.purge_history(conn, bk.retention_of(cfg)))
            units.write(bk.purge_empty_aborted_txns)
        return done

    def _check(self, obj, active, n_aborted):
        db, tbl, part = obj
        cfg = self.config
        try:
            table, location = object_location(self.units, cfg, db, tbl, part, self.tables)
        except NoSuchObject:
            return "dropped"
        if not is_acid_table(table):
            return "not a managed transactional table"
        if no_auto_compaction(table):
            log.debug("%s has NO_AUTO_COMPACTION=true: not compacting it", _name(obj))
            return "NO_AUTO_COMPACTION"
        if table.get("partitionKeys") and part is None:
            return "table-level entry of a partitioned table"
        if obj in active:
            self._recheck.add(obj)
            return "already queued or running"
        limit = cfg["hive.compactor.initiator.failed.compacts.threshold"]
        if self.units.read(lambda conn: bk.consecutive_failures(conn, db, tbl, part)) >= limit:
            log.warning("not compacting %s automatically: its last %d compactions failed",
                        _name(obj), limit)
            return "too many failures"
        if location is None:
            return "no file system of orc_acid.fs serves the location"
        if is_insert_only(table):
            return "insert-only table (not supported by the compactor yet)"
        ctype, why = self.determine_type(table, location, db, tbl, n_aborted)
        if ctype is None:
            return why
        res = self.units.write(lambda conn: compaction_queue.compact(
            conn, db, tbl, part, int(ctype), run_as=table.get("owner"),
            initiator_id=self.initiator_id, initiator_version=__version__))
        if res.accepted:
            log.info("requested %s compaction %d of %s: %s", ctype.name, res.id, _name(obj), why)
        return (ctype, why)

    def determine_type(self, table, location, db, tbl, n_aborted):
        cfg = self.config
        aborted_limit = threshold(table, cfg, "hive.compactor.abortedtxn.threshold", int)
        if n_aborted > aborted_limit:
            return CompactionType.MAJOR, f"{n_aborted} aborted transactions > {aborted_limit}"
        fs, path = location
        if not afs.is_dir(fs, path):
            return None, "no directory"
        txn_list, table_wids = snapshot(self.units, self.txns, db, tbl)
        wids = compactor_write_ids(table_wids)
        snap = get_acid_state(path, wids, txn_list, filesystem=fs)
        base_size = dir_size(afs.join(path, snap.base.path), fs) if snap.base else 0
        base_size += sum(afs.file_size(fs, afs.join(path, f)) for f in snap.original_files)
        deltas = snap.current
        delta_size = sum(dir_size(afs.join(path, d.path), fs) for d in deltas)
        num_limit = threshold(table, cfg, "hive.compactor.delta.num.threshold", int)
        no_base = base_size == 0 and delta_size > 0
        if not no_base:
            pct = threshold(table, cfg, "hive.compactor.delta.pct.threshold", float)
            if base_size and delta_size / base_size > pct:
                return CompactionType.MAJOR, (f"delta size {delta_size} / base size {base_size} "
                                              f"> {pct}")
        if len(deltas) <= num_limit:
            return None, f"{len(deltas)} deltas <= {num_limit}"
        if no_base:
            return CompactionType.MAJOR, f"{len(deltas)} deltas > {num_limit} and no base"
        return CompactionType.MINOR, f"{len(deltas)} deltas > {num_limit}"


def _name(obj) -> str:
    db, tbl, part = obj
    return f"{db}.{tbl}" + (f"/{part}" if part else "")
