"""The transaction calls in the store's one-statement form (PostgreSQL's functions,
hms_txn.store.txn_functions): for each call, what the domain prepares for its one
statement and what it makes of the answer: the same values, errors and events as the
call's Python path in this package (``txn``, ``txn_commit``, ``writeids``), which SQLite
runs. The lock calls' form is ``domain.locks.one_statement``, the compactor's claim
``domain.compaction.one_statement``: each concern's own, so the concerns keep their order.

Where the choice is made, and why this module exists. The store knows the dialects: it
offers the one-statement form (``Store.functions``; None where it has none) and turns the
functions' errors into domain errors. The service layer owns units of work: a call in this
form is one statement in autocommit (``UnitOfWork.call``), a call on the Python path a
transaction (``UnitOfWork.write``/``read``), so the service picks the form, by whether the
store offers it. What remains is domain work, and it lives here: checking the request with
the helpers the Python path uses (so the two forms refuse the same requests before the
database is asked), the open-transaction limit and the id reservation's bookkeeping, which
lock components a transaction records, the notification messages (templates the database
completes), and the answers as the domain's values. Every function takes the form as an
argument (``fns``): nothing here asks which database it is on.

The rules each call follows are argued once, on the Python path; pg_functions' SQL
names the function it mirrors. tests/hms_txn/test_txn_equivalence.py drives random call
sequences through both forms and compares every answer and the final state.
"""

from __future__ import annotations

import logging
from typing import Iterable, Sequence

from sqlalchemy.engine import Connection

from orc_acid.valid_ids import ValidTxnList

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.events import notifications
from hms_txn.domain.txn import writeids
from hms_txn.domain.txn.txn import (RESERVE_AHEAD, STATE_CODE_TO_ENUM, OpenTxns, Opened, TxnInfo,
                                TxnManager)
from hms_txn.domain.txn.txn_commit import CommitResult
from hms_txn.domain.txn.txn_records import ABORTED, OPEN, TxnType, now_ms, txn_id_str
from hms_txn.store.txn_functions import TxnFunctions

log = logging.getLogger(__name__)


# -- transactions ------------------------------------------------------------------------------

def open_txns(conn: Connection, fns: TxnFunctions, txns: TxnManager, num_txns: int, user: str,
              hostname: str, *, agent_info: str | None = None, txn_type: int = TxnType.DEFAULT,
              repl_policy: str | None = None, repl_src_txn_ids: Sequence[int] | None = None,
              lazy_commit: bool = False) -> Opened:
    """``TxnManager.open_txns``."""
    request = txns.open_request(num_txns, user, hostname, agent_info=agent_info,
                                txn_type=txn_type, repl_policy=repl_policy,
                                repl_src_txn_ids=repl_src_txn_ids)
    refuse_at = txns.open_limit(request.count)
    read_only = request.txn_type == TxnType.READ_ONLY      # Hive logs no READ_ONLY open
    answer = fns.open_txns(
        conn, count=request.count, txn_type=request.txn_type, now=now_ms(), user=request.user,
        host=request.host, agent=request.agent, reserve_ahead=RESERVE_AHEAD,
        refuse_at=refuse_at, event=None if read_only else txns.templates.open_txns(),
        message_format=txns.messages.message_format)
    if answer.open_count is not None:
        txns.counted_open(answer.open_count, request.count)     # raises when refused
    if lazy_commit:
        txns.reserved_ids_used = True
    notifications.note_written(conn, "OPEN_TXN", None, None, [answer.event_id])
    return Opened(list(range(answer.first, answer.first + request.count)),
                  answer.raised_reservation)


def commit_txn(conn: Connection, fns: TxnFunctions, txns: TxnManager, txn_id: int, *,
               excl_write_enabled: bool | None = None,
               repl_policy: str | None = None) -> CommitResult:
    """``txn_commit.commit_txn`` of a commit without ``keyValue`` or ``writeEventInfos``
    (those take the Python path: they need the catalog's documents). Lazy or not as the
    unit of work said; the function makes it synchronous if it records a write."""
    if repl_policy:
        log.info("commit_txn %s: replPolicy %r accepted and ignored", txn_id_str(txn_id),
                 repl_policy)
    templates = txns.templates
    answer = fns.commit_txn(
        conn, txn_id=txn_id, now=now_ms(), check_conflicts=excl_write_enabled is not True,
        commit_event=templates.commit_txn(), abort_event=templates.abort_txn(),
        compaction_event=templates.commit_compaction(),
        message_format=txns.messages.message_format)
    if answer.outcome == "a":
        return CommitResult(txn_id, already_committed=True, commit_id=answer.commit_id,
                            recorded_writes=False)
    if answer.outcome == "x":
        notifications.note_written(conn, "ABORT_TXN", None, None, answer.event_ids)
        return CommitResult(txn_id, conflict=answer.conflict)
    notifications.note_written(conn, "COMMIT_TXN", None, None, answer.event_ids[:1])
    notifications.note_written(conn, "COMMIT_COMPACTION_EVENT", None, None,
                               answer.event_ids[1:])
    return CommitResult(txn_id, commit_id=answer.commit_id, event_ids=list(answer.event_ids))


def abort_txn(conn: Connection, fns: TxnFunctions, txns: TxnManager, txn_id: int, *,
              repl_policy: str | None = None, error_code: int | None = None) -> bool:
    """``TxnManager.abort_txn``."""
    if repl_policy:
        log.info("abort_txn %s: replPolicy %r accepted and ignored", txn_id_str(txn_id),
                 repl_policy)
    reason = f"aborted by client (errorCode {error_code})" if error_code else None
    aborted, events = fns.abort_txn(conn, txn_id=txn_id, now=now_ms(), reason=reason,
                                    event=txns.templates.abort_txn(),
                                    message_format=txns.messages.message_format)
    if not aborted:
        log.info("abort_txn(%s): already aborted", txn_id_str(txn_id))
    notifications.note_written(conn, "ABORT_TXN", None, None, events)
    return aborted


def abort_txns(conn: Connection, fns: TxnFunctions, txns: TxnManager,
               txn_ids: Sequence[int]) -> list[int]:
    """``TxnManager.abort_txns``."""
    ids = sorted(set(int(t) for t in txn_ids or ()))
    if not ids:
        return []
    aborted, events = fns.abort_txns(conn, txn_ids=ids, now=now_ms(),
                                     event=txns.templates.abort_txn(),
                                     message_format=txns.messages.message_format)
    if len(aborted) != len(ids):
        log.warning("abort_txns: %d of %d transactions were open and got aborted",
                    len(aborted), len(ids))
    notifications.note_written(conn, "ABORT_TXN", None, None, events)
    return list(aborted)


def heartbeat(conn: Connection, fns: TxnFunctions, lock_id: int | None,
              txn_id: int | None) -> None:
    """``locks.heartbeat_lock_in`` and ``txn_records.heartbeat_txn_in``."""
    fns.heartbeat(conn, lock_id=lock_id, txn_id=txn_id, now=now_ms())


def heartbeat_txn_range(conn: Connection, fns: TxnFunctions, min_id: int,
                        max_id: int) -> tuple[set[int], set[int]]:
    """``TxnManager.heartbeat_txn_range``: (aborted, nosuch)."""
    if max_id < min_id:
        return set(), set()
    if max_id - min_id > 1_000_000:
        raise InvalidInput(f"heartbeat_txn_range: range {min_id}..{max_id} is too large")
    rows = fns.heartbeat_txn_range(conn, min_id=min_id, max_id=max_id, now=now_ms())
    open_ids = {t for t, state in rows if state == OPEN}
    aborted = {t for t, state in rows if state == ABORTED}
    return aborted, set(range(min_id, max_id + 1)) - open_ids - aborted


def get_open_txns(conn: Connection, fns: TxnFunctions,
                  exclude_types: Iterable[int] | None = (TxnType.READ_ONLY,)) -> OpenTxns:
    """``TxnManager.get_open_txns``."""
    rows = fns.open_txns_snapshot(conn)
    hwm = int(rows[0][0]) - 1 if rows else 0
    return TxnManager.open_txns_of(
        hwm, [r[1:] for r in rows if r[1] is not None], exclude_types)


def get_open_txns_info(conn: Connection, fns: TxnFunctions) -> tuple[int, list[TxnInfo]]:
    """``TxnManager.get_open_txns_info``."""
    rows = fns.open_txns_info(conn)
    hwm = int(rows[0].o_next) - 1 if rows else 0
    return hwm, [TxnInfo(
        id=r.txn_id, state=STATE_CODE_TO_ENUM[r.state], user=r.user_name, hostname=r.host,
        agent_info=r.agent_info, heartbeat_count=r.heartbeat_count, meta_info=r.meta_info,
        started_ms=r.started_ms, last_heartbeat_ms=r.last_heartbeat_ms, txn_type=r.txn_type)
        for r in rows if r.txn_id is not None]


# -- write ids ---------------------------------------------------------------------------------

def allocate_table_write_ids(conn: Connection, fns: TxnFunctions, txns: TxnManager,
                             db_name: str, table_name: str, txn_ids: Sequence[int], *,
                             repl_policy: str | None = None,
                             src_txn_to_write_ids: Sequence[tuple[int, int]] | None = None,
                             reallocate: bool = False) -> list[tuple[int, int]]:
    """``writeids.allocate_table_write_ids``."""
    db, table, ids = writeids.allocation_request(
        db_name, table_name, txn_ids, repl_policy=repl_policy,
        src_txn_to_write_ids=src_txn_to_write_ids, reallocate=reallocate)
    answer = fns.allocate_write_ids(conn, db=db, table=table, txn_ids=ids, now=now_ms(),
                                    event=txns.templates.alloc_write_ids(db, table),
                                    message_format=txns.messages.message_format)
    notifications.note_written(conn, "ALLOC_WRITE_ID_EVENT", db, table, [answer.event_id])
    return answer.pairs


def get_valid_write_ids(conn: Connection, fns: TxnFunctions, full_table_names: Sequence[str],
                        snapshot: ValidTxnList | None = None) -> list[writeids.TableWriteIds]:
    """``writeids.get_valid_write_ids`` for the reader's ``snapshot`` (at most
    ``writeids.MAX_EXCEPTIONS_LOOKED_UP`` exceptions: beyond, the Python path reads the
    tables instead) or, None, the current one, read in the same statement."""
    names = list(full_table_names or ())
    if not names:
        raise InvalidInput("get_valid_write_ids needs at least one table name")
    split = [writeids.split_table_name(n) for n in names]
    wanted = set(split)
    dbs, tables = sorted({db for db, _ in wanted}), sorted({table for _, table in wanted})
    allocated: dict[tuple[str, str], int] = {}
    relevant: dict[tuple[str, str], set[tuple[int, int]]] = {key: set() for key in wanted}
    if snapshot is not None:
        for db, table, nxt, txn_id, wid in fns.valid_write_ids(
                conn, dbs, tables, snapshot.high_watermark, snapshot.exceptions):
            if (db, table) in wanted:
                if txn_id is None:
                    allocated[(db, table)] = nxt - 1
                else:
                    relevant[(db, table)].add((wid, txn_id))
    else:
        hwm = 0
        open_ids: list[int] = []
        aborted_ids: list[int] = []
        for kind, db, table, txn_id, value, state in fns.snapshot_write_ids(conn, dbs, tables):
            if kind == "h":
                hwm = int(value)
            elif kind == "s":
                (aborted_ids if state == ABORTED else open_ids).append(int(txn_id))
            elif (db, table) in wanted:
                if kind == "n":
                    allocated[(db, table)] = int(value) - 1
                else:
                    relevant[(db, table)].add((int(value), int(txn_id)))
        snapshot = ValidTxnList(hwm, open_ids=sorted(open_ids), aborted_ids=sorted(aborted_ids))
    found = writeids.snapshot_lists(
        writeids.high_watermarks(allocated, relevant, snapshot.high_watermark), relevant,
        snapshot)
    return [writeids.TableWriteIds(full, *found[key]) for full, key in zip(names, split)]
