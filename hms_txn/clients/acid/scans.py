"""Scans outside a transaction: their read lock, its release, and what a scan reads (shared
by ``spark.hive_acid``'s driver and ``hms_txn.tables``).

A scan outside a transaction takes a txn-less SHARED_READ lock on its tables *before* its
snapshot (a compaction committing after the lock cannot have its obsolete files cleaned
while the lock is held; one that committed before it is in the snapshot), and the driver
heartbeats the lock while the scan lives:

* a scan of planned parts (``Scans.open(held=False)``, Spark's data source) ends when every
  part has reported completion, or when its lease (``READ_LEASE_S``, renewed by every
  report) expires: a query that stops early (``limit``) never reports the rest;
* a held scan (``hive_acid.snapshot()``, every ``hms_txn.tables`` read) ends only by
  ``Scans.release``; when its process dies the heartbeats stop and the metastore times the
  lock out after ``hive.txn.timeout``.

A finished scan's lock is released in the background (the task reporting the last input
partition need not wait for the metastore); the driver's next lock request first waits for
those releases (``flush_unlocks``), so its own next statement never finds its earlier scan's
lock still held.

What a scan reads (:func:`plan_units`): the table's partitions that can match the filters
(plus partitions the reading transaction created, registered only when it commits), and in
each ``orc_acid``'s splits: one unit (a Spark input partition) per (partition, bucket id).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import orc_acid
from orc_acid.table_io import ReadUnit

from hms_txn.clients.acid import metastore as M

log = logging.getLogger("hms_txn.clients.acid")

READ_LEASE_S = 120.0


@dataclass
class Scan:
    lock_id: Optional[int]
    n_parts: int = -1
    done: set = field(default_factory=set)
    lease_until: float = 0.0
    held: bool = False      # released by Scans.release only, no lease


class Scans:
    """The open scans of one driver and their locks. Thread-safe."""

    def __init__(self, ms: M.MetastoreConnection, lock_timeout_s: float):
        self.ms = ms
        self.lock_timeout_s = lock_timeout_s
        self._scans: Dict[str, Scan] = {}
        self._ids = itertools.count(1)
        self._mu = threading.Lock()
        self._unlocks: List[threading.Thread] = []

    def open(self, infos: Sequence[M.TableInfo], *, held: bool) -> dict:
        """Lock, then snapshot, the tables -> {"scan", "lock_id", "txns", "write_ids"}
        (``write_ids``: full name -> ValidWriteIdList)."""
        for info in infos:
            M.require_acid(info)
        self.flush_unlocks()
        comps = [M.lock_component(i.db, i.name, M.SHARED_READ, M.OP_SELECT, transactional=True)
                 for i in infos]
        lock_id = M.acquire_lock(self.ms, comps, 0, timeout_s=self.lock_timeout_s)
        try:
            txns = M.valid_txn_list(self.ms)
            wids = M.valid_write_ids(self.ms, [i.full_name for i in infos], txns)
        except BaseException:
            self._unlock(lock_id)
            raise
        scan_id = f"{os.getpid()}-{next(self._ids)}"
        with self._mu:
            self._scans[scan_id] = Scan(lock_id, held=held,
                                        lease_until=time.monotonic() + READ_LEASE_S)
        return {"scan": scan_id, "lock_id": lock_id, "txns": txns, "write_ids": wids}

    def release(self, scan_id: str) -> None:
        """End a scan now (synchronously)."""
        with self._mu:
            s = self._scans.pop(scan_id, None)
        if s is not None:
            self._unlock(s.lock_id)

    def release_all(self) -> None:
        with self._mu:
            scans = list(self._scans.values())
            self._scans.clear()
        for s in scans:
            self._unlock(s.lock_id)

    def planned(self, scan_id: str, n: int) -> None:
        """The scan has ``n`` input partitions."""
        self._event(scan_id, n=n)

    def progress(self, scan_id: str, part: int, done: bool) -> None:
        """Input partition ``part`` is being read (renews the lease) or is ``done``."""
        self._event(scan_id, part=part, done=done)

    def _event(self, scan_id, n=None, part=None, done=False):
        release = None
        with self._mu:
            s = self._scans.get(scan_id)
            if s is None:
                return
            s.lease_until = time.monotonic() + READ_LEASE_S
            if n is not None:
                s.n_parts = n
            if done and part is not None:
                s.done.add(part)
            if s.n_parts >= 0 and len(s.done) >= s.n_parts:
                release = self._scans.pop(scan_id)
        if release is not None:
            self._unlock_later(release.lock_id)

    def heartbeat(self) -> None:
        """End the scans whose lease expired; heartbeat the others' locks."""
        with self._mu:
            now = time.monotonic()
            expired = [k for k, s in self._scans.items() if s.lease_until < now and not s.held]
            released = [self._scans.pop(k) for k in expired]
            scans = list(self._scans.values())
        for s in released:
            self._unlock(s.lock_id)
        for s in scans:
            try:
                self.ms.heartbeat(M.T.HeartbeatRequest(lockid=s.lock_id))
            except Exception:
                pass

    def _unlock_later(self, lock_id: Optional[int]) -> None:
        t = threading.Thread(target=self._unlock, args=(lock_id,), name="hive-acid-unlock",
                             daemon=True)
        with self._mu:
            self._unlocks = [u for u in self._unlocks if u.is_alive()] + [t]
        t.start()

    def flush_unlocks(self) -> None:
        """Wait for the background releases of finished scans (see the module docstring)."""
        with self._mu:
            pending, self._unlocks = self._unlocks, []
        for t in pending:
            t.join()

    def _unlock(self, lock_id: Optional[int]) -> None:
        if lock_id is None:
            return
        try:
            self.ms.unlock(M.T.UnlockRequest(lockid=lock_id))
        except Exception:
            log.debug("unlock %s failed", lock_id, exc_info=True)


# -- what a scan reads ---------------------------------------------------------------------

def scan_targets(ms: M.MetastoreConnection, info: M.TableInfo, txn_partitions: Sequence[str],
                 keep: Callable[[List[str]], bool] = lambda values: True,
                 listed: Optional[List[Tuple[str, List[str], str]]] = None
                 ) -> List[Tuple[str, Tuple[Tuple[str, str], ...]]]:
    """(location, ((partition key, raw value), ...)) of the table's partitions whose raw
    value lists ``keep`` accepts -- ``listed`` (``M.list_partitions``' form) or every
    partition the metastore has -- plus those of ``txn_partitions`` (the reading
    transaction's own, registered only when it commits) that ``keep`` accepts. An
    unpartitioned table: its location."""
    if not info.partition_keys:
        return [(info.location, ())]
    listed = list(M.list_partitions(ms, info) if listed is None else listed)
    known = {n for n, _, _ in listed}
    for name in txn_partitions:
        if name not in known:
            listed.append((name, M.partition_values(name), os.path.join(info.location, name)))
    return [(loc, tuple(zip(info.part_names, values))) for _, values, loc in listed
            if keep(values)]


def plan_units(info: M.TableInfo, txns: str, write_ids: str,
               targets: Sequence[Tuple[str, Tuple[Tuple[str, str], ...]]]) -> List[ReadUnit]:
    """The units of a scan of ``targets`` (:func:`scan_targets`) at the snapshot (``txns``,
    ``write_ids``): ``orc_acid``'s splits, one per (partition, bucket id)."""
    units = []
    for loc, pv in targets:     # one listing per partition (none for a missing directory)
        try:
            splits = orc_acid.plan_splits(loc, write_ids, valid_txns=txns,
                                          insert_only=info.insert_only, filesystem=info.fs)
        except FileNotFoundError:
            continue
        units += [ReadUnit(sp, pv, info.fs) for sp in splits]
    return units
