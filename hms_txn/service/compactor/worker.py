"""Compaction workers (Hive's ``Worker``): each takes one queued request at a time.

For a request the worker

1. claims it (initiated -> working, with its worker id and start time);
2. opens a COMPACTION transaction C and records it in the request, then heartbeats C for as
   long as the job runs (so C is not aborted as timed out under a long job);
3. takes C's snapshot: the ValidTxnList of that moment and the table's compactor
   ValidWriteIdList (high watermark below the lowest open write id, aborted ids excluded) and
   records that high watermark as the request's highest write id;
4. runs the job with ``orc_acid.compaction`` (``hms_txn.compactor.engine=LOCAL``: in this thread):
   minor -> ``delta_MIN_MAX_vC`` + ``delete_delta_MIN_MAX_vC``, major -> ``base_MAX_vC``,
   written under a hidden staging directory and renamed to the final ``_vC`` names (on object
   stores, which cannot rename, uploaded under those names directly), which no reader uses
   before C commits; the location's file system comes from ``orc_acid.fs`` with the
   ``fs.*`` keys of hive-site.xml;
5. commits C -- the instant the output becomes visible -- and marks the request ready for
   cleaning (recording the next transaction id: the Cleaner waits for every transaction
   older than that).

Failures abort C (its output stays invisible and is removed by a later cleaning) and move
the request to the history as failed. A request with nothing worth compacting is refused.
A worker that dies mid-job leaves C open and the request working: after
``hive.compactor.worker.timeout`` the request is re-queued and C aborted
(``compaction_bookkeeping.revoke_timed_out``), and if the dead worker's C did commit, the
request goes on to cleaning instead. A worker whose request was revoked meanwhile finds out
before committing (and its commit would fail anyway, C being aborted).
"""

from __future__ import annotations

import logging
import threading
import time

from orc_acid.compaction import (MAJOR, MINOR, compactor_write_ids, discard_staged, plan_compaction,
                                 publish_compaction, stage_compaction)

from hms_txn import __version__
from hms_txn.common.config import Config
from hms_txn.common.errors import MetastoreError, NoSuchObject, TxnAborted
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.txn import txn_commit
from hms_txn.domain.txn.compaction_queue import FAILED, REFUSED, CompactionType
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.domain.txn.txn_records import TxnType, heartbeat_txn_in
from hms_txn.service.compactor.common import (HOSTNAME, Loop, is_acid_table, is_insert_only,
                                              object_location, revoke_timed_out, snapshot,
                                              worker_id)
from hms_txn.service.units import UnitOfWork

log = logging.getLogger(__name__)


def _not_found(e: bk.Entry, err: NoSuchObject) -> str:
    """Hive 4's Worker on a request whose table or partition is gone (compact2 queues one
    without looking, as Hive's CompactFunction does): refused with its text
    (Worker.findNextCompactionAndExecute, CompactionInfo.getFullPartitionName)."""
    if e.partition is not None and str(err).startswith("partition"):
        return (f"Unable to find partition {e.db}.{e.table}.{e.partition}, assuming it was "
                f"dropped and moving on.")
    return f"Unable to find table {e.db}.{e.table}, assuming it was dropped and moving on."


class _Refused(Exception):
    pass


class _Heartbeater:
    def __init__(self, config: Config, units: UnitOfWork, txn_id: int):
        self.units = units
        self.txn_id = txn_id
        self._stop = threading.Event()
        interval = max(0.05, float(config["hive.txn.timeout"]) / 3)
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True,
                                        name=f"hms-compactor-heartbeat-{txn_id}")
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.units.write(lambda conn: heartbeat_txn_in(conn, self.txn_id))
            except MetastoreError as err:  # aborted (revoked) or gone: stop quietly
                log.warning("compaction txnid:%d heartbeat failed: %s", self.txn_id, err)
                return
            except Exception:  # database hiccup: try again next time
                log.exception("compaction txnid:%d heartbeat failed", self.txn_id)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class Worker:
    def __init__(self, config: Config, units: UnitOfWork, txns: TxnManager, n: int = 0,
                 tables=None):
        self.config = config
        self.units = units
        self.txns = txns
        self.tables = tables        # extension mode: the upstream's (``object_location``)
        self.worker_id = worker_id(n)
        self.jobs = 0
        self.loop = Loop(f"hms-compactor-worker-{n}", self.run_once,
                         lambda: self.config["hive.compactor.worker.sleep.time"])

    def start(self) -> Loop:
        return self.loop.start()

    def run_once(self) -> bool:
        """Do one request if there is one; returns whether there was."""
        revoke_timed_out(self.units, self.txns, self.config["hive.compactor.worker.timeout"])
        if not self.units.read(bk.any_initiated):     # idle polls stay read-only
            return False
        e = self.units.write(lambda conn: bk.claim_next(conn, self.worker_id, __version__))
        if e is None:
            return False
        log.info("compaction %d of %s (%s) started by %s", e.id, e.name,
                 CompactionType(e.ctype).name, self.worker_id)
        self.jobs += 1
        self.compact(e)
        return True

    def compact(self, e: bk.Entry) -> str:
        """Run one claimed request; returns the outcome word (for tests and logs)."""
        units = self.units
        retention = bk.retention_of(self.config)
        txn_id = None
        staged = None
        beat = None
        try:
            try:
                table, found = object_location(units, self.config, e.db, e.table,
                                               e.partition, self.tables)
            except NoSuchObject as err:
                raise _Refused(_not_found(e, err)) from None
            if not is_acid_table(table):
                raise _Refused(f"{e.db}.{e.table} is not a managed transactional table")
            if is_insert_only(table):
                raise _Refused("insert-only tables are not supported by the compactor yet")
            if found is None:
                raise _Refused("no file system of orc_acid.fs serves the location")
            fs, location = found
            if e.ctype not in (CompactionType.MINOR, CompactionType.MAJOR):
                raise _Refused(f"{CompactionType(e.ctype).name} compaction is not supported")
            txn_id = units.write(lambda conn: self.txns.open_txns(
                conn, 1, e.run_as or "hive", HOSTNAME, agent_info=self.worker_id,
                txn_type=TxnType.COMPACTION)).txn_ids[0]
            if not units.write(lambda conn: bk.set_worker_progress(
                    conn, e.id, self.worker_id, txn_id=txn_id)):
                self._abort(txn_id)
                return "revoked"
            beat = _Heartbeater(self.config, units, txn_id)
            txn_list, table_wids = snapshot(units, self.txns, e.db, e.table)
            wids = compactor_write_ids(table_wids)
            kind = MAJOR if e.ctype == CompactionType.MAJOR else MINOR
            plan = plan_compaction(location, kind, wids, visibility_txn_id=txn_id,
                                   valid_txns=txn_list, already_compactor_list=True,
                                   filesystem=fs)
            if plan is None:
                self._abort(txn_id)
                txn_id = None
                raise _Refused(f"nothing to compact ({kind}) in {location} below write id "
                               f"{wids.high_watermark}")
            units.write(lambda conn: bk.set_worker_progress(
                conn, e.id, self.worker_id, highest_write_id=plan.max_write_id,
                hadoop_job_id=f"{HOSTNAME}-compactor-{e.name}"[:128]))
            staged = stage_compaction(plan)
            if self.loop.stopping:
                raise _Shutdown()
            publish_compaction(staged)
            pause = float(self.config["hms_txn.compactor.worker.test.pause"])
            if pause > 0:
                log.warning("compaction %d: test pause of %.1fs before commit", e.id, pause)
                time.sleep(pause)
            if not units.read(lambda conn: bk.still_mine(conn, e.id, self.worker_id)):
                log.warning("compaction %d was revoked from %s; dropping its output", e.id,
                            self.worker_id)
                self._abort(txn_id)
                discard_staged(staged)
                return "revoked"
            committed = units.write(lambda conn: txn_commit.commit_txn(
                conn, txn_id, messages=self.txns.messages))
            if committed.conflict is not None:
                raise TxnAborted(committed.conflict)    # the abort itself is committed
            txn_id = None
            if not units.write(lambda conn: bk.mark_ready_for_cleaning(conn, e.id,
                                                                        self.worker_id)):
                log.warning("compaction %d committed but was revoked meanwhile", e.id)
            log.info("compaction %d of %s done: %s (%d rows, %d deletes, %d files, %.2fs)",
                     e.id, e.name, ", ".join(plan.outputs), staged.rows, staged.deletes,
                     staged.files, staged.seconds)
            return "ready for cleaning"
        except _Shutdown:
            self._abort(txn_id)
            if staged is not None:
                discard_staged(staged)
            units.write(lambda conn: bk.requeue(conn, e.id, self.worker_id))
            return "requeued"
        except _Refused as why:
            self._abort(txn_id)
            log.info("compaction %d of %s refused: %s", e.id, e.name, why)
            message = str(why)
            units.write(lambda conn: bk.finish(conn, e.id, REFUSED, message,
                                               worker_id=self.worker_id, retention=retention))
            return "refused"
        except Exception as err:  # noqa: BLE001 - any failure fails this request only
            log.exception("compaction %d of %s failed", e.id, e.name)
            self._abort(txn_id)
            if staged is not None:
                discard_staged(staged)
            message = f"{type(err).__name__}: {err}"
            units.write(lambda conn: bk.finish(conn, e.id, FAILED, message,
                                               worker_id=self.worker_id, retention=retention))
            return "failed"
        finally:
            if beat is not None:
                beat.stop()

    def _abort(self, txn_id) -> None:
        if not txn_id:
            return
        try:
            self.units.write(lambda conn: self.txns.abort_txn(conn, txn_id))
        except Exception as err:  # already aborted / committed: nothing to do
            log.info("abort of compaction txnid:%d: %s", txn_id, err)


class _Shutdown(Exception):
    pass
