"""Automatic compaction of ACID tables: Initiator, Workers and Cleaner (Hive's compactor),
and the calls of a Hive compactor running elsewhere on the same queue
(``external_compactor``).

Which of them run in a server is configured with Hive's keys:
``hive.compactor.initiator.on``, ``hive.compactor.worker.threads`` and
``hive.compactor.cleaner.on`` (all off by default, as in Hive). Several servers may share one
database: requests are claimed under a row lock, so each runs on one worker only; so may
Hive Workers running elsewhere (``find_next_compact2``,
``hms_txn.domain.compaction.external_compactor``), which take requests through the same
claim (``compaction_bookkeeping.claim_next``). The file work is done by
``orc_acid.compaction``; the state lives in the compaction queue
(``hms_txn.domain.txn.compaction_queue``) and is moved by
``hms_txn.domain.compaction.compaction_bookkeeping``, each change in a unit of work of its own
(``hms_txn.service.units``).
"""

from __future__ import annotations

import logging

from hms_txn.common.config import Config
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.service.compactor.cleaner import Cleaner
from hms_txn.service.compactor.initiator import Initiator
from hms_txn.service.compactor.worker import Worker
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)

__all__ = ["Cleaner", "Initiator", "Worker", "Compactor", "start_compactor"]


class Compactor:
    """The compactor roles of one server; ``stop()`` stops them all."""

    is_compactor = True

    def __init__(self, config: Config, units: UnitOfWork, txns: TxnManager, tables=None):
        # tables: in extension mode the upstream's (clients.upstream.UpstreamTables)
        self.initiator = (Initiator(config, units, txns, tables)
                          if config["hive.compactor.initiator.on"] else None)
        self.workers = [Worker(config, units, txns, i, tables)
                        for i in range(config["hive.compactor.worker.threads"])]
        self.cleaner = (Cleaner(config, units, txns, tables) if config["hive.compactor.cleaner.on"]
                        else None)

    @property
    def loops(self):
        roles = ([self.initiator] if self.initiator else []) + self.workers + \
            ([self.cleaner] if self.cleaner else [])
        return [r.loop for r in roles]

    def start(self) -> "Compactor":
        for loop in self.loops:
            loop.start()
        if self.loops:
            log.info("compactor: initiator %s, %d worker(s), cleaner %s",
                     "on" if self.initiator else "off", len(self.workers),
                     "on" if self.cleaner else "off")
        return self

    def wake_workers(self) -> None:
        for w in self.workers:
            w.loop.wake()

    def stop(self) -> None:
        for loop in self.loops:
            loop.request_stop()
        for loop in self.loops:
            loop.stop()


def start_compactor(config: Config, units: UnitOfWork, txns: TxnManager,
                    tables=None) -> Compactor:
    """The compactor roles ``config`` turns on, started (``tables``: see ``Compactor``)."""
    return Compactor(config, units, txns, tables).start()
