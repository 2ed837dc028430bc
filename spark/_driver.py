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

The transactions, their statements, locks, commit and abort are the ones every ACID client
of the project shares (``hms_txn.clients.acid.txns.Transactions``, which ``Driver``
extends); what is Spark's here is the coordinator and the task attempts (``_attempts``)
whose late files the shared bookkeeping sweeps.
"""

from __future__ import annotations

import logging
import secrets
import threading
from typing import Optional, Sequence, Tuple

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.statement_dirs import sweep
from hms_txn.clients.acid.txns import Transactions, Txn

from ._attempts import Attempts
from ._coordinator import Coordinator
from ._errors import HiveAcidError
from ._jvm_insert import table_unsupported
from ._leases import Leases
from ._scans import plan_units


log = logging.getLogger("spark.hive_acid")

PYTHON_SOURCE_WARNING = (
    "hive_acid: spark.read.format('hive_acid').load('%s') reads through Spark's Python data "
    "source, which Spark bounds at about half the speed of its own ORC scan (docs/spark.md, "
    "Benchmark); hive_acid.read(spark, '%s') or hive_acid.sql(spark, 'SELECT ...') read the "
    "same snapshot with hive_acid's JVM reader")

PYTHON_SINK_WARNING = (
    "hive_acid: df.write.format('hive_acid').save('%s') writes through Spark's Python data "
    "source, which hands every row to a Python worker (docs/spark.md, Benchmark); "
    "hive_acid.insert(spark, '%s', df) writes the same files from Spark's JVM, as fast as "
    "a plain ORC write")


class Driver(Transactions):
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
        super().__init__(M.MetastoreConnection(uri, options=options), attempts=Attempts())
        self.leases = Leases(self.scans.release)
        self._warned: set = set()
        self._local = threading.local()
        self.authkey = secrets.token_bytes(16)
        try:
            self.coordinator = Coordinator(self, self.authkey, bind_host, advertised_host,
                                           ports)
        except BaseException:       # e.g. no free port in the configured range
            self.leases.close()
            super().close()
            raise
        self.address = self.coordinator.address

    # -- the active multi-statement transaction of the calling thread --------------------------

    @property
    def active(self) -> Optional[Txn]:
        return getattr(self._local, "txn", None)

    @active.setter
    def active(self, txn: Optional[Txn]):
        self._local.txn = txn

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
            self._warn_once(("read", info.full_name), PYTHON_SOURCE_WARNING, info.full_name)
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
        if table_unsupported(info) is None:
            self._warn_once(("write", info.full_name), PYTHON_SINK_WARNING, info.full_name)
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

    def _warn_once(self, key, message: str, full_name: str) -> None:
        # a spark.read/write.format("hive_acid") of the user's where the JVM path would do
        # (hive_acid's own reads pin their snapshot or run in a transaction): once per
        # (read or write, table) and driver
        with self._mu:
            if key in self._warned:
                return
            self._warned.add(key)
        log.warning(message, full_name, full_name)

    def close(self):
        self.leases.close()
        super().close()
        self.coordinator.close()
