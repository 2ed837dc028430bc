"""Helpers shared by the Initiator, the Workers and the Cleaner."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Callable

from orc_acid.layout import location_path
from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList

from hms_txn.domain.catalog import is_external, is_transactional

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


def object_location(ms, db: str, tbl: str, part: str | None) -> tuple[dict, str | None]:
    """(table doc, local directory of the table or partition); raises NoSuchObject."""
    table = ms.catalog.get_table(db, tbl)
    if part is None:
        loc = (table.get("sd") or {}).get("location")
    else:
        p = ms.catalog.get_partition_by_name(db, tbl, part)
        loc = (p.get("sd") or {}).get("location")
    return table, location_path(loc)


def current_txn_list(ms) -> ValidTxnList:
    """A fresh reader snapshot (ValidTxnList), as a client builds it from get_open_txns."""
    ot = ms.txns.get_open_txns()
    return ValidTxnList(ot.hwm, open_ids=[t for t in ot.txn_ids if t not in ot.aborted],
                        aborted_ids=sorted(ot.aborted))


def table_write_ids(ms, db: str, tbl: str, txn_list: ValidTxnList) -> ValidWriteIdList:
    return ms.writeids.get_valid_write_ids([f"{db}.{tbl}"], str(txn_list))[0] \
        .to_valid_write_id_list()


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

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        self._wake.set()
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
