"""Read locks that live as long as a DataFrame uses them (``hive_acid.read``, the ACID
tables of ``hive_acid.sql`` queries).

A DataFrame has no end event, and every DataFrame derived from one (``df.where(...)``, a
join, a temporary view, a cached copy) reads the same files without telling us. What all of
them share is the JVM plan's leaf objects: the table of a DataSource V2 scan, the relation
of a file scan; every plan node copy Spark makes keeps them. So a lease holds the lock of
its scan (``_scans``, heartbeated by the driver) while the JVM can still reach one of those
leaves, which it watches through ``java.lang.ref.WeakReference``s (made here for the
leaves of the plan; hive_acid's JVM reader keeps them itself for the tables it makes for
a lease: ``AcidOrcSource.leaseAlive``):

* while the DataFrame returned to the user is alive (a Python weakref), nothing is checked:
  its plan is alive;
* once it is garbage collected in Python (its py4j handles released), the lease is
  *orphaned*: derived DataFrames may still be in use. The lease thread releases the lock as
  soon as the weak references are cleared, checking 1.5 s after the orphaning and then with
  a growing interval (x5, up to 5 minutes). A plan the JVM still reaches may only wait for
  a collection of the old generation, so a check that finds one asks the JVM for a full
  collection (``System.gc()``, as Spark's own ContextCleaner does to find unreachable RDDs
  and shuffles) and looks again: one collection for all the leases due, at most one per
  ``MIN_GC_INTERVAL_S`` (a full collection stops the driver's JVM for tens of
  milliseconds);
* when the lease's SparkContext has stopped, and at ``hive_acid.shutdown()``, the lock is
  released.

A lease never ends while a job that reads its files can run: a job runs on a Dataset, whose
plan holds the leaves.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from ._jvm import jvm_class

log = logging.getLogger("spark.hive_acid")

# py4j releases a Python handle's JVM object from a worker thread that looks for work once
# a second: the first check waits for it
FIRST_CHECK_S = 1.5
BACKOFF = 5.0
MAX_INTERVAL_S = 300.0
POLL_S = 5.0            # how often stopped SparkContexts are looked for
# a JVM garbage collection is asked for at most this often (a full collection: tens of
# milliseconds on a driver's heap), and only for leases a check without one did not end
MIN_GC_INTERVAL_S = 10.0


@dataclass
class Lease:
    scan: str
    refs: List[object]             # JVM WeakReferences to the plan's leaves
    context: object                # the JVM SparkContext
    jvm: object                    # py4j's view of that JVM
    # the JVM reader's class, when it keeps the plan's tables itself (under the scan's id)
    reader: Optional[object] = None

    def alive(self) -> bool:
        try:
            if self.reader is not None:
                return bool(self.reader.leaseAlive(self.scan))
            return not all(_cleared(r) for r in self.refs)
        except Exception:       # the JVM is gone
            return False
    orphan: bool = False
    due: float = 0.0
    interval: float = FIRST_CHECK_S
    checks: int = field(default=0)


def plan_leaves(jdf) -> List[object]:
    """The JVM objects a Dataset's scans share with every plan derived from it: DataSource V2
    tables and file relations (other leaves themselves)."""
    out = []
    it = jdf.queryExecution().analyzed().collectLeaves().iterator()
    while it.hasNext():
        leaf = it.next()
        kind = leaf.getClass().getSimpleName()
        if kind == "DataSourceV2Relation":
            out.append(leaf.table())
        elif kind == "LogicalRelation":
            out.append(leaf.relation())
        elif kind not in ("LocalRelation", "OneRowRelation"):
            out.append(leaf)
    return out


class Leases:
    """The leases of one driver. ``release(scan id)`` ends a scan's lock."""

    def __init__(self, release: Callable[[str], None]):
        self._release = release
        self._leases: Dict[str, Lease] = {}
        self._mu = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = None
        self._last_gc = float("-inf")

    def hold(self, scan: str, df, reader: Optional[str] = None) -> None:
        """Keep ``scan``'s lock while ``df`` or a DataFrame derived from it can be used.
        ``reader``: the JVM reader's class when it reads every file of ``df`` and keeps its
        tables under ``scan`` (no plan to walk: one py4j call per check)."""
        jvm = df.sparkSession.sparkContext._jvm
        context = df.sparkSession.sparkContext._jsc.sc()
        if reader is not None:
            lease = Lease(scan, [], context, jvm, jvm_class(jvm, reader))
        else:
            leaves = plan_leaves(df._jdf)
            if not leaves:          # nothing read from files (an empty table)
                self._release(scan)
                return
            lease = Lease(scan, [jvm.java.lang.ref.WeakReference(x) for x in leaves],
                          context, jvm)
        with self._mu:
            self._leases[scan] = lease
            if self._thread is None or not self._thread.is_alive():
                self._stop = threading.Event()
                self._thread = threading.Thread(target=self._loop, args=(self._stop,),
                                                name="hive-acid-leases", daemon=True)
                self._thread.start()
        weakref.finalize(df, self._orphaned, scan)

    def held(self) -> List[str]:
        with self._mu:
            return list(self._leases)

    def _orphaned(self, scan: str) -> None:
        # a finalizer: may run in any thread, inside a py4j call too, so no JVM call here
        with self._mu:
            lease = self._leases.get(scan)
            if lease is not None:
                lease.orphan = True
                lease.due = time.monotonic() + FIRST_CHECK_S
        self._wake.set()

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self._mu:
                dues = [x.due for x in self._leases.values() if x.orphan]
            wait = POLL_S if not dues else max(0.0, min(dues) - time.monotonic())
            self._wake.wait(min(wait, POLL_S))
            self._wake.clear()
            if stop.is_set():
                return
            try:
                self.check()
            except Exception:
                log.debug("lease check failed", exc_info=True)

    def check(self) -> None:
        """End the leases whose SparkContext stopped or whose plan the JVM no longer reaches:
        the orphaned leases that are due are checked, and those still reached once more
        after a JVM garbage collection when one is allowed (one for all of them)."""
        now = time.monotonic()
        with self._mu:
            leases = list(self._leases.values())
        ended = [x for x in leases if _stopped(x.context)]
        due = [x for x in leases if x.orphan and x.due <= now and x not in ended]
        alive = [x for x in due if x.alive()]
        ended += [x for x in due if x not in alive]
        if alive and now - self._last_gc >= MIN_GC_INTERVAL_S:
            self._last_gc = now
            try:
                alive[0].jvm.java.lang.System.gc()
            except Exception:       # the JVM is gone: the weak references say so below
                pass
            ended += [x for x in alive if not x.alive()]
            alive = [x for x in alive if x not in ended]
        for x in alive:
            x.checks += 1
            x.interval = min(MAX_INTERVAL_S, x.interval * BACKOFF)
            # not later than the next collection allowed
            x.due = min(time.monotonic() + x.interval, self._last_gc + MIN_GC_INTERVAL_S)
        for x in ended:
            self._end(x.scan)

    def _end(self, scan: str) -> None:
        with self._mu:
            lease = self._leases.pop(scan, None)
        if lease is not None:
            self._release(scan)
            if lease.reader is not None:
                try:
                    lease.reader.leaseEnd(scan)
                except Exception:       # the JVM is gone
                    pass

    def close(self) -> None:
        """Release every lease and stop the thread (the driver closes; a later lease starts
        a new one)."""
        with self._mu:
            self._stop.set()
        self._wake.set()
        for scan in self.held():
            self._end(scan)


def _cleared(ref) -> bool:
    try:
        return bool(ref.refersTo(None))
    except Exception:           # the JVM is gone
        return True


def _stopped(context) -> bool:
    try:
        return bool(context.isStopped())
    except Exception:           # the JVM is gone
        return True
