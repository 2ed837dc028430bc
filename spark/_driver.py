"""The driver side of hive_acid: transactions, locks, heartbeats, and the coordinator.

Spark runs a Python data source's planning (``reader()``/``writer()``) and commit in short
lived Python worker processes, not in the user's driver process. A transaction must
outlive them (it is heartbeated until it commits), and when the driver dies it must stop
being heartbeated so that the metastore aborts it after ``hive.txn.timeout``. So the
transactions live here, in the driver process: ``register()`` starts one ``Driver`` per
process and metastore, with an RPC endpoint, the coordinator (``multiprocessing.connection``
with a random auth key), that the data source's workers call to open / commit / abort
writes and to take read snapshots and locks, and executor tasks call around their writes
and reads (it listens where ``hive_acid.coordinator_hosts`` says). A background thread
heartbeats every open transaction and every read lock; read locks are released when every
input partition of the scan has reported completion, or after a lease (the scan stopped
early, e.g. ``limit``) expires.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Listener, answer_challenge, deliver_challenge
from typing import Dict, List, Optional, Sequence, Tuple

from orc_acid.layout import format_base, format_delta, format_delete_delta, parse_base, \
    parse_delta

from . import _metastore as M
from ._attempts import ABORTED, ABORT_WAIT_S, Attempts, Outcome
from ._rpc import nodelay, set_timeout
from ._metastore import T

log = logging.getLogger("spark.hive_acid")

READ_LEASE_S = 120.0

# A connection to the coordinator must prove it holds the key within this time. The
# handshake runs in the connection's own thread: a peer that connects and stays silent (a
# port scanner, once the coordinator listens on a network address) holds only that thread.
HANDSHAKE_TIMEOUT_S = 10.0


@dataclass
class Statement:
    table: M.TableInfo
    write_id: int
    statement_id: int          # first statement id used (UPDATE/MERGE also use +1)
    op: str                    # insert | overwrite | update | delete
    dynamic_overwrite: bool = False
    token: str = ""            # "txn/statement id": names it to task attempts (``_attempts``)


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


@dataclass
class Scan:
    lock_id: Optional[int]
    n_parts: int = -1
    done: set = field(default_factory=set)
    lease_until: float = 0.0
    held: bool = False      # hold_read(): released by release_read() only, no lease


_OP_CODES = {"insert": M.OP_INSERT, "overwrite": M.OP_UPDATE, "update": M.OP_UPDATE,
             "delete": M.OP_DELETE}


class Driver:
    """Transactions and locks of one driver process against one metastore."""

    def __init__(self, uri: str, *, bind_host: str = "127.0.0.1",
                 advertised_host: Optional[str] = None):
        """``bind_host``: where the coordinator listens (loopback unless executors run on
        other hosts); ``advertised_host``: the address tasks are told to call, by default
        ``bind_host`` (it must be given when that is a wildcard such as 0.0.0.0)."""
        self.uri = uri
        self.ms = M.Metastore(uri)
        try:
            self.timeout_s = M.parse_duration_s(self.ms.get_config_value("hive.txn.timeout",
                                                                         "300s"))
        except Exception:
            self.timeout_s = 300.0
        self.heartbeat_s = max(0.2, min(self.timeout_s / 3.0, 60.0))
        self.txns: Dict[int, Txn] = {}
        self.attempts = Attempts()
        self.scans: Dict[str, Scan] = {}
        self._scan_ids = itertools.count(1)
        self._mu = threading.RLock()
        self._stop = threading.Event()
        self.authkey = secrets.token_bytes(16)
        if not advertised_host and bind_host in ("", "0.0.0.0"):
            raise ValueError("a coordinator bound to a wildcard address needs the address "
                             "tasks should call (advertised_host)")
        # No authkey here: Listener would run the key handshake inside accept(), in the one
        # accepting thread (see HANDSHAKE_TIMEOUT_S).
        self.listener = Listener((bind_host, 0))
        self.address = (advertised_host or bind_host, self.listener.address[1])
        self._threads = [threading.Thread(target=self._serve, name="hive-acid-coordinator",
                                          daemon=True),
                         threading.Thread(target=self._heartbeat_loop,
                                          name="hive-acid-heartbeat", daemon=True)]
        for t in self._threads:
            t.start()
        self._local = threading.local()
        self._unlocks: List[threading.Thread] = []

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
            raise M.HiveAcidError(f"transaction {tid} is not open in this driver")
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
                raise M.HiveAcidError(
                    f"{name} was overwritten earlier in transaction {txn.id}: further "
                    f"statements on it in the same transaction are not supported")
            if name not in txn.write_ids:
                resp = self.ms.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
                    dbName=info.db, tableName=info.name, txnIds=[txn.id]))
                txn.write_ids[name] = resp.txnToWriteIds[0].writeId
                txn.tables[name] = info
            if op == "insert":
                ltype = M.SHARED_READ
            elif op == "overwrite":
                ltype = M.EXCL_WRITE
            else:
                ltype = M.SHARED_WRITE
            comp = M.lock_component(info.db, info.name, ltype, _OP_CODES[op],
                                    dynamic=bool(info.partition_keys))
            self._flush_unlocks()
            M.acquire_lock(self.ms, [comp], txn.id, timeout_s=max(self.timeout_s, 60.0))
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
        self._sweep(st, outcome)
        for d in bases:
            os.makedirs(d, exist_ok=True)
            if not info.insert_only:
                marker = os.path.join(d, "_orc_acid_version")
                if not os.path.exists(marker):
                    with open(marker, "wb") as f:
                        f.write(b"2")
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

    def _statement_dirs(self, st: Statement) -> List[str]:
        s = st.statement_id
        if st.op == "overwrite":
            return [format_base(st.write_id)]
        names = [format_delta(st.write_id, st.write_id, s)]
        if st.op in ("update", "delete", "merge"):
            names += [format_delete_delta(st.write_id, st.write_id, s),
                      format_delta(st.write_id, st.write_id, s + 1)]
        return names

    def _find_dirs(self, info: M.TableInfo, names: Sequence[str]) -> List[str]:
        """Directories with these names in the table dir or its partition dirs."""
        depth = len(info.partition_keys)
        out = []
        wanted = set(names)

        def walk(d: str, level: int):
            try:
                entries = os.listdir(d)
            except FileNotFoundError:
                return
            for e in entries:
                p = os.path.join(d, e)
                if level == depth:
                    if e in wanted and os.path.isdir(p):
                        out.append(p)
                elif "=" in e and os.path.isdir(p):
                    walk(p, level + 1)
        walk(info.location, 0)
        return out

    def _txn_dirs(self, info: M.TableInfo, write_id: int) -> List[str]:
        """Every directory of write id ``write_id`` (this transaction's, in the table)."""
        depth = len(info.partition_keys)
        out = []

        def mine(e: str) -> bool:
            b = parse_base(e)
            if b is not None:
                return b.write_id == write_id
            d = parse_delta(e)
            return d is not None and d.min_write_id == write_id == d.max_write_id

        def walk(d: str, level: int):
            try:
                entries = os.listdir(d)
            except FileNotFoundError:
                return
            for e in entries:
                p = os.path.join(d, e)
                if level == depth:
                    if os.path.isdir(p) and mine(e):
                        out.append(p)
                elif "=" in e and os.path.isdir(p):
                    walk(p, level + 1)
        walk(info.location, 0)
        return out

    def commit(self, txn: Txn) -> None:
        with txn.lock:
            if txn.state != "open":
                raise M.HiveAcidError(f"transaction {txn.id} is {txn.state}")
            events = []
            try:
                for name, parts in txn.written.items():
                    info = txn.tables[name]
                    wid = txn.write_ids[name]
                    if info.partition_keys:
                        existing = {n: loc for n, _, loc in M.list_partitions(self.ms, info)}
                        _require_own_dirs(info, parts, existing)
                        new = sorted(p for p in parts if p not in existing)
                        M.add_partitions(self.ms, info, new)
                        by_op: Dict[int, List[str]] = {}
                        for p in parts:
                            by_op.setdefault(txn.ops[name][p], []).append(p)
                        for op, plist in by_op.items():
                            self.ms.add_dynamic_partitions(T.AddDynamicPartitions(
                                txnid=txn.id, writeid=wid, dbname=info.db,
                                tablename=info.name, partitionnames=sorted(plist),
                                operationType=op))
                    for p, files in parts.items():
                        events.append(T.WriteEventInfo(
                            writeId=wid, database=info.db, table=info.name,
                            files=",".join(os.path.join(info.location, p, f) if p else
                                           os.path.join(info.location, f) for f in files),
                            partition=p or None))
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
                    raise M.WriteConflictError(msg) from None
                raise M.HiveAcidError(msg) from None
            except BaseException:
                self.abort(txn)
                raise
            finally:
                self._forget(txn)

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
        self._sweep(st, ABORTED)

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

    def _sweep(self, st: Statement, outcome: Outcome) -> None:
        """Remove what the statement's directories hold beyond ``outcome``'s kept files and
        directories (everything, when aborted). Hidden names (``_orc_acid_version``, a
        writer's ``.tmp``) are left in a kept directory."""
        swept = False
        for d in self._find_dirs(st.table, self._statement_dirs(st)):
            d = os.path.normpath(d)
            if outcome.aborted or d not in outcome.kept_dirs:
                shutil.rmtree(d, ignore_errors=True)
                swept = True
                continue
            try:    # another late attempt's sweep may run at the same time
                for name in os.listdir(d):
                    p = os.path.join(d, name)
                    if not name.startswith(("_", ".")) and p not in outcome.kept_files:
                        os.unlink(p)
            except FileNotFoundError:
                pass
        if swept:
            self._remove_empty_partition_dirs(st.table)

    def _remove_files(self, txn: Txn, wait_s: float = ABORT_WAIT_S) -> None:
        """Remove every file of an aborted transaction, after its statements' attempts that
        are writing finished (``_end_aborted``)."""
        self._end_aborted(txn, txn.statements, wait_s)
        for name, wid in txn.write_ids.items():
            info = txn.tables[name]
            for d in self._txn_dirs(info, wid):
                shutil.rmtree(d, ignore_errors=True)
            self._remove_empty_partition_dirs(info)

    def _remove_empty_partition_dirs(self, info: M.TableInfo) -> None:
        if not info.partition_keys:
            return
        try:
            registered = {os.path.normpath(loc) for _, _, loc in M.list_partitions(self.ms, info)}
        except Exception:
            return
        for root, dirs, files in os.walk(info.location, topdown=False):
            if root == info.location or "=" not in os.path.basename(root):
                continue
            if os.path.normpath(root) in registered:
                continue
            try:    # a late attempt's sweep may be removing the same directories
                if not os.listdir(root):
                    os.rmdir(root)
            except OSError:
                pass

    def _forget(self, txn: Txn) -> None:
        # a statement left unfinished (a data source write not committed) keeps nothing:
        # its late attempts are swept as an abort's
        for st in txn.statements:
            self.attempts.end(st.token, ABORTED, only_open=True)
        with self._mu:
            self.txns.pop(txn.id, None)

    # -- scans ------------------------------------------------------------------------------

    def begin_read(self, info: M.TableInfo, txn_id: Optional[int]) -> dict:
        M.require_acid(info)
        if txn_id:
            txn = self.txn(txn_id)
            wids = self.snapshot(txn, [info.full_name])
            return {"txns": txn.txns, "write_ids": wids[info.full_name], "scan": None,
                    "txn_partitions": self.txn_partitions(txn, info.full_name)}
        self._flush_unlocks()
        lock_id = M.acquire_lock(self.ms, [M.lock_component(info.db, info.name, M.SHARED_READ,
                                                            M.OP_SELECT, transactional=True)],
                                 0, timeout_s=max(self.timeout_s, 60.0))
        txns = M.valid_txn_list(self.ms)
        wids = M.valid_write_ids(self.ms, [info.full_name], txns)
        scan_id = f"{os.getpid()}-{next(self._scan_ids)}"
        with self._mu:
            self.scans[scan_id] = Scan(lock_id, lease_until=time.monotonic() + READ_LEASE_S)
        return {"txns": txns, "write_ids": wids[info.full_name], "scan": scan_id}

    def hold_read(self, infos: Sequence[M.TableInfo]) -> dict:
        """A txn-less SHARED_READ lock on these tables, then one snapshot of them (lock first,
        like ``begin_read``: a compaction committing after the lock is acquired cannot have
        its obsolete files cleaned while the lock is held, and one that committed before is
        in the snapshot). The lock is heartbeated until :meth:`release_read` -- no lease."""
        for info in infos:
            M.require_acid(info)
        self._flush_unlocks()
        comps = [M.lock_component(i.db, i.name, M.SHARED_READ, M.OP_SELECT, transactional=True)
                 for i in infos]
        lock_id = M.acquire_lock(self.ms, comps, 0, timeout_s=max(self.timeout_s, 60.0))
        try:
            txns = M.valid_txn_list(self.ms)
            wids = M.valid_write_ids(self.ms, [i.full_name for i in infos], txns)
        except BaseException:
            self._unlock(lock_id)
            raise
        scan_id = f"{os.getpid()}-{next(self._scan_ids)}"
        with self._mu:
            self.scans[scan_id] = Scan(lock_id, held=True)
        return {"scan": scan_id, "lock_id": lock_id, "txns": txns, "write_ids": wids}

    def release_read(self, scan_id: str) -> None:
        """Release a :meth:`hold_read` lock now (synchronously)."""
        with self._mu:
            s = self.scans.pop(scan_id, None)
        if s is not None:
            self._unlock(s.lock_id)

    def plan_read(self, info: M.TableInfo, txn_id: Optional[int], pinned_txns: Optional[str],
                  pinned_wids: Optional[str], txn_parts: Sequence[str], filters) -> dict:
        """Snapshot (+ read lock) and the scan's units: one per (partition, bucket id)."""
        import orc_acid
        from . import _io
        from ._types import partition_matches
        M.require_acid(info)
        if pinned_wids is not None:
            snap = {"txns": pinned_txns, "write_ids": pinned_wids, "scan": None,
                    "txn_partitions": list(txn_parts or ())}
        else:
            snap = self.begin_read(info, txn_id)
        scan = snap["scan"]
        try:
            if info.partition_keys:
                listed = M.list_partitions(self.ms, info)
                known = {n for n, _, _ in listed}
                # partitions created by the reading transaction's own earlier statements are
                # registered in the metastore only when it commits
                for name in snap.get("txn_partitions") or ():
                    if name not in known:
                        values = [v for _, v in M.parse_part_name(name)]
                        listed.append((name, values, os.path.join(info.location, name)))
                targets = [(loc, tuple(zip(info.part_names, values)))
                           for _, values, loc in listed
                           if partition_matches(filters, info.partition_keys, values)]
            else:
                targets = [(info.location, ())]
            units = []
            for loc, pv in targets:
                if os.path.isdir(loc):
                    units += [_io.ReadUnit(sp, pv) for sp in orc_acid.plan_splits(
                        loc, snap["write_ids"], valid_txns=snap["txns"],
                        insert_only=info.insert_only)]
        except BaseException:
            if scan:
                self.scan_planned(scan, 0)
            raise
        if scan:
            self.scan_planned(scan, len(units))
        return {"units": units, "scan": scan}

    def scan_planned(self, scan_id: str, n: int) -> None:
        self._scan_event(scan_id, n=n)

    def scan_progress(self, scan_id: str, part: int, done: bool) -> None:
        self._scan_event(scan_id, part=part, done=done)

    def _scan_event(self, scan_id, n=None, part=None, done=False):
        release = None
        with self._mu:
            s = self.scans.get(scan_id)
            if s is None:
                return
            s.lease_until = time.monotonic() + READ_LEASE_S
            if n is not None:
                s.n_parts = n
            if done and part is not None:
                s.done.add(part)
            if s.n_parts >= 0 and len(s.done) >= s.n_parts:
                release = self.scans.pop(scan_id)
        if release is not None:
            self._unlock_later(release.lock_id)

    def _unlock_later(self, lock_id: Optional[int]) -> None:
        """Release a finished scan's lock in the background: the task reporting the last
        input partition (and with it the query) need not wait for the metastore. Lock requests
        of this driver wait for pending releases first (``_flush_unlocks``), so its own next
        statement never finds its earlier scan's lock still held."""
        t = threading.Thread(target=self._unlock, args=(lock_id,), name="hive-acid-unlock",
                             daemon=True)
        with self._mu:
            self._unlocks = [u for u in self._unlocks if u.is_alive()] + [t]
        t.start()

    def _flush_unlocks(self) -> None:
        with self._mu:
            pending, self._unlocks = self._unlocks, []
        for t in pending:
            t.join()

    def _unlock(self, lock_id: Optional[int]) -> None:
        if lock_id is None:
            return
        try:
            self.ms.unlock(T.UnlockRequest(lockid=lock_id))
        except Exception:
            log.debug("unlock %s failed", lock_id, exc_info=True)

    def release_all_scans(self) -> None:
        with self._mu:
            scans = list(self.scans.values())
            self.scans.clear()
        for s in scans:
            self._unlock(s.lock_id)

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
            now = time.monotonic()
            expired = [k for k, s in self.scans.items() if s.lease_until < now and not s.held]
            released = [self.scans.pop(k) for k in expired]
            scans = list(self.scans.values())
        for s in released:
            self._unlock(s.lock_id)
        for t in txns:
            try:
                self.ms.heartbeat(T.HeartbeatRequest(txnid=t.id))
            except (T.TxnAbortedException, T.NoSuchTxnException) as e:
                log.warning("transaction %s can no longer be heartbeated: %s", t.id,
                            getattr(e, "message", e))
        for s in scans:
            try:
                self.ms.heartbeat(T.HeartbeatRequest(lockid=s.lock_id))
            except Exception:
                pass

    # -- RPC from the data source's workers ---------------------------------------------------

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn = self.listener.accept()
            except Exception:
                if self._stop.is_set():
                    return
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            if not self._authenticate(conn):
                return
            nodelay(conn)
            while True:
                try:
                    method, args = conn.recv()
                except EOFError:
                    return
                try:
                    result = ("ok", getattr(self, "rpc_" + method)(*args))
                except Exception as e:
                    log.debug("rpc %s failed", method, exc_info=True)
                    result = ("error", (type(e).__name__, str(e)))
                conn.send(result)
        finally:
            conn.close()

    def _authenticate(self, conn) -> bool:
        """The key handshake of ``multiprocessing.connection`` (what ``Listener(authkey=)``
        runs in accept), both ways, bounded by ``HANDSHAKE_TIMEOUT_S``."""
        try:
            set_timeout(conn, HANDSHAKE_TIMEOUT_S)
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            set_timeout(conn, 0)
            return True
        except Exception as e:      # a wrong key, a silent or vanished peer
            log.warning("hive_acid coordinator: refused a connection: %s",
                        type(e).__name__ if isinstance(e, OSError) else e)
            return False

    # the methods below are what workers may call
    def rpc_begin_read(self, full_name, txn_id):
        return self.begin_read(M.table_info(self.ms, full_name), txn_id)

    def rpc_scan_planned(self, scan_id, n):
        self.scan_planned(scan_id, n)

    def rpc_scan_progress(self, scan_id, part, done):
        self.scan_progress(scan_id, part, done)

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
            raise M.HiveAcidError(f"write {token}: its transaction is no longer open")
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
        self._sweep(st, outcome)
        return False

    def close(self):
        self._stop.set()
        for t in list(self.txns.values()):
            self.abort(t, wait_s=0)
        self._flush_unlocks()
        self.release_all_scans()
        try:
            self.listener.close()
        except Exception:
            pass
        self.ms.close()


def _require_own_dirs(info: M.TableInfo, written: Sequence[str],
                      registered: Dict[str, str]) -> None:
    """Statements write partition ``p`` in ``<table location>/p`` (``p`` escaped as Hive
    does). A partition registered at another directory (an ADD PARTITION ... LOCATION, or a
    name escaped differently by an older hive_acid) would never show those files to a
    reader: the commit is refused, and the transaction's files go with its abort."""
    for p in sorted(written):
        at = registered.get(p)
        own = os.path.join(info.location, p)
        if at is not None and os.path.normpath(at) != os.path.normpath(own):
            raise M.HiveAcidError(
                f"partition {p} of {info.full_name} is at {at}, not at {own}: hive_acid "
                f"writes a partition only in its directory under the table's location")
