"""Per-table write ids: allocation, reader snapshots, dynamic partitions, conflicts.

A write id numbers a transaction's write to one table: ids are contiguous per table from 1
(a ``next_write_id`` row per table, locked ``FOR UPDATE`` while allocating), and a
transaction keeps one write id per table however often it asks. Readers turn their
ValidTxnList into a ValidWriteIdList per table with ``get_valid_write_ids``;
the string forms are those of ``orc_acid.valid_ids``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from sqlalchemy import BigInteger, String, bindparam, cast, func, insert, null, select, union_all
from sqlalchemy.engine import Connection

from orc_acid.valid_ids import ValidIdListError, ValidTxnList, ValidWriteIdList

from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.common.errors import Internal, InvalidInput, NoSuchTxn, TxnAborted
from hms_txn.store.prepared import Prepared
from hms_txn.store.sql import ListQuery, reserve_ids, statements_are_round_trips
from hms_txn.store.schema import next_write_id, txn_components, txn_to_write_id, txns, write_set
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.domain.txn.txn_records import (ABORTED, COMMITTED, OPEN, UPDATE_DELETE, DataOp,
                                            TxnType, require_open, txn_id_str)

log = logging.getLogger(__name__)

# Statements of allocate_table_write_ids, built once and executed with bound values (see
# hms_txn.txn). One transaction, the usual request, has its own statements: an IN list needs
# SQLAlchemy's parameter expansion, which hms_txn.store.prepared leaves to conn.execute.
_txn_states = select(txns.c.txn_id, txns.c.state, txns.c.txn_type).order_by(txns.c.txn_id)
_TXN_STATE_LOCKED = Prepared(_txn_states.where(txns.c.txn_id == bindparam("p_txn"))
                             .with_for_update())
_TXN_STATES_LOCKED = Prepared(_txn_states
                              .where(txns.c.txn_id.in_(bindparam("p_txns", expanding=True)))
                              .with_for_update())
_t2w = txn_to_write_id.c
_write_ids = (select(_t2w.txn_id, _t2w.write_id).where(_t2w.db_name == bindparam("p_db"))
              .where(_t2w.tbl_name == bindparam("p_tbl")))
_EXISTING_WRITE_ID = Prepared(_write_ids.where(_t2w.txn_id == bindparam("p_txn")))
_EXISTING_WRITE_IDS = Prepared(_write_ids
                               .where(_t2w.txn_id.in_(bindparam("p_txns", expanding=True))))
_INSERT_WRITE_IDS = Prepared(insert(txn_to_write_id))
# get_valid_write_ids (see _snapshot_write_ids): three statements for all the tables asked
# about together. Tables are named by two bound lists, their databases and their names; the
# pairs asked for are picked out of that cross product in Python.
_nw = next_write_id.c
_NEXT_WRITE_IDS = ListQuery(
    lambda in_list: select(_nw.db_name, _nw.tbl_name, _nw.next_id)
    .where(in_list(_nw.db_name, "p_dbs")).where(in_list(_nw.tbl_name, "p_tbls")),
    {"p_dbs": String, "p_tbls": String})
_tables_ids = select(_t2w.db_name, _t2w.tbl_name, _t2w.txn_id, _t2w.write_id)
_WRITE_IDS_ABOVE = ListQuery(
    lambda in_list: _tables_ids.where(in_list(_t2w.db_name, "p_dbs"))
    .where(in_list(_t2w.tbl_name, "p_tbls")).where(_t2w.txn_id > bindparam("p_txn")),
    {"p_dbs": String, "p_tbls": String})
# The counters, the ids above the snapshot and those of its exceptions (below) in one
# statement, where statements are round trips.
_COUNTERS_AND_IDS = ListQuery(
    lambda in_list: union_all(
        select(_nw.db_name, _nw.tbl_name, _nw.next_id, cast(null(), BigInteger))
        .where(in_list(_nw.db_name, "p_dbs")).where(in_list(_nw.tbl_name, "p_tbls")),
        _tables_ids.where(in_list(_t2w.db_name, "p_dbs"))
        .where(in_list(_t2w.tbl_name, "p_tbls")).where(_t2w.txn_id > bindparam("p_txn")),
        _tables_ids.where(in_list(_t2w.txn_id, "p_txns"))),
    {"p_dbs": String, "p_tbls": String, "p_txns": BigInteger})
# By transaction only, whatever the table: one walk of the txn_id index per exception, where
# adding the table lists would let the planner probe every (table, exception) pair.
_WRITE_IDS_OF_TXNS = ListQuery(lambda in_list: _tables_ids.where(in_list(_t2w.txn_id, "p_txns")),
                               {"p_txns": BigInteger})
# Beyond this many exceptions in a snapshot, reading each table's ids up to its high
# watermark beats looking each exception up.
MAX_EXCEPTIONS_LOOKED_UP = 1000
_WRITE_IDS_UP_TO = Prepared(_write_ids.where(_t2w.write_id <= bindparam("p_wid")))


@dataclass
class TableWriteIds:
    """One table's entry of get_valid_write_ids (Thrift ``TableValidWriteIds``)."""
    full_table_name: str
    hwm: int
    invalid_write_ids: list[int]
    aborted: list[bool]           # parallel to invalid_write_ids
    min_open_write_id: int | None

    def to_valid_write_id_list(self) -> ValidWriteIdList:
        return ValidWriteIdList(
            self.full_table_name, self.hwm,
            open_ids=[w for w, a in zip(self.invalid_write_ids, self.aborted) if not a],
            aborted_ids=[w for w, a in zip(self.invalid_write_ids, self.aborted) if a],
            min_open=self.min_open_write_id,
        )


def split_table_name(full_name: str) -> tuple[str, str]:
    if not full_name or "." not in full_name:
        raise InvalidInput(f"Invalid fullTableName {full_name!r}: expected <db>.<table>")
    db, _, table = full_name.partition(".")
    if not db or not table:
        raise InvalidInput(f"Invalid fullTableName {full_name!r}: expected <db>.<table>")
    return db.lower(), table.lower()


# -- allocation -------------------------------------------------------------------------


def allocate_table_write_ids(conn: Connection, db_name: str, table_name: str,
                             txn_ids: Sequence[int], *, messages: em.MessageContext,
                             repl_policy: str | None = None,
                             src_txn_to_write_ids: Sequence[tuple[int, int]] | None = None,
                             reallocate: bool = False) -> list[tuple[int, int]]:
    """Give each transaction a write id on the table; returns (txn id, write id) pairs.

    All-or-nothing: every transaction must be open (and not READ_ONLY), else nothing is
    allocated. A transaction that already has a write id on the table keeps it, and only
    fresh allocations are announced with an ALLOC_WRITE_ID_EVENT (``messages``).
    """
    db, table, ids = allocation_request(db_name, table_name, txn_ids, repl_policy=repl_policy,
                                        src_txn_to_write_ids=src_txn_to_write_ids,
                                        reallocate=reallocate)
    if len(ids) == 1:
        found = _TXN_STATE_LOCKED.execute(conn, {"p_txn": ids[0]})
    else:
        found = _TXN_STATES_LOCKED.execute(conn, {"p_txns": ids})
    rows = {r.txn_id: r for r in found}
    where = f"Write ID allocation on {db}.{table} failed"
    missing = [t for t in ids if t not in rows]
    aborted = [t for t in ids if t in rows and rows[t].state == ABORTED]
    committed = [t for t in ids if t in rows and rows[t].state == COMMITTED]
    read_only = [t for t in ids if t in rows and rows[t].state == OPEN
                 and rows[t].txn_type == TxnType.READ_ONLY]
    if aborted:
        raise TxnAborted(f"{where}: {_txns(aborted)} already aborted")
    if missing or committed:
        parts = []
        if missing:
            parts.append(f"no such transaction {_txns(missing)}")
        if committed:
            parts.append(f"{_txns(committed)} already committed")
        raise NoSuchTxn(f"{where}: " + "; ".join(parts))
    if read_only:
        raise Internal(f"{where}: {_txns(read_only)} are read-only transactions")
    if len(ids) == 1:
        pairs = _EXISTING_WRITE_ID.execute(conn, {"p_db": db, "p_tbl": table,
                                                  "p_txn": ids[0]})
    else:
        pairs = _EXISTING_WRITE_IDS.execute(conn, {"p_db": db, "p_tbl": table,
                                                   "p_txns": ids})
    existing = dict(pairs.all())
    fresh = [t for t in ids if t not in existing]
    if fresh:
        first = reserve_ids(conn, next_write_id, len(fresh),
                            key={"db_name": db, "tbl_name": table})
        new_pairs = [(t, first + i) for i, t in enumerate(fresh)]
        t2w_rows = [{"txn_id": t, "db_name": db, "tbl_name": table, "write_id": w}
                    for t, w in new_pairs]
        _INSERT_WRITE_IDS.execute(conn, t2w_rows[0] if len(t2w_rows) == 1 else t2w_rows)
        existing.update(new_pairs)
        notifications.append(conn, messages.message_format,
                             em.alloc_write_ids(messages, db, table, new_pairs))
    return [(t, existing[t]) for t in ids]


def allocation_request(db_name: str, table_name: str, txn_ids: Sequence[int], *,
                       repl_policy: str | None = None,
                       src_txn_to_write_ids: Sequence[tuple[int, int]] | None = None,
                       reallocate: bool = False) -> tuple[str, str, list[int]]:
    """An ``allocate_table_write_ids`` request checked (both forms of the call): the
    database and table lower-cased, the transactions ascending and distinct."""
    if repl_policy or src_txn_to_write_ids:
        log.info("allocate_table_write_ids: replication fields (replPolicy=%r) are accepted "
                 "and ignored", repl_policy)
    if reallocate:
        log.info("allocate_table_write_ids: reallocate=true is accepted and ignored")
    db, table = (db_name or "").lower(), (table_name or "").lower()
    if not db or not table:
        raise InvalidInput("allocate_table_write_ids needs dbName and tableName")
    ids = sorted(set(int(t) for t in (txn_ids or ())))
    if not ids:
        raise InvalidInput("allocate_table_write_ids needs at least one transaction id")
    return db, table, ids


def get_max_allocated_write_id(conn: Connection, db_name: str, table_name: str) -> int:
    db, table = (db_name or "").lower(), (table_name or "").lower()
    value = conn.execute(
        select(next_write_id.c.next_id).where(next_write_id.c.db_name == db)
        .where(next_write_id.c.tbl_name == table)
    ).scalar()
    return 0 if value is None else int(value) - 1


def seed_write_id(conn: Connection, db_name: str, table_name: str, seed: int) -> None:
    """Hive's TxnHandler.seedWriteId (MSCK REPAIR of a transactional table whose files carry
    write ids the metastore never allocated): the table's next write id becomes
    ``seed + 1``. Only for a table that has never had a write id, as Hive (whose insert
    then fails on the key of NEXT_WRITE_ID)."""
    db, table = (db_name or "").lower(), (table_name or "").lower()
    if not db or not table:
        raise InvalidInput("seed_write_id needs dbName and tableName")
    if conn.execute(select(next_write_id.c.next_id).where(next_write_id.c.db_name == db)
                    .where(next_write_id.c.tbl_name == table)).first() is not None:
        raise InvalidInput(f"Write ids of {db}.{table} cannot be seeded: the table already "
                           f"has a write id counter")
    conn.execute(insert(next_write_id).values(db_name=db, tbl_name=table, next_id=seed + 1))


# -- reader snapshots --------------------------------------------------------------------


def get_valid_write_ids(conn: Connection, full_table_names: Sequence[str],
                        valid_txn_list: str | None = None,
                        write_id: int | None = None) -> list[TableWriteIds]:
    """Each table's write ids as a reader's snapshot sees them (in a read transaction)."""
    names = list(full_table_names or ())
    if not names:
        raise InvalidInput("get_valid_write_ids needs at least one table name")
    split = [split_table_name(n) for n in names]
    if valid_txn_list is not None:
        snapshot = parse_valid_txn_list(valid_txn_list)
    elif write_id is not None:
        snapshot = _snapshot_for_write_id(conn, split[0], names[0], write_id)
    else:
        snapshot = _current_snapshot(conn)
    found = _snapshot_write_ids(conn, split, snapshot)
    return [TableWriteIds(full, *found[key]) for full, key in zip(names, split)]


def parse_valid_txn_list(valid_txn_list: str) -> ValidTxnList:
    """A reader's ValidTxnList string, or InvalidInput."""
    try:
        return ValidTxnList.parse(valid_txn_list)
    except ValidIdListError as err:
        raise InvalidInput(f"invalid validTxnList: {err}") from None


def _current_snapshot(conn: Connection) -> ValidTxnList:
    ot = TxnManager.get_open_txns(conn)
    return ValidTxnList(ot.hwm, open_ids=[t for t in ot.txn_ids if t not in ot.aborted],
                        aborted_ids=sorted(ot.aborted))


def _snapshot_for_write_id(conn: Connection, key: tuple[str, str], full: str,
                           write_id: int) -> ValidTxnList:
    db, table = key
    txn_id = conn.execute(
        select(txn_to_write_id.c.txn_id).where(txn_to_write_id.c.db_name == db)
        .where(txn_to_write_id.c.tbl_name == table)
        .where(txn_to_write_id.c.write_id == write_id)
    ).scalar()
    if txn_id is None:
        raise InvalidInput(f"invalid write id {write_id} for table {full}")
    ot = TxnManager.get_open_txns(conn)
    # The snapshot as seen by that transaction: everything below it, itself excluded.
    hwm = min(ot.hwm, txn_id)
    exceptions = [t for t in ot.txn_ids if t <= hwm and t != txn_id]
    return ValidTxnList(hwm, open_ids=[t for t in exceptions if t not in ot.aborted],
                        aborted_ids=[t for t in exceptions if t in ot.aborted])


# -- dynamic partitions and conflicts ----------------------------------------------------


def add_dynamic_partitions(conn: Connection, txn_id: int, write_id: int, db_name: str,
                           table_name: str, partition_names: Sequence[str],
                           operation_type: int | None = None) -> None:
    db, table = (db_name or "").lower(), (table_name or "").lower()
    # An old client that does not say what it did is treated as updating (Hive does too).
    op = int(operation_type) if operation_type is not None else int(DataOp.UPDATE)
    if op == DataOp.UNSET:
        op = int(DataOp.UPDATE)
    row = require_open(conn, txn_id)
    if row.txn_type == TxnType.READ_ONLY:
        log.info("add_dynamic_partitions on read-only %s ignored", txn_id_str(txn_id))
        return
    parts = list(partition_names or ())
    if parts:
        conn.execute(insert(txn_components), [
            {"txn_id": txn_id, "db_name": db, "tbl_name": table, "part_name": p,
             "operation_type": op, "write_id": write_id}
            for p in parts
        ])


def get_latest_txnid_in_conflict(conn: Connection, txn_id: int) -> int:
    """Highest committed transaction that updated/deleted what ``txn_id`` updates/deletes
    after ``txn_id`` started; 0 when there is none."""
    cur = conn.execute(
        select(txn_components.c.db_name, txn_components.c.tbl_name,
               txn_components.c.part_name).distinct()
        .where(txn_components.c.txn_id == txn_id)
        .where(txn_components.c.operation_type.in_(UPDATE_DELETE))
    ).all()
    best = 0
    for db, table, part in cur:
        query = (select(func.max(write_set.c.txn_id))
                 .where(write_set.c.db_name == db).where(write_set.c.tbl_name == table)
                 .where(write_set.c.commit_id >= txn_id)
                 .where(write_set.c.operation_type.in_(UPDATE_DELETE)))
        if part is not None:
            query = query.where(write_set.c.part_name == part)
        value = conn.execute(query).scalar()
        if value is not None and value > best:
            best = int(value)
    return best


def _snapshot_write_ids(conn: Connection, tables: Sequence[tuple[str, str]],
                        snapshot: ValidTxnList) -> dict[tuple[str, str], tuple]:
    """Each (db, table)'s write ids as ``snapshot`` sees them: (high watermark, invalid write
    ids, their aborted flags, lowest open write id or None).

    ``txn_to_write_id`` keeps every write id ever allocated, so no statement here reads a
    table's history; each walks an index over the part that can matter: write ids of
    transactions above the snapshot's high watermark, and of its exceptions. All the tables
    are read together, two statements however many are asked about, and one on PostgreSQL,
    where every statement is a round trip (statements per table made 10 tables cost ~30 of
    them); that one statement needs no transaction around it.

    The high watermark is the highest write id of any transaction the snapshot covers.
    Write ids are handed out in allocation order, not txn order (txn 1 may allocate after
    txn 2), and each table's are contiguous from 1 up to its ``next_write_id`` counter, so
    it is the highest allocated id not held by a transaction above the snapshot. When every
    allocated id is, the counter decides, as Hive's TxnHandler does.
    """
    wanted = set(tables)
    lists = {"p_dbs": ListQuery.bind(conn, sorted({db for db, _ in wanted})),
             "p_tbls": ListQuery.bind(conn, sorted({table for _, table in wanted}))}
    txn_hwm = snapshot.high_watermark
    # (write id, txn id) of the transactions that matter, per table.
    relevant: dict[tuple[str, str], set[tuple[int, int]]] = {key: set() for key in wanted}

    def take(rows) -> None:
        for db, table, txn_id, wid in rows:
            if (db, table) in wanted:
                relevant[(db, table)].add((int(wid), int(txn_id)))

    params = {**lists, "p_txn": txn_hwm}
    exceptions = snapshot.exceptions
    looked_up = len(exceptions) <= MAX_EXCEPTIONS_LOOKED_UP
    one_statement = statements_are_round_trips(conn)
    if one_statement:
        # One statement: the counters (a counter's row is the one without a write id), the
        # ids above the snapshot and those of its exceptions. Within it everything is one
        # snapshot of the database, so the caller needs no transaction around it.
        rows = _COUNTERS_AND_IDS.execute(conn, {
            **params, "p_txns": ListQuery.bind(conn, exceptions if looked_up else [])}).all()
        allocated = {(db, table): int(nxt) - 1 for db, table, nxt, wid in rows if wid is None}
        take(r for r in rows if r[3] is not None)
    else:
        allocated = {(db, table): int(nxt) - 1
                     for db, table, nxt in _NEXT_WRITE_IDS.execute(conn, lists)}
        take(_WRITE_IDS_ABOVE.execute(conn, params))
    hwms = high_watermarks(allocated, relevant, txn_hwm)
    if not looked_up:
        # a long exception list: read the tables' ids instead
        for key in wanted:
            if hwms[key] > 0:
                relevant[key] = {(int(w), int(t)) for t, w in _WRITE_IDS_UP_TO.execute(
                    conn, {"p_db": key[0], "p_tbl": key[1], "p_wid": hwms[key]})}
    elif exceptions and any(hwms.values()) and not one_statement:
        take(_WRITE_IDS_OF_TXNS.execute(conn, {"p_txns": ListQuery.bind(conn, exceptions)}))
    return snapshot_lists(hwms, relevant, snapshot)


def high_watermarks(allocated: dict[tuple[str, str], int],
                    relevant: dict[tuple[str, str], set[tuple[int, int]]],
                    txn_hwm: int) -> dict[tuple[str, str], int]:
    """Each table's write id high watermark for a snapshot whose transaction high watermark
    is ``txn_hwm``: ``allocated`` the highest write id allocated, ``relevant`` the (write
    id, txn id) pairs of the transactions above the snapshot (and maybe others). See
    ``_snapshot_write_ids``."""
    hwms = {}
    for key, ids in relevant.items():
        above = {wid for wid, txn_id in ids if txn_id > txn_hwm}
        top = allocated.get(key, 0)
        while top > 0 and top in above:
            top -= 1
        hwms[key] = top if top > 0 else max(allocated.get(key, 0), 0)
    return hwms


def snapshot_lists(hwms: dict[tuple[str, str], int],
                   relevant: dict[tuple[str, str], set[tuple[int, int]]],
                   snapshot: ValidTxnList) -> dict[tuple[str, str], tuple]:
    """Each table's (high watermark, invalid write ids, their aborted flags, lowest open
    write id or None), from the (write id, txn id) pairs of ``relevant``, which must hold
    those of the snapshot's exceptions."""
    found = {}
    for key, hwm in hwms.items():
        invalid: list[int] = []
        aborted: list[bool] = []
        min_open = None
        for wid, txn_id in sorted(relevant[key]):
            if wid > hwm or snapshot.is_valid(txn_id):
                continue
            invalid.append(wid)
            is_aborted = snapshot.is_aborted(txn_id)
            aborted.append(is_aborted)
            if not is_aborted and min_open is None:
                min_open = wid
        found[key] = (hwm, invalid, aborted, min_open)
    return found


def _txns(ids: Sequence[int]) -> str:
    return ", ".join(txn_id_str(t) for t in ids)
