"""The server's housekeeping thread.

On the ``hive.timedout.txn.reaper.start`` / ``hive.timedout.txn.reaper.interval`` cadence it

* aborts open transactions not heartbeated within ``hive.txn.timeout`` (releasing their
  locks and writing ABORT_TXN events),
* removes txn-less locks not heartbeated within ``hive.txn.timeout``,
* purges notification events older than ``hive.metastore.event.db.listener.timetolive``.

With several server processes on one database every one of them runs the sweep; the
operations are idempotent and row-locked, so that is harmless.
"""

from __future__ import annotations

import logging
import threading

from hms_txn.domain.events import notifications
from hms_txn.service.txn.locks import LockService
from hms_txn.service.txn.transactions import TxnService
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)


class Housekeeper:
    def __init__(self, config, units: UnitOfWork, txns: TxnService, locks: LockService):
        self.config = config
        self.units = units
        self.txns = txns
        self.locks = locks
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0

    def start(self) -> "Housekeeper":
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="hms-housekeeping",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        start = max(0.0, float(self.config["hive.timedout.txn.reaper.start"]))
        interval = max(0.05, float(self.config["hive.timedout.txn.reaper.interval"]))
        if self._stop.wait(start):
            return
        while not self._stop.is_set():
            self.run_once()
            if self._stop.wait(interval):
                return

    def run_once(self) -> dict:
        """One sweep; returns what it did (for tests and logs)."""
        done = {"aborted_txns": [], "removed_locks": [], "purged_events": 0}
        try:
            timeout = self.config["hive.txn.timeout"]
            done["aborted_txns"] = self.txns.abort_timed_out(timeout)
            done["removed_locks"] = self.locks.remove_timed_out(timeout)
            ttl = self.config["hive.metastore.event.db.listener.timetolive"]
            done["purged_events"] = self.units.write(
                lambda conn: notifications.purge_older_than(conn, ttl))
        except Exception:  # keep the thread alive through a database hiccup
            log.exception("housekeeping sweep failed; will retry at the next interval")
        self.runs += 1
        return done
