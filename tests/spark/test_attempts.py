"""Task attempts that outlive their statement (``spark/_attempts.py``): the registry on its
own, then every interleaving of a late attempt with an abort or a commit, driven step by
step against the real driver, metastore and files (the Spark job around them cannot be made
to interleave on purpose; ``test_hive_acid_rw`` covers the job)."""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pytest

from spark._attempts import ABORTED, Attempts, Outcome, run_as_attempt

KEPT = Outcome(frozenset({"/t/delta_1_1_0/bucket_00000"}), frozenset({"/t/delta_1_1_0"}))


# -- the registry -----------------------------------------------------------------------------

def test_an_attempt_may_write_only_while_its_statement_is_open():
    a = Attempts()
    st = object()
    assert not a.start("1/0", "x")               # never opened
    a.open("1/0", st)
    assert a.start("1/0", "x")
    assert a.finish("1/0", "x") is None          # open: its files are the statement's
    a.end("1/0", KEPT)
    assert not a.start("1/0", "y")               # ended: a late attempt writes nothing


def test_an_attempt_finishing_after_the_end_gets_the_outcome():
    a = Attempts()
    st = object()
    a.open("1/0", st)
    assert a.start("1/0", "x")
    a.end("1/0", KEPT)
    assert a.finish("1/0", "x") == (st, KEPT)
    a.end("1/0", ABORTED)                         # the transaction failed after the commit
    assert a.finish("1/0", "x") == (st, ABORTED)


def test_only_open_ends_a_statement_that_has_not_ended():
    a = Attempts()
    st = object()
    a.open("1/0", st)
    a.open("1/1", st)
    a.end("1/0", KEPT)
    for token in ("1/0", "1/1", "9/9"):
        a.end(token, Outcome(frozenset(), frozenset()), only_open=True)
    assert a.finish("1/0", "x")[1] == KEPT
    assert a.finish("1/1", "x")[1] == Outcome(frozenset(), frozenset())
    assert a.finish("9/9", "x") is None           # unknown: nothing to sweep


def test_wait_idle_returns_when_the_last_writing_attempt_finishes():
    a = Attempts()
    a.open("1/0", object())
    a.open("2/0", object())
    assert a.start("1/0", "x") and a.start("1/0", "y") and a.start("2/0", "z")
    assert a.wait_idle(["3/0"], 0)                # nothing writing
    assert not a.wait_idle(["1/0"], 0.05)         # timed out
    done = []
    waiter = threading.Thread(target=lambda: done.append(a.wait_idle(["1/0"], 30)))
    waiter.start()
    a.finish("1/0", "x")
    time.sleep(0.1)
    assert not done                               # y is still writing
    a.finish("1/0", "y")
    waiter.join(30)
    assert done == [True]
    assert not a.wait_idle(["2/0"], 0)            # another statement's attempt is unaffected


def test_outcomes_are_forgotten_oldest_first_but_not_while_an_attempt_writes():
    a = Attempts(remembered=2)
    for i in range(4):
        a.open(f"{i}/0", i)
    assert a.start("0/0", "late")
    for i in range(4):
        a.end(f"{i}/0", ABORTED)
    # 1/0 is the oldest without a writing attempt; 0/0 stays until its attempt reports
    assert a.finish("1/0", "-") is None
    assert a.finish("0/0", "late") == (0, ABORTED)
    assert a.finish("3/0", "-") == (3, ABORTED)


# -- late attempts against the real driver -------------------------------------------------------

def _data_files(location):
    out = []
    for root, _, files in os.walk(location):
        out += [os.path.relpath(os.path.join(root, f), location) for f in files
                if not f.startswith((".", "_"))]
    return sorted(out)


def _tree(location):
    return sorted((os.path.relpath(r, location), sorted(d), sorted(f))
                  for r, d, f in os.walk(location))


class LateAttempt:
    """A task attempt run in a thread with ``_attempts.run_as_attempt``; its write starts when
    the test says so. ``result`` is what the task would hand to Spark."""

    def __init__(self, d, st, spec, rows, task_id):
        from orc_acid import table_io as _io
        self.started, self.go = threading.Event(), threading.Event()
        self.wrote = []
        self.result = self.error = None

        def write():
            self.started.set()
            assert self.go.wait(30)
            self.wrote = _io.write_inserts(spec, rows, task_id)
            return self.wrote

        def run():
            try:
                self.result = run_as_attempt((d.address, d.authkey, st.token), write)
            except BaseException as e:
                self.error = e
        self.thread = threading.Thread(target=run)
        self.thread.start()
        assert self.started.wait(30), self.error

    def finish(self):
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive() and self.error is None, self.error


@pytest.fixture
def writer(acid_spark, tname):
    """(driver, table info, a function opening a transaction and an insert statement)."""
    from spark import hive_acid as H
    from spark._dml import statement_spec
    from spark._scope import acid_table
    from spark._session import registered_driver
    H.create_table(acid_spark, tname, "id INT, p STRING", partition_by=["p"])
    d = registered_driver(acid_spark)
    info = acid_table(d, tname)

    def statement():
        txn = d.open_txn()
        st = d.begin_statement(txn, info, "insert")
        return txn, st, statement_spec(info, st, "append")
    return d, info, statement


def _rows(*pairs):
    return pa.table({"id": pa.array([i for i, _ in pairs], pa.int32()),
                     "p": [p for _, p in pairs]})


@pytest.mark.spark
def test_abort_waits_for_an_attempt_that_is_writing(writer):
    d, info, statement = writer
    before = _tree(info.location)
    txn, st, spec = statement()
    late = LateAttempt(d, st, spec, _rows((1, "a"), (2, "b")), 0)
    errors = []

    def abort():
        try:
            d.abort(txn)
        except BaseException as e:
            errors.append(e)
    aborted = threading.Thread(target=abort)
    aborted.start()
    time.sleep(0.5)
    assert aborted.is_alive()                     # waiting for the attempt
    late.finish()
    aborted.join(30)
    assert not aborted.is_alive() and not errors, errors
    assert late.wrote and late.result == []       # it wrote; its statement had ended
    assert _tree(info.location) == before         # no file, no delta, no partition dir


@pytest.mark.spark
def test_an_attempt_reporting_after_the_abort_gave_up_waiting_is_swept(writer):
    d, info, statement = writer
    before = _tree(info.location)
    txn, st, spec = statement()
    late = LateAttempt(d, st, spec, _rows((1, "a"), (2, "b")), 0)
    d.abort(txn, wait_s=0)
    late.finish()
    assert [rel for _, rel, _ in late.wrote] == [
        "p=a/delta_0000001_0000001_0000/bucket_00000",
        "p=b/delta_0000001_0000001_0000/bucket_00000"]
    assert late.result == []
    assert _tree(info.location) == before


@pytest.mark.spark
def test_an_attempt_starting_after_the_abort_writes_nothing(writer):
    d, info, statement = writer
    txn, st, spec = statement()
    d.abort(txn)
    called = []
    assert run_as_attempt((d.address, d.authkey, st.token), lambda: called.append(1)) == []
    assert called == []


@pytest.mark.spark
def test_a_late_attempt_of_a_committed_statement_leaves_only_the_committed_files(
        writer, acid_spark, tname):
    from orc_acid import table_io as _io
    from spark import hive_acid as H
    d, info, statement = writer
    txn, st, spec = statement()
    # attempt 0 (the one Spark commits) writes p=a; a zombie attempt of task 1 started
    # before the commit writes p=a and a partition of its own after it
    late = LateAttempt(d, st, spec, _rows((8, "a"), (9, "z")), 1)
    kept = _io.write_inserts(spec, _rows((1, "a")), 0)
    d.finish_statement(txn, st, kept)
    d.commit(txn)
    late.finish()
    assert late.result == []
    assert _data_files(info.location) == ["p=a/delta_0000001_0000001_0000/bucket_00000"]
    assert not os.path.exists(os.path.join(info.location, "p=z"))
    assert sorted(tuple(r) for r in H.read(acid_spark, tname).collect()) == [(1, "a")]
    # a failed transaction after the commit outcome: its late attempts remove everything
    txn2, st2, spec2 = statement()
    late2 = LateAttempt(d, st2, spec2, _rows((5, "b")), 3)
    d.finish_statement(txn2, st2, _io.write_inserts(spec2, _rows((4, "b")), 0))
    d.abort(txn2, wait_s=0)
    late2.finish()
    assert _data_files(info.location) == ["p=a/delta_0000001_0000001_0000/bucket_00000"]
