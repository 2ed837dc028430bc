"""Helpers shared by the Initiator, the Workers and the Cleaner."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Callable

from sqlalchemy.engine import Connection

from orc_acid import fs as afs
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList

from hms_txn.common.errors import NoSuchObject
from hms_txn.domain.txn import writeids
from hms_txn.domain.model import catalog
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.model.catalog import is_external, is_transactional
from hms_txn.domain.txn.compaction_queue import READY_FOR_CLEANING
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)

COMPACTOR_THRESHOLD_PREFIX = "compactorthreshold."
HOSTNAME = socket.gethostname()


def table_params(table: dict) -> dict:
    return table.get("parameters") or {}


def param(table: dict, key: str) -> str | None:
    """A table property, looked up case-insensitively (as Hive does since 1.1)."""
    params = table_params(table)
    if key in params:
        return params[key]
    low = key.lower()
    for k, v in params.items():
        if k.lower() == low:
            return v
    return None


def no_auto_compaction(table: dict) -> bool:
    return str(param(table, "no_auto_compaction") or "").strip().lower() == "true"


def is_insert_only(table: dict) -> bool:
    return str(param(table, "transactional_properties") or "").strip().lower() == "insert_only"


def is_acid_table(table: dict) -> bool:
    return is_transactional(table) and not is_external(table)


def threshold(table: dict, config, key: str, cast: Callable = float):
    """``compactorthreshold.<key>`` table property, else the configured value."""
    v = param(table, COMPACTOR_THRESHOLD_PREFIX + key)
    if v is not None:
        try:
            return cast(str(v).strip())
        except ValueError:
            log.warning("ignoring table property %s%s=%r (not a number)",
                        COMPACTOR_THRESHOLD_PREFIX, key, v)
    return config[key]


def object_location(units: UnitOfWork, config, db: str, tbl: str, part: str | None,
                    tables=None) -> tuple[dict, tuple | None]:
    """(table doc, (file system, path) of the table or partition directory -- through
    ``orc_acid.fs`` with the ``fs.*`` keys of the configuration -- or None when no file
    system serves its location); raises NoSuchObject. In extension mode ``tables``
    (``clients.upstream.UpstreamTables``) holds the catalog."""
    def read(conn: Connection) -> tuple[dict, str | None]:
        table = catalog.get_table(conn, db, tbl)
        if part is None:
            loc = (table.get("sd") or {}).get("location")
        else:
            p = catalog.get_partition_by_name(conn, db, tbl, part)
            loc = (p.get("sd") or {}).get("location")
        return table, loc

    if tables is None:
        table, loc = units.read(read)
    else:
        table = tables.get_table(db, tbl)
        loc = (table.get("sd") or {}).get("location")
        if part is not None:
            found = tables.get_partitions_by_names(db, tbl, [part])
            if not found:
                raise NoSuchObject(f"partition {part} of {db}.{tbl} does not exist")
            loc = (found[0].get("sd") or {}).get("location")
    if not loc:
        return table, None
    try:
        return table, afs.filesystem_for(loc, config.filesystem_options())
    except afs.FileSystemError as err:
        log.warning("%s.%s: %s", db, tbl, err)
        return table, None


def snapshot(units: UnitOfWork, txns: TxnManager, db: str,
             tbl: str) -> tuple[ValidTxnList, ValidWriteIdList]:
    """A fresh reader snapshot, as a client builds it from get_open_txns, and the table's
    write ids under it (get_valid_write_ids)."""
    def read(conn: Connection) -> tuple[ValidTxnList, ValidWriteIdList]:
        ot = txns.get_open_txns(conn)
        txn_list = ValidTxnList(ot.hwm, open_ids=[t for t in ot.txn_ids if t not in ot.aborted],
                                aborted_ids=sorted(ot.aborted))
        wids = writeids.get_valid_write_ids(conn, [f"{db}.{tbl}"], str(txn_list))[0]
        return txn_list, wids.to_valid_write_id_list()

    return units.read(read)


def revoke_timed_out(units: UnitOfWork, txns: TxnManager,
                     timeout_s: float) -> list[tuple[int, str]]:
    """``compaction_bookkeeping.revoke_timed_out`` for requests working for longer than
    ``timeout_s``; only a read unless one did."""
    cutoff = bk.worker_cutoff_ms(timeout_s)
    if not units.read(lambda conn: bk.any_timed_out(conn, cutoff)):
        return []
    done = units.write(lambda conn: bk.revoke_timed_out(conn, cutoff, messages=txns.messages))
    for entry_id, state in done:
        log.warning("compaction %d: worker timed out after %.0fs; now %s", entry_id, timeout_s,
                    "ready for cleaning" if state == READY_FOR_CLEANING else "re-queued")
    return done


class Loop:
    """A daemon thread running ``body()`` every ``interval()`` seconds until stopped."""

    is_compactor = True

    def __init__(self, name: str, body: Callable[[], object], interval: Callable[[], float], *,
                 initial_delay: float = 0.0):
        self.name = name
        self._body = body
        self._interval = interval
        self._initial_delay = initial_delay
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self) -> "Loop":
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def request_stop(self) -> None:
        """Ask the thread to stop after its current run, without waiting for it."""
        self._stop.set()
        self._wake.set()

    def stop(self, timeout: float = 15.0) -> None:
        self.request_stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        if self._initial_delay and self._stop.wait(self._initial_delay):
            return
        while not self._stop.is_set():
            busy = False
            try:
                busy = bool(self._body())
            except Exception:  # keep the thread alive through a database hiccup
                log.exception("%s: run failed; will retry", self.name)
            self.runs += 1
            if busy:
                continue
            self._wake.wait(max(0.01, float(self._interval())))
            self._wake.clear()


def worker_id(n: int) -> str:
    return f"{HOSTNAME}-{os.getpid()}-worker{n}"
