"""Group commit on PostgreSQL: the transaction calls a server process receives together
share one PostgreSQL transaction, its COMMIT and its WAL flush.

Why. Each transaction call is one function's statement (hms_txn.store.pg_functions), and a
durable one holds the rows every other writer needs (the notification sequence: every
call that writes an event; the locks mutex: ``lock``; the id counters) from its statement
to the end of its COMMIT, which waits for the WAL flush. One flush per durable call, one at
a time, is the bound: measured on this project's 2-core machine before this module, the
writer path (open, write id, lock, commit: three durable calls) made 126-186 operations/s
with 16 clients, Java on the same PostgreSQL 208 (docs/benchmarks.md, issue 42), with
fdatasync at ~1.6 ms. Sharing the transaction shares the flush: N calls, one flush.

How. As SQLite's group commit does (hms_txn.store.engine): a call that finds another one
running queues; whoever takes the leader's lock runs every queued call (up to
``MAX_BATCH``), in arrival order, then commits; each call answers only after the COMMIT
of its batch, so the contract of one transaction per call holds (a durable call is on
disk when answered; nothing of a failed call happened). A call that runs alone runs as
it would without this module: one statement in autocommit (``postgres.
statement_connection``). A batch of several is a transaction of its own (BEGIN, the
calls' statements, COMMIT), lazy only if every call in it may be. A call that fails
inside a batch has rolled the transaction back with it: it keeps its error and the
others run again, without it, in a new transaction (none of them has answered yet); a
deadlock or serialization failure runs the whole batch again, as ``Store.transaction``
retries.

Lock order (why batches cannot deadlock). A batch concatenates calls, so it takes rows
in no global order (a commit's event takes the notification sequence, then the next call
locks a transaction row). Every transaction function therefore takes, before any row,
the transaction-call lock (``hms_lock_calls``: an advisory lock held to the transaction's
end): a batch or a lone call waiting for it holds nothing yet, and once it has it no other
batch or function call holds a row it will want. Order: the transaction-call lock, then
each call's own order (transaction rows by id, counters, the locks mutex and lock rows,
the notification sequence: hms_txn.domain.txn_records). What remains outside that rule is
the Python path of a few calls on PostgreSQL (a commit with keyValue or writeEventInfos,
unlock, the compactor's and the reaper's bookkeeping): each takes rows in the canonical
order and can only meet a batch in a cycle when both work on the same transaction at the
same moment; PostgreSQL then breaks the cycle and the store retries.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Callable, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from hms_txn.store import postgres

log = logging.getLogger(__name__)

T = TypeVar("T")

# Calls per batch: each writing call of a batch is a subtransaction-free statement, but a
# transaction's row locks and WAL grow with it; 32 calls are ~1 ms of the database's work.
MAX_BATCH = 32


class GroupCommit:
    """The calls of one server process (``Store.one_statement``), grouped."""

    def __init__(self, engine: Engine, restarts: postgres.RestartWatch | None,
                 recover: Callable[[], Callable[[Connection], None] | None],
                 retryable: Callable[[DBAPIError], bool]):
        self._engine = engine
        self._restarts = restarts
        self._recover = recover
        self._retryable = retryable
        self._pending: list[_Call] = []
        self._pending_lock = threading.Lock()
        self._leader = threading.Lock()
        self.batches = 0            # transactions of more than one call (tests, logs)

    def run(self, fn: Callable[[Connection], T], lazy: bool, alone: Callable[[], T]) -> T:
        """``fn(conn)``'s result once committed: alone (``alone()``, autocommit) when no
        other call is waiting, else in a batch with the others."""
        call = _Call(fn, lazy, alone)
        with self._pending_lock:
            self._pending.append(call)
        while not call.done:
            if self._leader.acquire(blocking=False):
                try:
                    with self._pending_lock:
                        batch = self._pending[:MAX_BATCH]
                        del self._pending[:MAX_BATCH]
                    if batch:
                        self._run(batch)
                finally:
                    self._leader.release()
                self._hand_over()
            elif call.wake is None:
                wake = threading.Lock()
                wake.acquire()
                call.wake = wake        # then look at the leader's lock once more
            else:
                call.wake.acquire(timeout=0.05)
        if call.error is not None:
            raise call.error
        return call.result  # type: ignore[return-value]

    def _run(self, batch: list["_Call"]) -> None:
        try:
            if len(batch) == 1:
                call = batch[0]
                try:
                    call.result = call.alone()
                except BaseException as err:   # noqa: BLE001 - the call's own outcome
                    call.error = err
                return
            self._run_batch(batch)
        finally:
            for call in batch:
                call.done = True
                if call.wake is not None:
                    _signal(call.wake)

    def _run_batch(self, batch: list["_Call"]) -> None:
        remaining = list(batch)
        for attempt in range(1, 9):
            for call in remaining:
                call.result, call.error = None, None
            try:
                failed = self._attempt(remaining)
            except DBAPIError as err:
                dead = err.connection_invalidated and not _committing(err)
                if attempt < 8 and (dead or self._retryable(err)):
                    log.debug("retrying a batch of %d calls after %s", len(remaining), err.orig)
                    time.sleep(min(0.2, 0.005 * 2 ** attempt) * random.random())
                    continue
                _fail(remaining, err)
                return
            except BaseException as err:   # noqa: BLE001 - every call gets it
                _fail(remaining, err)
                return
            if failed is None:
                self.batches += 1
                return
            remaining.remove(failed)     # it keeps its error; the others run again
            if not remaining:
                return
            if len(remaining) == 1:
                self._run([remaining[0]])
                return
        _fail(remaining, RuntimeError("a batch of transaction calls failed 8 times"))

    def _attempt(self, calls: list["_Call"]) -> "_Call | None":
        """Run ``calls`` in one transaction and commit; the call that failed instead (the
        transaction then rolled back), or None."""
        conn = postgres.live_connection(self._engine)
        try:
            if self._restarts is not None:
                self._restarts.recover_if_restarted(conn, self._recover())
            postgres.mark_lazy(conn, all(c.lazy for c in calls))
            trans = conn.begin()
            try:
                for call in calls:
                    try:
                        call.result = call.fn(conn)
                    except DBAPIError as err:
                        if err.connection_invalidated or self._retryable(err):
                            raise
                        call.error = err
                    except Exception as err:   # noqa: BLE001 - a domain error: the call's
                        call.error = err
                    if call.error is not None:
                        trans.rollback()
                        return call
                try:
                    trans.commit()
                except DBAPIError as err:
                    err.hms_committing = True    # it may have committed: not run again
                    raise
            except BaseException:
                if trans.is_active:
                    trans.rollback()
                raise
            return None
        finally:
            postgres.end_transaction(conn)
            conn.close()

    def _hand_over(self) -> None:
        """After leading: wake a queued caller to lead the next batch."""
        with self._pending_lock:
            waiting = self._pending[0] if self._pending else None
        if waiting is not None and waiting.wake is not None:
            _signal(waiting.wake)


def _committing(err: DBAPIError) -> bool:
    return bool(getattr(err, "hms_committing", False))


def _fail(calls: list["_Call"], err: BaseException) -> None:
    for call in calls:
        if call.error is None:
            call.result, call.error = None, err


def _signal(wake: threading.Lock) -> None:
    try:
        wake.release()
    except RuntimeError:   # already signalled and not yet consumed
        pass


class _Call:
    __slots__ = ("fn", "lazy", "alone", "result", "error", "done", "wake")

    def __init__(self, fn: Callable[[Connection], object], lazy: bool,
                 alone: Callable[[], object]):
        self.fn = fn
        self.lazy = lazy
        self.alone = alone
        self.result: object = None
        self.error: BaseException | None = None
        self.done = False
        self.wake: threading.Lock | None = None
