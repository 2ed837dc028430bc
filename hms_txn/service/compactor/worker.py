"""Compaction workers (Hive's ``Worker``): each takes one queued request at a time (with
``engine=SPARK``, a batch of requests of one table and type: ``spark_engine``).

For a request the worker

1. claims it (initiated -> working, with its worker id and start time);
2. opens a COMPACTION transaction C and records it in the request, then heartbeats C for as
   long as the job runs (so C is not aborted as timed out under a long job);
3. takes C's snapshot: the ValidTxnList of that moment and the table's compactor
   ValidWriteIdList (high watermark below the lowest open write id, aborted ids excluded) and
   records that high watermark as the request's highest write id;
4. runs the job with ``orc_acid.compaction`` (``hms_txn.compactor.engine=LOCAL``: in this thread;
   ``SPARK``: one task per partition and bucket id in a Spark application, ``spark_engine``):
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

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from orc_acid import fs as afs
from orc_acid.compaction import (MAJOR, MINOR, begin_staging, compactor_write_ids,
                                 discard_staged, plan_compaction, plan_tasks, publish_compaction,
                                 record_task, stage_compaction)

from hms_txn import __version__
from hms_txn.common.config import Config
from hms_txn.common.errors import MetastoreError, NoSuchObject, TxnAborted
from hms_txn.domain.compaction import compaction_bookkeeping as bk
from hms_txn.domain.compaction import one_statement as one
from hms_txn.domain.txn import txn_commit
from hms_txn.domain.txn.compaction_queue import FAILED, REFUSED, CompactionType
from hms_txn.domain.txn.txn import TxnManager
from hms_txn.domain.txn.txn_records import TxnType, heartbeat_txn_in
from hms_txn.service.compactor.common import (HOSTNAME, Loop, is_acid_table, is_insert_only,
                                              object_location, revoke_timed_out, snapshot,
                                              worker_id)
from hms_txn.service.compactor.spark_engine import (SparkApplication, SparkJobStopped,
                                                    SparkSettings)
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


@dataclass
class _Job:
    """One claimed request on its way: its transaction, plan and staged output."""
    entry: bk.Entry
    txn_id: Optional[int] = None
    beat: Optional[_Heartbeater] = None
    plan: object = None
    staged: object = None
    table_location: str = ""
    tasks: List[object] = field(default_factory=list)


class Worker:
    def __init__(self, config: Config, units: UnitOfWork, txns: TxnManager, n: int = 0,
                 tables=None):
        self.config = config
        self.units = units
        self.txns = txns
        self.tables = tables        # extension mode: the upstream's (``object_location``)
        self.worker_id = worker_id(n)
        self.jobs = 0
        # engine=SPARK: its settings, checked now (a bad one stops start-up)
        self.spark = SparkSettings(config) if config["hms_txn.compactor.engine"] == "SPARK" \
            else None
        self.loop = Loop(f"hms-compactor-worker-{n}", self.run_once,
                         lambda: self.config["hive.compactor.worker.sleep.time"])

    def start(self) -> Loop:
        return self.loop.start()

    def run_once(self) -> bool:
        """Do one request (SPARK: one batch) if there is one; returns whether there was."""
        revoke_timed_out(self.units, self.txns, self.config["hive.compactor.worker.timeout"])
        if not self.units.read(bk.any_initiated):     # idle polls stay read-only
            return False
        fns = self.units.functions
        if fns is not None:     # the claim in one statement (hms_txn.domain.compaction.one_statement)
            e = self.units.call(lambda conn: one.claim_next(conn, fns, self.worker_id,
                                                            __version__))
        else:
            e = self.units.write(lambda conn: bk.claim_next(conn, self.worker_id, __version__))
        if e is None:
            return False
        batch = [e]
        while self.spark is not None and len(batch) < self.spark.per_application:
            more = self.units.write(lambda conn: bk.claim_next(conn, self.worker_id,
                                                               __version__, like=e))
            if more is None:
                break
            batch.append(more)
        for x in batch:
            log.info("compaction %d of %s (%s) started by %s", x.id, x.name,
                     CompactionType(x.ctype).name, self.worker_id)
        self.jobs += len(batch)
        self.compact_batch(batch)
        return True

    def compact(self, e: bk.Entry) -> str:
        """Run one claimed request; returns the outcome word (for tests and logs)."""
        return self.compact_batch([e])[e.id]

    def compact_batch(self, entries: List[bk.Entry]) -> Dict[int, str]:
        """Run claimed requests (with the LOCAL engine one after the other, with SPARK in one
        application); -> request id -> outcome word."""
        outcomes: Dict[int, str] = {}
        jobs = [_Job(e) for e in entries]
        try:
            ready = self._each(jobs, self._prepare, outcomes)
            if self.spark is None:
                for job in ready:
                    outcomes[job.entry.id] = (self._guard(job, self._stage_local) or
                                              self._guard(job, self._finish))
            else:
                staged = self._each(ready, self._begin_staging, outcomes)
                outcomes.update(self._run_on_spark(staged))
        finally:
            for job in jobs:
                if job.beat is not None:
                    job.beat.stop()
        return outcomes

    # -- the phases of a request --------------------------------------------------------------

    def _prepare(self, job: _Job) -> None:
        """Checks, the compaction transaction, its snapshot and the plan."""
        e, units = job.entry, self.units
        try:
            table, found = object_location(units, self.config, e.db, e.table, e.partition,
                                           self.tables)
        except NoSuchObject as err:
            raise _Refused(_not_found(e, err)) from None
        if not is_acid_table(table):
            raise _Refused(f"{e.db}.{e.table} is not a managed transactional table")
        if is_insert_only(table):
            raise _Refused("insert-only tables are not supported by the compactor yet")
        if found is None:
            raise _Refused("no file system of orc_acid.fs serves the location")
        fs, location = found
        job.table_location = (table.get("sd") or {}).get("location") or ""
        if e.ctype not in (CompactionType.MINOR, CompactionType.MAJOR):
            raise _Refused(f"{CompactionType(e.ctype).name} compaction is not supported")
        job.txn_id = units.write(lambda conn: self.txns.open_txns(
            conn, 1, e.run_as or "hive", HOSTNAME, agent_info=self.worker_id,
            txn_type=TxnType.COMPACTION)).txn_ids[0]
        if not units.write(lambda conn: bk.set_worker_progress(
                conn, e.id, self.worker_id, txn_id=job.txn_id)):
            self._abort(job.txn_id)
            job.txn_id = None
            return "revoked"
        job.beat = _Heartbeater(self.config, units, job.txn_id)
        txn_list, table_wids = snapshot(units, self.txns, e.db, e.table)
        wids = compactor_write_ids(table_wids)
        kind = MAJOR if e.ctype == CompactionType.MAJOR else MINOR
        job.plan = plan_compaction(location, kind, wids, visibility_txn_id=job.txn_id,
                                   valid_txns=txn_list, already_compactor_list=True,
                                   filesystem=fs)
        if job.plan is None:
            self._abort(job.txn_id)
            job.txn_id = None
            raise _Refused(f"nothing to compact ({kind}) in {location} below write id "
                           f"{wids.high_watermark}")
        units.write(lambda conn: bk.set_worker_progress(
            conn, e.id, self.worker_id, highest_write_id=job.plan.max_write_id,
            hadoop_job_id=f"{HOSTNAME}-compactor-{e.name}"[:128]))
        return None

    def _stage_local(self, job: _Job) -> None:
        job.staged = stage_compaction(job.plan)
        return None

    def _begin_staging(self, job: _Job) -> None:
        job.staged = begin_staging(job.plan)
        job.tasks = plan_tasks(job.staged)
        return None

    def _run_on_spark(self, jobs: List[_Job]) -> Dict[int, str]:
        """Every task of ``jobs`` in one Spark application; then each request is published
        and committed if all its tasks have results (``_finish``)."""
        if not jobs:
            return {}
        first = jobs[0].entry
        items = []
        for job in jobs:
            plan = job.plan
            location = plan.location if plan.filesystem is None else \
                afs.uri_of(job.table_location, plan.location)
            # a task's file system is rebuilt on the executor from the fs.* keys: not shipped
            items += [(job.entry.id, location, dataclasses.replace(t, filesystem=None))
                      for t in job.tasks]
        name = (f"hms-txn compaction {','.join(str(j.entry.id) for j in jobs)} "
                f"{first.db}.{first.table} ({CompactionType(first.ctype).name.lower()}, "
                f"{len(jobs)} partition(s))")
        app = SparkApplication(self.spark, name, items)
        last_check = [time.monotonic()]

        def record_app_id(app_id: str) -> None:
            for job in jobs:
                self.units.write(lambda conn, job=job: bk.set_worker_progress(
                    conn, job.entry.id, self.worker_id, hadoop_job_id=app_id[:128]))

        def should_stop() -> bool:
            if self.loop.stopping:
                return True
            if time.monotonic() - last_check[0] < 5.0:
                return False
            last_check[0] = time.monotonic()
            return not all(self.units.read(lambda conn, job=job: bk.still_mine(
                conn, job.entry.id, self.worker_id)) for job in jobs)

        try:
            results = app.run(record_app_id, should_stop)
        except Exception as err:   # noqa: BLE001 - the application failed: each request does
            return {job.entry.id: self._handle(job, err) for job in jobs}
        outcomes = {}
        for job in jobs:
            for result in results.get(job.entry.id, []):
                record_task(job.staged, result)
            job.staged.seconds = sum(r.seconds for r in results.get(job.entry.id, []))
            outcomes[job.entry.id] = self._guard(job, self._finish)
        return outcomes

    def _finish(self, job: _Job) -> str:
        """Publish the output (refused unless every task has a result) and commit."""
        e, units, staged, plan = job.entry, self.units, job.staged, job.plan
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
            self._abort(job.txn_id)
            discard_staged(staged)
            return "revoked"
        committed = units.write(lambda conn: txn_commit.commit_txn(
            conn, job.txn_id, messages=self.txns.messages))
        if committed.conflict is not None:
            raise TxnAborted(committed.conflict)    # the abort itself is committed
        job.txn_id = None
        if not units.write(lambda conn: bk.mark_ready_for_cleaning(conn, e.id,
                                                                    self.worker_id)):
            log.warning("compaction %d committed but was revoked meanwhile", e.id)
        log.info("compaction %d of %s done: %s (%d rows, %d deletes, %d files, %.2fs)",
                 e.id, e.name, ", ".join(plan.outputs), staged.rows, staged.deletes,
                 staged.files, staged.seconds)
        return "ready for cleaning"

    # -- failures -----------------------------------------------------------------------------

    def _each(self, jobs: List[_Job], step, outcomes: Dict[int, str]) -> List[_Job]:
        """``step`` on each job (``_guard``); -> the jobs that go on, the others' outcomes
        recorded in ``outcomes``."""
        going = []
        for job in jobs:
            outcome = self._guard(job, step)
            if outcome is None:
                going.append(job)
            else:
                outcomes[job.entry.id] = outcome
        return going

    def _guard(self, job: _Job, step) -> Optional[str]:
        """``step(job)``: None to go on, or the request's outcome (also after a failure)."""
        try:
            return step(job)
        except Exception as err:  # noqa: BLE001 - any failure ends this request only
            return self._handle(job, err)

    def _handle(self, job: _Job, err: Exception) -> str:
        e, units = job.entry, self.units
        retention = bk.retention_of(self.config)
        self._abort(job.txn_id)
        job.txn_id = None
        if isinstance(err, _Refused):
            log.info("compaction %d of %s refused: %s", e.id, e.name, err)
            message = str(err)
            units.write(lambda conn: bk.finish(conn, e.id, REFUSED, message,
                                               worker_id=self.worker_id, retention=retention))
            return "refused"
        if job.staged is not None:
            discard_staged(job.staged)
        if isinstance(err, (_Shutdown, SparkJobStopped)):
            # stopping, or a request of the batch was revoked: the others go back to the queue
            if units.write(lambda conn: bk.requeue(conn, e.id, self.worker_id)):
                return "requeued"
            return "revoked"
        log.error("compaction %d of %s failed: %s", e.id, e.name, err,
                  exc_info=not isinstance(err, MetastoreError))
        message = f"{type(err).__name__}: {err}"
        units.write(lambda conn: bk.finish(conn, e.id, FAILED, message,
                                           worker_id=self.worker_id, retention=retention))
        return "failed"

    def _abort(self, txn_id) -> None:
        if not txn_id:
            return
        try:
            self.units.write(lambda conn: self.txns.abort_txn(conn, txn_id))
        except Exception as err:  # already aborted / committed: nothing to do
            log.info("abort of compaction txnid:%d: %s", txn_id, err)


class _Shutdown(Exception):
    pass
