"""Transactions and their statements against one metastore, as Hive's ``DbTxnManager`` runs
them: the one implementation ``spark.hive_acid``'s driver and ``hms_txn.tables`` share.

A transaction's statements each get a statement id (UPDATE/MERGE two: deletes and new row
versions) and a lock; the table's write id is allocated by its first statement. What a
statement wrote is recorded by partition (``finish_statement``); the commit registers new
partitions, records dynamic partitions and commits with one write event per partition
(``writeEventInfos``: what the metastore records for other engines). An abort, or a commit
the metastore refuses, removes every directory of the transaction's write ids
(``statement_dirs``). A background thread heartbeats every open transaction and every
scan's read lock (``scans``), so a process that dies stops heartbeating and the metastore
aborts its transactions and releases its locks after ``hive.txn.timeout``.

Writers that are not the caller's own thread (Spark's task attempts) are tracked by an
``attempts`` object (``spark._attempts.Attempts``: ``open`` / ``end`` / ``wait_idle``), told
when a statement opens and ends so that a late writer's files are swept; a client that
writes its files itself before ``finish_statement`` (``hms_txn.tables``) has none.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from orc_acid.layout import format_base

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError, WriteConflictError
from hms_txn.clients.acid.metastore import T
from hms_txn.clients.acid.scans import Scans
from hms_txn.clients.acid.statement_dirs import (ABORTED, Outcome, make_empty_bases,
                                                 remove_write_id_dirs, require_own_dirs,
                                                 statement_dir_names, sweep)
from hms_txn.common.config import parse_duration

log = logging.getLogger("hms_txn.clients.acid")

# How long an abort waits for writers of other threads or processes (Spark tasks being
# cancelled) before removing the transaction's files anyway (late ones sweep again).
ABORT_WAIT_S = 10.0


@dataclass
class Statement:
    table: M.TableInfo
    write_id: int
    statement_id: int          # first statement id used (UPDATE/MERGE also use +1)
    op: str                    # insert | overwrite | update | delete
    dynamic_overwrite: bool = False
    token: str = ""            # "txn/statement id": names it to task attempts (``_attempts``)

    @property
    def dir_names(self) -> List[str]:
        return statement_dir_names(self.op, self.write_id, self.statement_id)


@dataclass
class Txn:
    id: int
    txns: str                   # ValidTxnList of the transaction's snapshot
    multi: bool = False
    next_stmt: int = 0
    write_ids: Dict[str, int] = field(default_factory=dict)
    # table -> partition -> [relative files] written (for write events / partitions)
    written: Dict[str, Dict[str, List[str]]] = field(default_factory=dict)
    ops: Dict[str, Dict[str, int]] = field(default_factory=dict)    # table -> part -> op
    overwritten: set = field(default_factory=set)
    tables: Dict[str, M.TableInfo] = field(default_factory=dict)
    state: str = "open"
    pending: Dict[str, tuple] = field(default_factory=dict)
    statements: List[Statement] = field(default_factory=list)
    # (table id, `_meta*` parameter, value) the commit records atomically (CommitTxnKeyValue)
    key_value: Optional[Tuple[int, str, str]] = None
    lock = None

    def __post_init__(self):
        self.lock = threading.RLock()


_OP_CODES = {"insert": M.OP_INSERT, "overwrite": M.OP_UPDATE, "update": M.OP_UPDATE,
             "delete": M.OP_DELETE}
_LOCK_TYPES = {"insert": M.SHARED_READ, "overwrite": M.EXCL_WRITE}   # else SHARED_WRITE


class Transactions:
    """Transactions, statements and read locks of one client process against one metastore
    (``ms``: a ``metastore.MetastoreConnection``), heartbeated by a background thread until
    :meth:`close`."""

    def __init__(self, ms: M.MetastoreConnection, *, attempts=None):
        self.ms = ms
        self.attempts = attempts
        try:
            self.timeout_s = parse_duration(self.ms.get_config_value("hive.txn.timeout",
                                                                     "300s"))
        except Exception:        # unreachable or an odd value: Hive's default
            self.timeout_s = 300.0
        self.heartbeat_s = max(0.2, min(self.timeout_s / 3.0, 60.0))
        self.lock_timeout_s = max(self.timeout_s, 60.0)
        self.txns: Dict[int, Txn] = {}
        self.scans = Scans(self.ms, self.lock_timeout_s)
        self._mu = threading.RLock()
        self._stop = threading.Event()
        self._heartbeats = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                            name="hms-txn-acid-heartbeat")
        self._heartbeats.start()

    # -- transactions -----------------------------------------------------------------------

    def open_txn(self, multi: bool = False) -> Txn:
        tid = self.ms.open_txns(T.OpenTxnRequest(num_txns=1, user=M.USER, hostname=M.HOST,
                                                 agentInfo=self.ms.agent)).txn_ids[0]
        txn = Txn(tid, M.valid_txn_list(self.ms, tid), multi=multi)
        with self._mu:
            self.txns[tid] = txn
        return txn

    def txn(self, tid: int) -> Txn:
        with self._mu:
            t = self.txns.get(tid)
        if t is None or t.state != "open":
            raise HiveAcidError(f"transaction {tid} is not open in this driver")
        return t

    def snapshot(self, txn: Txn, full_names: Sequence[str]) -> Dict[str, str]:
        return M.valid_write_ids(self.ms, full_names, txn.txns)

    def txn_partitions(self, txn: Txn, full_name: str) -> List[str]:
        """Partitions the transaction wrote to (not registered before it commits)."""
        with txn.lock:
            return sorted(p for p in txn.written.get(full_name, {}) if p)

    def begin_statement(self, txn: Txn, info: M.TableInfo, op: str, *,
                        dynamic_overwrite: bool = False) -> Statement:
        """Allocate the write id (once per table), take the statement's lock, reserve its
        statement ids."""
        with txn.lock:
            name = info.full_name
            if name in txn.overwritten:
                raise HiveAcidError(
                    f"{name} was overwritten earlier in transaction {txn.id}: further "
                    f"statements on it in the same transaction are not supported")
            if name not in txn.write_ids:
                resp = self.ms.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
                    dbName=info.db, tableName=info.name, txnIds=[txn.id]))
                txn.write_ids[name] = resp.txnToWriteIds[0].writeId
                txn.tables[name] = info
            comp = M.lock_component(info.db, info.name, _LOCK_TYPES.get(op, M.SHARED_WRITE),
                                    _OP_CODES[op], dynamic=bool(info.partition_keys))
            self.scans.flush_unlocks()
            M.acquire_lock(self.ms, [comp], txn.id, timeout_s=self.lock_timeout_s)
            stmt = txn.next_stmt
            txn.next_stmt += 2 if op in ("update", "merge") else 1
            if op == "overwrite":
                txn.overwritten.add(name)
            st = Statement(info, txn.write_ids[name], stmt, op, dynamic_overwrite,
                           token=f"{txn.id}/{stmt}")
            txn.statements.append(st)
            if self.attempts is not None:
                self.attempts.open(st.token, st)
            return st

    def finish_statement(self, txn: Txn, st: Statement,
                         files: Sequence[Tuple[str, str, int]]) -> None:
        """Record what a statement wrote: removes files of failed task attempts, writes empty
        bases for overwritten partitions that got no rows, remembers partitions/files."""
        info = st.table
        kept = {os.path.normpath(os.path.join(info.location, rel)) for _, rel, _ in files}
        touched = {p for p, _, _ in files}
        bases = []
        if st.op == "overwrite":
            targets = set(touched)
            if info.partition_keys:
                if not st.dynamic_overwrite:
                    targets |= {n for n, _, _ in M.list_partitions(self.ms, info)}
            else:
                targets = {""}
            bases = [os.path.normpath(os.path.join(info.location, p, format_base(st.write_id)))
                     for p in targets]
            touched = targets
        outcome = Outcome(frozenset(kept), frozenset({os.path.dirname(f) for f in kept}
                                                     | set(bases)))
        # ended before the sweep: an attempt still writing is swept again when it reports
        if self.attempts is not None:
            self.attempts.end(st.token, outcome)
        sweep(self.ms, info, st.dir_names, outcome)
        make_empty_bases(info, bases)
        with txn.lock:
            w = txn.written.setdefault(info.full_name, {})
            ops = txn.ops.setdefault(info.full_name, {})
            code = _OP_CODES[st.op]
            for pname in touched:
                w.setdefault(pname, [])
                ops[pname] = max(ops.get(pname, 0), code) if code != M.OP_INSERT else \
                    ops.get(pname, code)
            for pname, rel, _ in files:
                w[pname].append(rel)

    def commit(self, txn: Txn) -> None:
        with txn.lock:
            if txn.state != "open":
                raise HiveAcidError(f"transaction {txn.id} is {txn.state}")
            try:
                events = [e for name, parts in txn.written.items()
                          for e in self._record_writes(txn, txn.tables[name], parts)]
                kv = None
                if txn.key_value is not None:
                    kv = T.CommitTxnKeyValue(tableId=txn.key_value[0], key=txn.key_value[1],
                                             value=txn.key_value[2])
                self.ms.commit_txn(T.CommitTxnRequest(txnid=txn.id, writeEventInfos=events,
                                                      exclWriteEnabled=False, keyValue=kv))
                txn.state = "committed"
            except T.TxnAbortedException as e:
                txn.state = "aborted"
                self._remove_files(txn)
                msg = f"transaction {txn.id} aborted by the metastore: {e.message}"
                if "conflict" in (e.message or "").lower():
                    raise WriteConflictError(msg) from None
                raise HiveAcidError(msg) from None
            except BaseException:
                self.abort(txn)
                raise
            finally:
                self._forget(txn)

    def _record_writes(self, txn: Txn, info: M.TableInfo, parts: Dict[str, List[str]]
                       ) -> List[T.WriteEventInfo]:
        """Register the new partitions the transaction wrote and record them as its dynamic
        partitions; -> its write events for the table, one per partition."""
        wid = txn.write_ids[info.full_name]
        if info.partition_keys:
            existing = {n: loc for n, _, loc in M.list_partitions(self.ms, info)}
            require_own_dirs(info, parts, existing)
            M.add_partitions(self.ms, info, sorted(p for p in parts if p not in existing))
            by_op: Dict[int, List[str]] = {}
            for p in parts:
                by_op.setdefault(txn.ops[info.full_name][p], []).append(p)
            for op, plist in by_op.items():
                self.ms.add_dynamic_partitions(T.AddDynamicPartitions(
                    txnid=txn.id, writeid=wid, dbname=info.db, tablename=info.name,
                    partitionnames=sorted(plist), operationType=op))
        # WriteEventInfo.files joins the files with "]" (Hive's
        # ReplChangeManager.TXN_WRITE_EVENT_FILE_SEPARATOR), as the server splits them.
        return [T.WriteEventInfo(
            writeId=wid, database=info.db, table=info.name,
            files="]".join(info.uri_of(os.path.join(info.location, p, f) if p else
                                       os.path.join(info.location, f)) for f in files),
            partition=p or None) for p, files in parts.items()]

    def abort(self, txn: Txn, wait_s: float = ABORT_WAIT_S) -> None:
        with txn.lock:
            if txn.state == "open":
                txn.state = "aborted"
                try:
                    self.ms.abort_txn(T.AbortTxnRequest(txnid=txn.id))
                except Exception:
                    log.warning("abort of transaction %s failed", txn.id, exc_info=True)
        self._remove_files(txn, wait_s)
        self._forget(txn)

    def abort_statement_files(self, txn: Txn, st: Statement) -> None:
        self._end_aborted(txn, [st])
        sweep(self.ms, st.table, st.dir_names, ABORTED)

    def _end_aborted(self, txn: Txn, statements: Sequence[Statement],
                     wait_s: float = ABORT_WAIT_S) -> None:
        """End the statements as aborted and wait, up to ``wait_s``, for their attempts that
        are writing (those still writing after that sweep again when they report)."""
        if self.attempts is None:
            return
        tokens = [st.token for st in statements]
        for token in tokens:
            self.attempts.end(token, ABORTED)
        if not self.attempts.wait_idle(tokens, wait_s):
            log.warning("transaction %s aborted while task attempts were still writing; "
                        "their files are removed when they finish", txn.id)

    def _remove_files(self, txn: Txn, wait_s: float = ABORT_WAIT_S) -> None:
        """Remove every file of an aborted transaction, after its statements' attempts that
        are writing finished (``_end_aborted``)."""
        self._end_aborted(txn, txn.statements, wait_s)
        for name, wid in txn.write_ids.items():
            remove_write_id_dirs(self.ms, txn.tables[name], wid)

    def _forget(self, txn: Txn) -> None:
        # a statement left unfinished (a data source write not committed) keeps nothing:
        # its late attempts are swept as an abort's
        if self.attempts is not None:
            for st in txn.statements:
                self.attempts.end(st.token, ABORTED, only_open=True)
        with self._mu:
            self.txns.pop(txn.id, None)

    # -- heartbeats -------------------------------------------------------------------------

    def _heartbeat_loop(self):
        while not self._stop.wait(self.heartbeat_s):
            try:
                self._heartbeat_once()
            except Exception:
                log.debug("heartbeat round failed", exc_info=True)

    def _heartbeat_once(self):
        with self._mu:
            txns = [t for t in self.txns.values() if t.state == "open"]
        self.scans.heartbeat()
        for t in txns:
            try:
                self.ms.heartbeat(T.HeartbeatRequest(txnid=t.id))
            except (T.TxnAbortedException, T.NoSuchTxnException) as e:
                log.warning("transaction %s can no longer be heartbeated: %s", t.id,
                            getattr(e, "message", e))

    def close(self) -> None:
        """Abort the open transactions, release the read locks, stop heartbeating and
        disconnect."""
        self._stop.set()
        with self._mu:
            open_txns = list(self.txns.values())
        for t in open_txns:
            self.abort(t, wait_s=0)
        self.scans.flush_unlocks()
        self.scans.release_all()
        self.ms.close()
