"""Which Spark task attempts may still add files to a statement, and what becomes of the
files of an attempt that outlives it.

A statement's files are written by Spark tasks, and Spark does not wait for all of them:
when one task of a write job fails, the job fails and its abort runs while the job's other
tasks are cancelled asynchronously, so a task past its last cancellation check finishes
writing after the abort removed the statement's directories. Speculative and zombie
attempts can likewise write after the job committed. Hence the protocol:

- an attempt asks ``start`` before writing; once its statement has ended it writes nothing;
- it calls ``finish`` when done (also when it failed); if the statement ended meanwhile, the
  driver sweeps the statement's directories again (``Outcome``: all of them when it was
  aborted, the files the commit did not keep when it committed);
- an abort waits, a bounded time, for the attempts that are writing, so that it returns with
  the directories gone in the common case, not some seconds later.

Ending a statement before sweeping it is what closes every interleaving: an attempt that
started before the end either published its files before the sweep (the sweep removes them)
or reports after it (its ``finish`` sweeps again).

The driver keeps the bookkeeping (:class:`Attempts`); a task runs its write through
:func:`run_as_attempt`, which asks and reports over the coordinator. Speculative attempts
are refused outright (:func:`refuse_speculation`).
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from multiprocessing import AuthenticationError
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

# Outcome and ABORTED (how a statement ended) are the shared statement bookkeeping's
from hms_txn.clients.acid.statement_dirs import ABORTED as ABORTED
from hms_txn.clients.acid.statement_dirs import Outcome

from ._coordinator import COORDINATOR_HOST
from ._errors import HiveAcidError
from ._rpc import quiet_rpc, rpc


# Spark kills a cancelled task's Python worker after spark.python.task.killTimeout (2 s by
# default); an attempt that neither finishes nor is killed within this is not waited for
# (its files, if any, are swept when it reports, or left to the compactor's cleaner).
ABORT_WAIT_S = 10.0

# ended statements whose outcome is remembered for attempts reporting late
_REMEMBERED = 4096


class Attempts:
    """Statements (by token) open to task attempts, the attempts writing, and the outcome of
    ended statements. Thread-safe; holds no other lock while waiting."""

    def __init__(self, remembered: int = _REMEMBERED):
        self._cv = threading.Condition()
        self._open: Dict[str, object] = {}               # token -> the statement
        self._writing: Dict[str, Set[str]] = {}          # token -> attempt ids
        self._ended: "OrderedDict[str, Tuple[object, Outcome]]" = OrderedDict()
        self._remembered = remembered

    def open(self, token: str, statement: object) -> None:
        with self._cv:
            self._open[token] = statement

    def start(self, token: str, attempt: str) -> bool:
        """May this attempt write? Registers it as writing when it may."""
        with self._cv:
            if token not in self._open:
                return False
            self._writing.setdefault(token, set()).add(attempt)
            return True

    def finish(self, token: str, attempt: str) -> Optional[Tuple[object, Outcome]]:
        """The attempt is done. -> (statement, outcome) when its statement has ended (the
        caller sweeps it again), None while it is open."""
        with self._cv:
            writing = self._writing.get(token)
            if writing is not None:
                writing.discard(attempt)
                if not writing:
                    del self._writing[token]
            self._cv.notify_all()
            if token in self._open:
                return None
            return self._ended.get(token)

    def end(self, token: str, outcome: Outcome, *, only_open: bool = False) -> None:
        """The statement accepts no more attempts; late ones are swept per ``outcome``. An
        abort also overrides an earlier commit outcome (the transaction failed after)."""
        with self._cv:
            statement = self._open.pop(token, None)
            if statement is None:
                if only_open or token not in self._ended:
                    return
                statement = self._ended[token][0]
            self._ended[token] = (statement, outcome)
            self._ended.move_to_end(token)
            self._forget_old()

    def wait_idle(self, tokens: Iterable[str], timeout_s: float) -> bool:
        """Wait until no attempt of these statements is writing; False on timeout."""
        tokens = list(tokens)
        with self._cv:
            return self._cv.wait_for(
                lambda: not any(t in self._writing for t in tokens), timeout_s)

    def _forget_old(self) -> None:
        # an outcome is kept while an attempt of its statement may still report
        excess = len(self._ended) - self._remembered
        for token in list(self._ended):
            if excess <= 0:
                break
            if token not in self._writing:
                del self._ended[token]
                excess -= 1


# -- the task side ----------------------------------------------------------------------------

def run_as_attempt(statement: tuple, write: Callable[[], List[tuple]]) -> List[tuple]:
    """Run ``write()`` (-> the files written) as one task attempt of a statement, named by
    (coordinator address, authkey, token): an attempt that starts after its statement ended
    (the job failed or committed without it) writes nothing, and one that ends after that
    has its files swept by the driver. -> the files to commit."""
    coordinator, authkey, token = statement
    attempt = secrets.token_hex(8)
    try:
        may_write = rpc(coordinator, authkey, "task_started", token, attempt)
    except (OSError, EOFError, AuthenticationError) as e:
        # Writing unguarded could leave a late attempt's files in the table: refuse, with
        # what to fix (the coordinator listens where coordinator_hosts says).
        raise HiveAcidError(
            f"this task cannot reach the hive_acid coordinator of the driver at "
            f"{coordinator[0]}:{coordinator[1]} ({type(e).__name__}: {e}); executors must "
            f"be able to connect to the driver there: see {COORDINATOR_HOST}, "
            f"spark.driver.host and spark.driver.bindAddress") from None
    if not may_write:
        return []
    try:
        files = write()
    except BaseException:
        quiet_rpc(coordinator, authkey, "task_finished", token, attempt)
        raise
    if not rpc(coordinator, authkey, "task_finished", token, attempt):
        return []
    return files


def refuse_speculation(on: bool) -> None:
    # Two attempts of one task write the same file name (writer id = task partition id),
    # each replacing the other's; when the losing attempt is killed between removing the
    # winner's file and publishing its own, the commit names a file that is gone.
    if on:
        raise HiveAcidError(
            "hive_acid writes need spark.speculation=false: speculative attempts of a task "
            "write the same ACID file, and a killed attempt can remove the committed one")
