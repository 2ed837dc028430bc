"""Units of work: the one place that opens database transactions and decides how durable
their commits are.

The domain modules do their work on a connection they are given; only the service layer
(through a ``UnitOfWork``) begins, commits and retries transactions. Each service method
that writes declares its *durability intent* with ``@policy``:

* ``Durability.DURABLE`` (the default): the call is answered only once its commit is on
  disk (fsynced on SQLite at ``synchronous=FULL``; a synchronous commit on PostgreSQL).
* ``Durability.MAY_BE_LAZY``: losing the commit in a power cut (never in a process crash)
  is harmless, for a reason argued at the call (``TxnService.open_txns``, ``commit_txn``);
  it may commit without a flush, and the next durable commit flushes it along. The work
  can still find out, inside its transaction, that this time it must be durable after all
  and say so with ``require_durable(conn)``. SQLite commits it at ``synchronous=NORMAL``,
  PostgreSQL with ``SET LOCAL synchronous_commit = off`` (the mechanism is the store's,
  hms_txn.store.engine); where lazy commits do not exist (SQLite at
  ``synchronous=NORMAL``) this is the same as DURABLE.

``@policy`` also gives the call's ``Route``: how the event-loop server
(``hms_txn.wire.event_loop``) serves it. The loop asks the service layer for the route of
each call it frames (``ServiceRouter``) and keeps no method lists of its own.

After every write, the notification events it appended are handed to ``on_commit`` (the
metadata cache evicts what this process changed, so a client reads its own writes here).

Two forms of a transaction call. Where the store offers it (``functions``: PostgreSQL),
a transaction call is one statement, a function of the database doing the call's reads,
checks and writes (hms_txn.store.pg_functions), and ``call`` runs it in autocommit: the
statement is the transaction, one round trip instead of BEGIN, SET LOCAL, a statement per
step and COMMIT. Its durability is declared here as for ``write``: ``MAY_BE_LAZY``
reaches the function, which commits its implicit transaction without a flush unless it
finds it must be durable (the same rules ``require_durable`` applies on the Python path).
Everywhere else (SQLite) the call's Python path runs in ``write``/``read``. The service
methods pick the form (hms_txn.domain.txn.one_statement says why the choice is theirs).
"""

from __future__ import annotations

import contextlib
import enum
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

from sqlalchemy.engine import Connection

from hms_txn.domain.events import notifications
from hms_txn.store import Store
from hms_txn.store.engine import WriterBusy
from hms_txn.wire.event_loop import Route

T = TypeVar("T")


class Durability(enum.Enum):
    DURABLE = "durable"
    MAY_BE_LAZY = "may be lazy"


@dataclass(frozen=True)
class CallPolicy:
    route: Route = Route.POOL
    durability: Durability = Durability.DURABLE


DEFAULT_POLICY = CallPolicy()


def policy(*, route: Route = Route.POOL,
           durability: Durability = Durability.DURABLE) -> Callable[[T], T]:
    """Declare a service method's route and durability intent (see the module docstring)."""
    declared = CallPolicy(route, durability)

    def mark(method: T) -> T:
        method.call_policy = declared  # type: ignore[attr-defined]
        return method

    return mark


def policy_of(method: Callable) -> CallPolicy:
    return getattr(method, "call_policy", DEFAULT_POLICY)


class UnitOfWork:
    """Transactions over one ``Store`` for the service layer."""

    def __init__(self, store: Store,
                 on_commit: Callable[[Sequence[notifications.Written]], None] | None = None):
        self.store = store
        self.on_commit = on_commit

    @property
    def lazy_commits(self) -> bool:
        """Whether ``MAY_BE_LAZY`` can commit without a flush here (work that must find out,
        at a cost, whether it may stay lazy only asks when this holds)."""
        return self.store.lazy_commits

    def write(self, work: Callable[[Connection], T],
              durability: Durability = Durability.DURABLE) -> T:
        """Run ``work(conn)`` in one write transaction (retried on deadlocks and
        serialization failures); its result once committed as ``durability`` says, or what
        it raised (then nothing of it was committed)."""
        written: list[notifications.Written] = []

        def unit(conn: Connection) -> T:
            try:
                result = work(conn)
            finally:
                # Taken on failure too (and dropped then): the transaction or savepoint
                # that wrote them is rolled back.
                written[:] = notifications.take_written(conn)
            return result

        result = self.store.transaction(unit, durable=durability is Durability.DURABLE)
        if written and self.on_commit is not None:
            self.on_commit(written)
        return result

    @property
    def functions(self):
        """The one-statement form of the transaction calls (``store.txn_functions.
        TxnFunctions``) where the store has it, else None: the store decides, by dialect."""
        return self.store.functions

    def call(self, work: Callable[[Connection], T],
             durability: Durability = Durability.DURABLE) -> T:
        """Run ``work(conn)``, which sends one statement (a call of ``functions``), as a
        transaction of its own (autocommit), committed as ``durability`` says (see the
        module docstring); retried on deadlocks and serialization failures."""
        written: list[notifications.Written] = []

        def unit(conn: Connection) -> T:
            try:
                return work(conn)
            finally:
                written[:] = notifications.take_written(conn)

        result = self.store.one_statement(unit, lazy=durability is Durability.MAY_BE_LAZY)
        if written and self.on_commit is not None:
            self.on_commit(written)
        return result

    def read(self, work: Callable[[Connection], T], *, snapshot: bool = True) -> T:
        """Run ``work(conn)`` in a read-only transaction: one consistent snapshot.
        ``snapshot=False``: ``work``'s statements need no common snapshot (each is
        consistent by itself), so on PostgreSQL they run without BEGIN and COMMIT, two
        round trips fewer (see ``Store.read``)."""
        return self.store.read_call(work, snapshot=snapshot)

    @staticmethod
    def require_durable(conn: Connection) -> None:
        """Inside a ``MAY_BE_LAZY`` write: this one must be durable after all."""
        Store.insist_durable(conn)

    def make_durable(self) -> None:
        """Return once every commit so far is on disk (a no-op unless lazy commits
        happened since the last durable one)."""
        self.store.make_durable()

    @contextlib.contextmanager
    def batch(self, durabilities: Iterable[Durability], *, wait: bool) -> Iterator[None]:
        """One database transaction for every ``write`` this thread makes inside the block
        (see ``Store.batch``); lazy only if every call in it may be. Raises ``WriterBusy``
        before running anything when not to ``wait`` for another thread's write."""
        lazy = all(d is Durability.MAY_BE_LAZY for d in durabilities)
        with self.store.batch(lazy=lazy, wait=wait):
            yield


__all__ = ["CallPolicy", "DEFAULT_POLICY", "Durability", "Route", "UnitOfWork", "WriterBusy",
           "policy", "policy_of"]
