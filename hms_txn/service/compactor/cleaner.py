"""The Cleaner (Hive's ``Cleaner``): after a compaction commits, delete what it made obsolete.

Every ``hive.compactor.cleaner.run.interval``, for each request ready for cleaning, oldest
first:

* wait while anything may still read the old files: an open transaction (read-only ones
  included) older than the compaction's commit -- readers take their snapshot inside their
  transaction -- or a transaction-less lock on the table/partition acquired before the commit;
* then list the directory and delete, under the current snapshot capped at the compaction's
  highest write id, exactly the obsolete directories (and original files) and the aborted
  directories -- deltas of aborted write ids and ``_vT`` output of aborted compactions -- plus
  staging directories of compaction transactions that are no longer open;
* then record the request as succeeded and purge the bookkeeping those files kept alive
  (``compaction_bookkeeping.mark_cleaned``).
"""

from __future__ import annotations

import logging

from orc_acid import fs as afs
from orc_acid.compaction import cleanable

from hms_txn.common.config import Config
from hms_txn.common.errors import NoSuchObject
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.domain.txn.txn_records import TxnState
from hms_txn.service.compactor.common import Loop, object_location, snapshot
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)


class Cleaner:
    def __init__(self, config: Config, units: UnitOfWork, txns: TxnManager, tables=None):
        self.config = config
        self.units = units
        self.txns = txns
        self.tables = tables        # extension mode: the upstream's (``object_location``)
        self.removed: list[str] = []        # absolute paths removed (tests, logs)
        self.loop = Loop("hms-compactor-cleaner", self.run_once,
                         lambda: self.config["hive.compactor.cleaner.run.interval"])

    def start(self) -> Loop:
        return self.loop.start()

    def run_once(self) -> dict:
        done = {"cleaned": [], "waiting": {}}
        for e in self.units.read(bk.ready_for_cleaning):
            blocker = self.units.read(lambda conn: bk.cleaning_blocker(conn, e))
            if blocker:
                log.debug("compaction %d of %s: cleaning waits for %s", e.id, e.name, blocker)
                done["waiting"][e.id] = blocker
                continue
            try:
                removed = self.clean(e)
            except Exception:  # noqa: BLE001 - leave it ready; retry next run
                log.exception("cleaning after compaction %d of %s failed", e.id, e.name)
                continue
            done["cleaned"].append((e.id, removed))
        return done

    def clean(self, e: bk.Entry) -> list[str]:
        units = self.units
        units.write(lambda conn: bk.mark_cleaner_start(conn, e.id))
        removed: list[str] = []
        try:
            _, found = object_location(units, self.config, e.db, e.table, e.partition,
                                       self.tables)
        except NoSuchObject:
            found = None        # dropped meanwhile: nothing left to delete
        if found is not None and afs.is_dir(*found):
            fs, location = found
            txn_list, wids = snapshot(units, self.txns, e.db, e.table)

            def finished(txn_id: int) -> bool:
                info = units.read(lambda conn: self.txns.get_txn(conn, txn_id))
                return info is None or info.state != TxnState.OPEN

            for name in cleanable(location, int(e.highest_write_id or 0), wids, txn_list,
                                  txn_finished=finished, filesystem=fs):
                path = afs.join(location, name)
                try:
                    if not afs.delete_tree(fs, path):
                        continue    # another cleaner got there first
                except FileNotFoundError:
                    continue
                removed.append(path)
        info = units.write(lambda conn: bk.mark_cleaned(conn, e, bk.retention_of(self.config)))
        self.removed.extend(removed)
        log.info("compaction %d of %s cleaned: removed %d entries %s; purged %s", e.id, e.name,
                 len(removed), [p.rsplit("/", 1)[-1] for p in removed][:20],
                 {k: v for k, v in info.items() if k != "moved"})
        return removed
