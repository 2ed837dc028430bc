"""The metadata cache's tailer: the background thread that keeps a ``MetadataCache`` current.

It reads the notification log after the cache's position, a batch at a time, and hands each
batch to the cache (``TailedCache.apply``), which applies it under the cache's lock: what an
event does to an entry, the position and the install rule are the cache's (``cache``), and
their invariants are read there. Here is only when to read, what to reload after a batch,
how far behind the log the cache is (the lag metrics) and the test hook that pauses it.

A batch read while the tailer is paused, or after the cache stopped, is not applied:
``pause`` takes the cache's lock, so once it returns no batch is being applied and none
will be until ``resume``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol, Sequence

from hms_txn.domain.cache.cache_entries import Key
from hms_txn.domain.cache.cache_source import Reader
from hms_txn.domain.events import notifications

log = logging.getLogger(__name__)

_BATCH = 1000            # events per poll
_RELOADS_PER_BATCH = 64  # entries the tailer reloads after a batch (others wait for a read)


class TailedCache(Protocol):
    """What the tailer needs of the cache it keeps current."""

    pos: int                         # the last event applied

    @property
    def lock(self) -> threading.RLock: ...

    def apply(self, events: Sequence[notifications.Event]) -> list[Key] | None: ...

    def reload(self, key: Key) -> None: ...


class Tailer:
    """Polls the log every ``interval`` seconds (at once again while batches come full).

    ``pausable``: whether fb303's ``hms_txn.cache.tailer.paused`` option may pause it (a
    test hook, ``hms_txn.cache.tailer.pausable``)."""

    def __init__(self, cache: TailedCache, read: Reader, interval: float, pausable: bool):
        self.cache = cache
        self._read = read
        self.interval = interval
        self.pausable = pausable
        self._paused = False
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_poll = 0.0      # time.monotonic() of the last completed poll
        self.reported_pos = 0     # the cache's position once a batch's reloads are done
        self.lag_events = 0
        self.lag_seconds = 0.0

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self, pos: int) -> None:
        """Start polling after event ``pos`` (the cache's starting position)."""
        self.reported_pos = pos
        self.last_poll = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="hms-cache-tailer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def pause(self) -> None:
        """Test hook: stop applying events (reads stay correct: they go to the database)."""
        with self.cache.lock:   # batches are applied under this lock
            self._paused = True

    def resume(self) -> None:
        with self.cache.lock:
            self._paused = False
        self._wake.set()

    @property
    def paused(self) -> bool:
        return self._paused

    def _loop(self) -> None:
        while not self._stop.is_set():
            more = False
            try:
                more = self.poll_once()
            except Exception:  # keep tailing through a database hiccup
                log.exception("metadata cache: reading the notification log failed")
            if not more:
                self._wake.wait(self.interval)
                self._wake.clear()

    def poll_once(self) -> bool:
        """Apply the next batch of events; True when more are waiting."""
        if self._paused:
            self._measure_lag()
            return False
        pos = self.cache.pos
        events = self._read(lambda conn: notifications.next_events(conn, pos, _BATCH))
        reload = self.cache.apply(events)
        if reload is None:
            return False
        for key in reload[:_RELOADS_PER_BATCH]:
            if self._paused or self._stop.is_set():
                break
            self.cache.reload(key)
        full = len(events) >= _BATCH
        self.reported_pos = self.cache.pos
        self.last_poll = time.monotonic()
        if full:
            self._measure_lag()
        else:
            self.lag_events = 0
            self.lag_seconds = 0.0
        return full

    def _measure_lag(self) -> None:
        pos = self.cache.pos

        def work(conn):
            head = notifications.current_event_id(conn)
            return head, notifications.oldest_event(conn, pos) if head > pos else None

        head, oldest = self._read(work)
        self.lag_events = max(0, head - self.cache.pos)
        self.lag_seconds = 0.0 if oldest is None else max(0.0, time.time() - oldest.event_time)
