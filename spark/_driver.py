"""The driver side of hive_acid: transactions, their statements, and what workers ask for.

Spark runs a Python data source's planning (``reader()``/``writer()``) and commit in short
lived Python worker processes, not in the user's driver process. A transaction must
outlive them (it is heartbeated until it commits), and when the driver dies it must stop
being heartbeated so that the metastore aborts it after ``hive.txn.timeout``. So the
transactions live here, in the driver process: ``register()`` starts one ``Driver`` per
process and metastore. Its coordinator (``_coordinator``) is what the data source's workers
call to open / commit / abort writes and to plan reads, and what executor tasks call
around their writes (``_attempts``) and reads (``_scans``); those calls are the ``rpc_*``
methods below. A background thread heartbeats every open transaction and every scan's
read lock.

A transaction's statements each get a statement id (UPDATE/MERGE two: deletes and new row
versions) and a lock; their files are recorded by partition, and the commit registers new
partitions, records dynamic partitions and commits with one write event per partition. An
abort, or a commit the metastore refuses, removes every directory of the transaction's
write ids (``_statement_dirs``).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from hms_txn.common.config import parse_duration
from orc_acid.layout import format_base

from . import _metastore as M
from ._attempts import ABORTED, ABORT_WAIT_S, Attempts, Outcome
from ._coordinator import Coordinator
from ._errors import HiveAcidError, WriteConflictError
from ._metastore import T
from ._scans import Scans, plan_units
from ._statement_dirs import (make_empty_bases, remove_write_id_dirs, require_own_dirs,
                              statement_dir_names, sweep)

log = logging.getLogger("spark.hive_acid")


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


class Driver:
    """Transactions and locks of one driver process against one metastore."""

    def __init__(self, uri: str, *, bind_host: str = "127.0.0.1",
                 advertised_host: Optional[str] = None, options=None,
                 ports: Tuple[int, int] = (0, 0)):
        """``bind_host``: where the coordinator listens (loopback unless executors run on
        other hosts); ``advertised_host``: the address tasks are told to call, by default
        ``bind_host`` (it must be given when that is a wildcard such as 0.0.0.0);
        ``options``: how to connect to the metastore (``MetastoreConnection``);
        ``ports``: the coordinator's port range (``_coordinator.coordinator_ports``)."""
        self.uri = uri
        self.ms = M.MetastoreConnection(uri, options=options)
        try:
            self.timeout_s = parse_duration(self.ms.get_config_value("hive.txn.timeout",
                                                                     "300s"))
        except Exception:        # unreachable or an odd value: Hive's default
            self.timeout_s = 300.0
        self.heartbeat_s = max(0.2, min(self.timeout_s / 3.0, 60.0))
        self.lock_timeout_s = max(self.timeout_s, 60.0)
        self.txns: Dict[int, Txn] = {}
        self.attempts = Attempts()
        self.scans = Scans(self.ms, self.lock_timeout_s)
        self._mu = threading.RLock()
        self._stop = threading.Event()
        self._local = threading.local()
        self.authkey = secrets.token_bytes(16)
        try:
            self.coordinator = Coordinator(self, self.authkey, bind_host, advertised_host,
                                           ports)
        except BaseException:       # e.g. no free port in the configured range
            self.ms.close()
            raise
        self.address = self.coordinator.address
        threading.Thread(target=self._heartbeat_loop, name="hive-acid-heartbeat",
                         daemon=True).start()

    # -- the active multi-statement transaction of the calling thread --------------------------

    @property
    def active(self) -> Optional[Txn]:
        return getattr(self._local, "txn", None)

    @active.setter
    def active(self, txn: Optional[Txn]):
        self._local.txn = txn

    # -- transactions -----------------------------------------------------------------------

    def open_txn(self, multi: bool = False) -> Txn:
        tid = self.ms.open_txns(T.OpenTxnRequest(num_txns=1, user=M.USER, hostname=M.HOST,
                                                 agentInfo=M.AGENT)).txn_ids[0]
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
        for st in txn.statements:
            self.attempts.end(st.token, ABORTED, only_open=True)
        with self._mu:
            self.txns.pop(txn.id, None)

    # -- reads ------------------------------------------------------------------------------

    def hold_read(self, infos: Sequence[M.TableInfo]) -> dict:
        """A txn-less SHARED_READ lock on these tables, then one snapshot of them, held until
        :meth:`release_read` (``_scans``)."""
        return self.scans.open(infos, held=True)

    def release_read(self, scan_id: str) -> None:
        self.scans.release(scan_id)

    def plan_read(self, info: M.TableInfo, txn_id: Optional[int], pinned_txns: Optional[str],
                  pinned_wids: Optional[str], txn_parts: Sequence[str], filters) -> dict:
        """The scan's snapshot -- pinned, the transaction's, or a new one under a read lock
        -- and its units: one per (partition, bucket id)."""
        M.require_acid(info)
        scan = None
        if pinned_wids is not None:
            txns, wids = pinned_txns, pinned_wids
        elif txn_id:
            txn = self.txn(txn_id)
            txns, wids = txn.txns, self.snapshot(txn, [info.full_name])[info.full_name]
            txn_parts = self.txn_partitions(txn, info.full_name)
        else:
            snap = self.scans.open([info], held=False)
            scan, txns, wids = snap["scan"], snap["txns"], snap["write_ids"][info.full_name]
            txn_parts = ()
        try:
            units = plan_units(self.ms, info, txns, wids, txn_parts or (), filters)
        except BaseException:
            if scan:
                self.scans.planned(scan, 0)
            raise
        if scan:
            self.scans.planned(scan, len(units))
        return {"units": units, "scan": scan}

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

    # -- what the data source's workers and the tasks call (``_coordinator``) -----------------

    def rpc_scan_progress(self, scan_id, part, done):
        self.scans.progress(scan_id, part, done)

    def rpc_table_info(self, full_name):
        return M.table_info(self.ms, full_name)

    def rpc_plan_read(self, info, txn_id, pinned_txns, pinned_wids, txn_parts, filters):
        return self.plan_read(info, txn_id, pinned_txns, pinned_wids, txn_parts, filters)

    def rpc_begin_write(self, full_name, overwrite, txn_id, dynamic_overwrite):
        info = M.table_info(self.ms, full_name)
        M.require_acid(info)
        txn = self.txn(txn_id) if txn_id else self.open_txn()
        try:
            st = self.begin_statement(txn, info, "overwrite" if overwrite else "insert",
                                      dynamic_overwrite=dynamic_overwrite)
        except BaseException:
            if not txn_id:
                self.abort(txn)
            raise
        with txn.lock:
            txn.pending[st.token] = (st, not txn_id)
        return {"token": st.token, "txn": txn.id, "write_id": st.write_id,
                "statement_id": st.statement_id}

    def _pending(self, token):
        tid = int(token.split("/")[0])
        with self._mu:
            txn = self.txns.get(tid)
        if txn is None or token not in txn.pending:
            return None, None, None
        with txn.lock:
            st, own = txn.pending.pop(token)
        return txn, st, own

    def rpc_commit_write(self, token, files):
        txn, st, own = self._pending(token)
        if txn is None:
            raise HiveAcidError(f"write {token}: its transaction is no longer open")
        try:
            self.finish_statement(txn, st, files)
        except BaseException:
            if own:
                self.abort(txn)
            raise
        if own:
            self.commit(txn)
        return txn.id

    def rpc_abort_write(self, token):
        txn, st, own = self._pending(token)
        if txn is None:
            return      # already committed or aborted
        if own:
            self.abort(txn)
        else:
            self.abort_statement_files(txn, st)

    def rpc_task_started(self, token: str, attempt: str) -> bool:
        """May a task attempt write files for the statement ``token``? (``_attempts``)"""
        return self.attempts.start(token, attempt)

    def rpc_task_finished(self, token: str, attempt: str) -> bool:
        """A task attempt is done writing. -> False when its statement has ended meanwhile
        (its files were removed, unless the commit kept them)."""
        ended = self.attempts.finish(token, attempt)
        if ended is None:
            return True
        st, outcome = ended
        sweep(self.ms, st.table, st.dir_names, outcome)
        return False

    def close(self):
        self._stop.set()
        for t in list(self.txns.values()):
            self.abort(t, wait_s=0)
        self.scans.flush_unlocks()
        self.scans.release_all()
        self.coordinator.close()
        self.ms.close()
