"""One semantics, two implementations: random sequences of transaction calls, from several
clients, through a server on SQLite (the transaction calls' Python path) and a server on
PostgreSQL (each call one PL/pgSQL function: hms_txn.store.pg_functions); every answer,
exception and message included, must be the same, and so must the transaction tables and
the notification log after each sequence.

Both servers live for the module and get exactly the same calls in the same order, so
their id counters (transactions, locks, write ids, events) stay equal and answers can be
compared as they are. The clients take turns (one call at a time, in the sequence's
order): answers are then determined by the calls, which is what makes them comparable;
lock waits between clients happen all the same. Each sequence works in a database of its
own (locks and write ids of one sequence never meet another's) and ends by aborting what
it left open; snapshots span every sequence so far. Hypothesis draws at least
``SEQUENCES`` sequences per run (no example database: each run draws anew) and shrinks a
failing one to a short reproduction.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from hms_txn.domain.events.event_messages import formats
from hms_txn.store.schema import (completed_txn_components, hive_locks, next_lock_id,
                                  next_txn_id, next_write_id, notification_log,
                                  txn_components, txn_to_write_id, txns, write_set)
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.support.servers import InProcessServer

pytestmark = pytest.mark.postgres

SEQUENCES = 200
CLIENTS = 3
UNKNOWN = 10**9          # a transaction or lock id no server handed out

# -- the calls ------------------------------------------------------------------------------
# A step is (client, call, arguments); transactions and locks are named by their index
# among those the sequence made so far (``ref``: wraps around; -1 is UNKNOWN).

_ref = st.integers(min_value=-1, max_value=7)
# Weighted towards what makes locks wait and writes conflict: one hot table, table-level
# writes, updates.
_table = st.sampled_from(["t0", "t0", "t0", "t1"])
_component = st.tuples(
    st.sampled_from([T.LockType.SHARED_WRITE, T.LockType.SHARED_WRITE, T.LockType.EXCLUSIVE,
                     T.LockType.EXCL_WRITE, T.LockType.SHARED_READ, T.LockType.SHARED_READ]),
    st.sampled_from(["table", "table", "partition", "db"]), _table,
    st.sampled_from(["p=0", "p=0", "p=1"]),
    st.sampled_from([T.DataOperationType.UPDATE, T.DataOperationType.UPDATE,
                     T.DataOperationType.DELETE, T.DataOperationType.INSERT,
                     T.DataOperationType.SELECT, None]),
    st.sampled_from([True, True, True, None, False]))
_calls = {
    "open": st.tuples(st.integers(1, 3), st.sampled_from(
        [T.TxnType.DEFAULT, T.TxnType.DEFAULT, T.TxnType.READ_ONLY])),
    "commit": st.tuples(_ref, st.sampled_from([None, False, False, True])),
    "abort": st.tuples(_ref),
    "abort_txns": st.tuples(st.lists(_ref, min_size=1, max_size=3)),
    "alloc": st.tuples(_table, st.lists(_ref, min_size=1, max_size=3)),
    "lock": st.tuples(st.one_of(_ref, st.none()), st.lists(_component, min_size=1, max_size=3),
                      st.booleans()),
    "check_lock": st.tuples(_ref),
    "unlock": st.tuples(_ref),
    "heartbeat": st.tuples(st.one_of(st.none(), _ref), st.one_of(st.none(), _ref)),
    "heartbeat_range": st.tuples(_ref, st.integers(0, 4)),
    "open_txns": st.tuples(),
    "open_txns_info": st.tuples(),
    "valid_write_ids": st.tuples(st.booleans()),
    "show_locks": st.tuples(),
    # two writers of one table racing (the write-write conflict check): open both, both
    # lock for update or delete, commit the first, then the second
    "write_race": st.tuples(_table, st.sampled_from([T.DataOperationType.UPDATE,
                                                      T.DataOperationType.DELETE]),
                            st.sampled_from([None, False, True]), st.booleans()),
}
# how often each call comes, in a draw of 26
_WEIGHTS = {"open": 4, "commit": 4, "lock": 6, "check_lock": 2, "alloc": 2, "write_race": 1}
_kinds = [k for k in _calls for _ in range(_WEIGHTS.get(k, 1))]
_step = st.tuples(st.integers(0, CLIENTS - 1), st.sampled_from(_kinds).flatmap(
    lambda kind: _calls[kind].map(lambda args: (kind, *args))))


@pytest.fixture(scope="module")
def servers(tmp_path_factory, postgres):
    root = tmp_path_factory.mktemp("equivalence")
    started = []
    for name, url in (("sqlite", f"jdbc:sqlite:{root}/sqlite.db"),
                      ("postgres", postgres.create_database())):
        started.append(InProcessServer(str(root / name), {
            "javax.jdo.option.ConnectionURL": url,
            "hive.metastore.warehouse.dir": str(root / name / "wh")}))
    clients = [[s.client() for _ in range(CLIENTS)] for s in started]
    yield started, clients
    for row in clients:
        for c in row:
            c.close()
    for s in started:
        s.stop()


class _Sequence:
    """One sequence's run on one server: its clients, the ids it made, its database."""

    def __init__(self, clients, db: str):
        self.clients = clients
        self.db = db
        self.txns: list[int] = []
        self.locks: list[int] = []
        self.snapshot: str | None = None

    def txn(self, ref: int) -> int:
        """-1: UNKNOWN; -2, -3: the last but one and the last opened (write_race)."""
        if ref in (-2, -3):
            return self.txns[-2] if ref == -2 else self.txns[-1]
        return UNKNOWN if ref < 0 or not self.txns else self.txns[ref % len(self.txns)]

    def lock_id(self, ref: int) -> int:
        return UNKNOWN if ref < 0 or not self.locks else self.locks[ref % len(self.locks)]

    def run(self, client: int, call: tuple):
        """The outcome of one call: its answer, normalized, or its exception."""
        try:
            return self._call(self.clients[client], call)
        except T.TApplicationException as err:
            return ("TApplicationException", err.message)
        except Exception as err:  # noqa: BLE001 - the outcome is what we compare
            return (type(err).__name__, getattr(err, "message", str(err)))

    def _call(self, c, call: tuple):
        name, *args = call
        if name == "open":
            ids = c.open_txns(T.OpenTxnRequest(num_txns=args[0], user="u", hostname="h",
                                               txn_type=args[1])).txn_ids
            self.txns.extend(ids)
            return ids
        if name == "commit":
            return c.commit_txn(T.CommitTxnRequest(txnid=self.txn(args[0]),
                                                   exclWriteEnabled=args[1]))
        if name == "abort":
            return c.abort_txn(T.AbortTxnRequest(txnid=self.txn(args[0])))
        if name == "abort_txns":
            return c.abort_txns(T.AbortTxnsRequest(txn_ids=[self.txn(r) for r in args[0]]))
        if name == "alloc":
            rsp = c.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
                dbName=self.db, tableName=args[0], txnIds=[self.txn(r) for r in args[1]]))
            return [(x.txnId, x.writeId) for x in rsp.txnToWriteIds]
        if name == "lock":
            txn_ref, comps, zero_wait = args
            rsp = c.lock(T.LockRequest(
                component=[self._component(*comp) for comp in comps],
                txnid=None if txn_ref is None else self.txn(txn_ref), user="u", hostname="h",
                zeroWaitReadEnabled=zero_wait))
            self.locks.append(rsp.lockid)
            return rsp
        if name == "check_lock":
            return c.check_lock(T.CheckLockRequest(lockid=self.lock_id(args[0])))
        if name == "unlock":
            return c.unlock(T.UnlockRequest(lockid=self.lock_id(args[0])))
        if name == "heartbeat":
            lock_ref, txn_ref = args
            return c.heartbeat(T.HeartbeatRequest(
                lockid=None if lock_ref is None else self.lock_id(lock_ref),
                txnid=None if txn_ref is None else self.txn(txn_ref)))
        if name == "heartbeat_range":
            low = self.txn(args[0])
            rsp = c.heartbeat_txn_range(T.HeartbeatTxnRangeRequest(min=low, max=low + args[1]))
            return sorted(rsp.aborted), sorted(rsp.nosuch)
        if name == "open_txns":
            rsp = c.get_open_txns()
            opened = [t for i, t in enumerate(rsp.open_txns)
                      if not (rsp.abortedBits and i // 8 < len(rsp.abortedBits)
                              and rsp.abortedBits[i // 8] >> (i % 8) & 1)]
            aborted = sorted(set(rsp.open_txns) - set(opened))
            self.snapshot = (f"{rsp.txn_high_water_mark}:{min(opened, default=9**18)}:"
                             f"{','.join(map(str, opened))}:{','.join(map(str, aborted))}")
            return rsp
        if name == "open_txns_info":
            rsp = c.get_open_txns_info()
            for info in rsp.open_txns:
                info.startedTime = info.lastHeartbeatTime = None
            return rsp
        if name == "valid_write_ids":
            rsp = c.get_valid_write_ids(T.GetValidWriteIdsRequest(
                fullTableNames=[f"{self.db}.t0", f"{self.db}.t1"],
                validTxnList=self.snapshot if args[0] else None))
            return rsp
        if name == "write_race":
            table, op, excl, partitioned = args
            first, second = self._call(c, ("open", 2, T.TxnType.DEFAULT))
            comp = ("partition" if partitioned else "table", table, "p=0")
            return [self.run(0, call) for call in (
                ("alloc", table, [-2, -3]),
                ("lock", -2, [(T.LockType.SHARED_WRITE, *comp, op, True)], False),
                ("lock", -3, [(T.LockType.SHARED_WRITE, *comp, op, True)], False),
                ("commit", -2, excl), ("commit", -3, excl))]
        if name == "show_locks":
            rsp = c.show_locks(T.ShowLocksRequest(dbname=self.db))
            for e in rsp.locks:
                e.lastheartbeat = e.acquiredat = None
            return rsp
        raise AssertionError(name)

    def _component(self, ltype, level, table, part, op, acid):
        return T.LockComponent(
            type=ltype, level={"db": 1, "table": 2, "partition": 3}[level], dbname=self.db,
            tablename=None if level == "db" else table,
            partitionname=part if level == "partition" else None, operationType=op,
            isTransactional=acid)


def _state(server) -> dict:
    """The transaction tables and the log, without times (each server's clock)."""
    def read(conn):
        out = {}
        for table, drop in ((txns, {"started_ms", "last_heartbeat_ms", "ended_ms"}),
                            (hive_locks, {"last_heartbeat_ms", "acquired_ms"}),
                            (txn_to_write_id, set()), (next_write_id, set()),
                            (next_txn_id, set()), (next_lock_id, set()),
                            (txn_components, {"id"}), (completed_txn_components, {"id", "commit_ms"}),
                            (write_set, {"id"})):
            cols = [c for c in table.columns if c.name not in drop]
            out[table.name] = sorted((tuple(r) for r in conn.execute(select(*cols)).all()),
                                     key=repr)
        events = []
        for r in conn.execute(select(notification_log).order_by(notification_log.c.event_id)):
            message = formats.decode(r.message, r.message_format)
            message.pop("timestamp", None)
            events.append((r.event_id, r.event_type, r.db_name, r.tbl_name, r.cat_name,
                           r.message_format, message))
        out["notification_log"] = events
        return out
    return server.ms.units.read(read)


_counter = itertools.count()


def test_random_call_sequences_answer_alike_on_sqlite_and_postgresql(servers):
    (sqlite, postgres), (sqlite_clients, pg_clients) = servers
    ran = []

    @settings(max_examples=SEQUENCES, deadline=None, database=None,
              phases=[Phase.generate, Phase.shrink],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(_step, min_size=8, max_size=24))
    def sequence(steps):
        # every sequence starts with transactions to refer to
        steps = [(0, ("open", 2, T.TxnType.DEFAULT))] + steps
        db = f"rdb{next(_counter)}"
        runs = _Sequence(sqlite_clients, db), _Sequence(pg_clients, db)
        for i, (client, call) in enumerate(steps):
            lite, pg = (run.run(client, call) for run in runs)
            assert lite == pg, f"step {i} {call} by client {client}: sqlite {lite!r} != postgres {pg!r}"
        # the end: abort what is left (compared too), then the tables and the log
        for run in runs:
            run.run(0, ("abort_txns", list(range(len(run.txns)))))
        assert _state(sqlite) == _state(postgres)
        ran.append(len(steps))

    sequence()
    assert len(ran) >= SEQUENCES
