"""Structured Streaming into ACID tables (spark/streaming_sink.py): each micro-batch one
transaction, exactly once across stops, restarts and crashes on either side of the metastore
commit.

The source is a directory of JSON files read one file per micro-batch, so every batch's rows
are known and the table must hold exactly the union of the files written so far."""

from __future__ import annotations

import logging
import os
import tempfile
import time

import pytest

from hms_txn.clients.acid import metastore as M

pytestmark = [pytest.mark.spark]

SCHEMA = "id INT, v STRING, p STRING"
T0 = int(time.time()) - 3600


class InjectedFailure(RuntimeError):
    pass


@pytest.fixture
def work():
    """(source directory, checkpoint directory) of one test."""
    root = tempfile.mkdtemp(prefix="hive-acid-stream-")
    src = os.path.join(root, "in")
    os.makedirs(src)
    return src, os.path.join(root, "chk")


@pytest.fixture
def acid_table(acid_spark, tname):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, SCHEMA, partition_by=["p"])
    return tname


def file_rows(k):
    """The rows of input file k: five ids of its own, spread over two partitions."""
    return [(k * 100 + i, f"f{k}", f"p{i % 2}") for i in range(5)]


def drop_file(src, k):
    """Write input file k atomically (Spark ignores names starting with '.'). The file
    source takes files oldest first, so file k gets modification time T0 + k: file k is
    the k-th batch of a source that got files 0..k."""
    import json
    tmp = os.path.join(src, f".f{k:03d}.json.tmp")
    with open(tmp, "w") as f:
        for i, v, p in file_rows(k):
            f.write(json.dumps({"id": i, "v": v, "p": p}) + "\n")
    os.utime(tmp, (T0 + k, T0 + k))
    os.rename(tmp, os.path.join(src, f"f{k:03d}.json"))


def expected(files):
    return sorted(r for k in files for r in file_rows(k))


def source(spark, src):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(src)


def run_sink(spark, src, chk, table, **kw):
    """Run the hive_acid.write_stream query until the files present are consumed."""
    from spark import hive_acid as H
    q = H.write_stream(source(spark, src), table, chk, trigger={"availableNow": True}, **kw)
    assert q.awaitTermination(120), "the streaming query did not finish"
    assert q.exception() is None
    return q


def run_foreach(spark, src, chk, fn):
    """Run a foreachBatch query with ``fn``; -> the query's error (None when it finished)."""
    from pyspark.errors import StreamingQueryException
    q = (source(spark, src).writeStream.foreachBatch(fn).option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    try:
        assert q.awaitTermination(120), "the streaming query did not finish"
    except StreamingQueryException as e:
        return e
    return None


def table_rows(spark, table):
    from spark import hive_acid as H
    return sorted(tuple(r) for r in H.read(spark, table).select("id", "v", "p").collect())


def files_rows(ms, table):
    """The table's snapshot read straight from its files with orc_acid."""
    import orc_acid
    info = M.table_info(ms, table)
    txns = M.valid_txn_list(ms)
    wids = M.valid_write_ids(ms, [table], txns)[table]
    got = []
    for _, values, loc in M.list_partitions(ms, info):
        tb = orc_acid.read_table(loc, wids, valid_txns=txns)
        got += [(i, v, values[0]) for i, v in zip(tb.column("id").to_pylist(),
                                                  tb.column("v").to_pylist())]
    return sorted(got)


def marker(ms, table, sink_id):
    from spark import streaming_sink as streaming
    return ms.get_table_acid_aware(*table.split(".")).parameters.get(streaming.marker_key(sink_id))


def delta_dirs(ms, table):
    """Every delta directory of the table, over all partitions."""
    info = M.table_info(ms, table)
    out = []
    for root, dirs, _ in os.walk(info.location):
        out += [os.path.relpath(os.path.join(root, d), info.location) for d in dirs
                if d.startswith("delta_")]
    return sorted(out)


def committed_batches(chk):
    d = os.path.join(chk, "commits")
    return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def test_stop_and_restart_neither_duplicates_nor_loses_batches(acid_spark, acid_table, work,
                                                                ms):
    from spark import streaming_sink as streaming
    src, chk = work
    sink = streaming.default_sink_id(chk)
    for k in (0, 1):
        drop_file(src, k)
    run_sink(acid_spark, src, chk, acid_table)
    assert table_rows(acid_spark, acid_table) == expected([0, 1])
    assert marker(ms, acid_table, sink) == "1"

    # restarted with the same checkpoint: only the new files, one batch (transaction) each
    for k in (2, 3, 4):
        drop_file(src, k)
    run_sink(acid_spark, src, chk, acid_table)
    assert table_rows(acid_spark, acid_table) == expected(range(5))
    assert files_rows(ms, acid_table) == expected(range(5))
    assert marker(ms, acid_table, sink) == "4"
    assert committed_batches(chk) == [0, 1, 2, 3, 4]
    write_ids = {d.split("/")[-1].split("_")[1] for d in delta_dirs(ms, acid_table)}
    assert len(write_ids) == 5

    # a restart with nothing new writes nothing
    run_sink(acid_spark, src, chk, acid_table)
    assert table_rows(acid_spark, acid_table) == expected(range(5))
    assert marker(ms, acid_table, sink) == "4"


def test_batch_replayed_after_its_metastore_commit_is_skipped(acid_spark, acid_table, work,
                                                              ms, caplog):
    """The driver dies after the metastore commit of batch 1, before Spark's checkpoint
    commit: the restarted query replays batch 1 and the sink skips it."""
    from spark import streaming_sink as streaming
    src, chk = work
    for k in (0, 1, 2):
        drop_file(src, k)
    write = streaming.foreach_batch_writer(acid_spark, acid_table, sink_id="crash")

    def crash_after_commit(df, batch_id):
        write(df, batch_id)
        if batch_id == 1:
            raise InjectedFailure("driver lost after the metastore commit")
    err = run_foreach(acid_spark, src, chk, crash_after_commit)
    assert err is not None and "driver lost after the metastore commit" in str(err)
    assert committed_batches(chk) == [0]          # Spark will replay batch 1
    assert marker(ms, acid_table, "crash") == "1"
    assert table_rows(acid_spark, acid_table) == expected([0, 1])
    deltas = delta_dirs(ms, acid_table)

    with caplog.at_level(logging.INFO, logger="spark.hive_acid.streaming"):
        assert run_foreach(acid_spark, src, chk, write) is None
    assert "batch 1 already committed" in caplog.text
    assert committed_batches(chk) == [0, 1, 2]
    assert table_rows(acid_spark, acid_table) == expected([0, 1, 2])
    assert files_rows(ms, acid_table) == expected([0, 1, 2])
    assert marker(ms, acid_table, "crash") == "2"
    # the skipped replay wrote no files; batch 2 wrote its own (one or two partitions)
    new = [d for d in delta_dirs(ms, acid_table) if d not in deltas]
    assert len({d.split("/")[-1] for d in new}) == 1


def test_lost_checkpoint_commit_after_a_stop_is_skipped(acid_spark, acid_table, work, ms,
                                                        caplog):
    """The same through write_stream: the checkpoint's last commit file removed after a stop
    (what a crash between the two commits leaves) makes Spark replay that batch."""
    from spark import streaming_sink as streaming
    src, chk = work
    for k in (0, 1):
        drop_file(src, k)
    run_sink(acid_spark, src, chk, acid_table, query_name=f"replay_{os.getpid()}")
    for name in ("1", ".1.crc"):      # the commit file and its Hadoop checksum
        os.unlink(os.path.join(chk, "commits", name))
    drop_file(src, 2)
    with caplog.at_level(logging.INFO, logger="spark.hive_acid.streaming"):
        run_sink(acid_spark, src, chk, acid_table)
    assert "batch 1 already committed" in caplog.text
    assert table_rows(acid_spark, acid_table) == expected([0, 1, 2])
    assert marker(ms, acid_table, streaming.default_sink_id(chk)) == "2"


def test_batch_failing_before_commit_leaves_nothing_and_is_written_once(acid_spark,
                                                                        acid_table, work, ms):
    """A batch failing after its files are written but before the commit is aborted (no
    rows, no files) and written exactly once when the query restarts."""
    from spark import streaming_sink as streaming
    src, chk = work
    for k in (0, 1, 2):
        drop_file(src, k)
    fail = {"armed": True}

    def append_then_maybe_fail(tx, df, batch_id):
        tx.append(acid_table, df)
        if batch_id == 1 and fail["armed"]:
            raise InjectedFailure("failure before the metastore commit")
    write = streaming.foreach_batch_writer(acid_spark, acid_table, sink_id="precommit",
                                           write=append_then_maybe_fail)
    err = run_foreach(acid_spark, src, chk, write)
    assert err is not None and "failure before the metastore commit" in str(err)
    assert table_rows(acid_spark, acid_table) == expected([0])
    assert marker(ms, acid_table, "precommit") == "0"
    assert len({d.split("/")[-1] for d in delta_dirs(ms, acid_table)}) == 1   # batch 0 only
    assert [t.id for t in ms.get_open_txns_info().open_txns
            if t.state == M.T.TxnState.OPEN] == []       # the failed batch was aborted

    fail["armed"] = False
    assert run_foreach(acid_spark, src, chk, write) is None
    assert table_rows(acid_spark, acid_table) == expected([0, 1, 2])
    assert files_rows(ms, acid_table) == expected([0, 1, 2])
    assert marker(ms, acid_table, "precommit") == "2"
    assert len({d.split("/")[-1] for d in delta_dirs(ms, acid_table)}) == 3


def test_two_sinks_into_one_table(acid_spark, acid_table, work, ms):
    """Two queries (two checkpoints, two markers) append to one table at the same time;
    the second one starts (creating its marker) while the first is committing."""
    from spark import hive_acid as H
    from spark import streaming_sink as streaming
    src_a, chk_a = work
    root = os.path.dirname(src_a)
    src_b, chk_b = os.path.join(root, "in_b"), os.path.join(root, "chk_b")
    os.makedirs(src_b)
    for k in (0, 1, 2):
        drop_file(src_a, k)
    for k in (10, 11, 12):
        drop_file(src_b, k)
    qa = H.write_stream(source(acid_spark, src_a), acid_table, chk_a,
                        trigger={"availableNow": True})
    qb = H.write_stream(source(acid_spark, src_b), acid_table, chk_b,
                        trigger={"availableNow": True})
    for q in (qa, qb):
        assert q.awaitTermination(120)
        assert q.exception() is None
    assert table_rows(acid_spark, acid_table) == expected([0, 1, 2, 10, 11, 12])
    assert marker(ms, acid_table, streaming.default_sink_id(chk_a)) == "2"
    assert marker(ms, acid_table, streaming.default_sink_id(chk_b)) == "2"
    assert streaming.recorded_batch(acid_spark, acid_table,
                                    streaming.default_sink_id(chk_b)) == 2


def test_sink_start_waits_for_the_batches_in_flight_of_another_sink(acid_spark, acid_table,
                                                                    ms):
    """Creating a sink's marker rewrites every table parameter: it must wait until a batch
    transaction of another sink has committed (and recorded its marker), never put that
    marker back to an older value."""
    import threading
    from spark import streaming_sink as streaming
    streaming.foreach_batch_writer(acid_spark, acid_table, sink_id="first")
    in_batch, go = threading.Event(), threading.Event()
    batch = acid_spark.createDataFrame(file_rows(0), SCHEMA)

    def slow_append(tx, df, batch_id):
        tx.append(acid_table, df)
        in_batch.set()
        assert go.wait(30)
    errors = []

    def run(fn):
        try:
            fn()
        except BaseException as e:      # surfaced by the asserts below
            errors.append(e)
    writer = threading.Thread(target=run, args=(lambda: streaming._write_batch(
        acid_spark, acid_table, streaming.marker_key("first"), slow_append, batch, 0),))
    writer.start()
    assert in_batch.wait(60)
    starter = threading.Thread(target=run, args=(lambda: streaming.foreach_batch_writer(
        acid_spark, acid_table, sink_id="second"),))
    starter.start()
    time.sleep(1.5)
    assert starter.is_alive(), "the sink start did not wait for the open batch transaction"
    go.set()
    writer.join(60)
    starter.join(60)
    assert not errors and not writer.is_alive() and not starter.is_alive()
    assert marker(ms, acid_table, "first") == "0"
    assert marker(ms, acid_table, "second") == "-1"
    assert table_rows(acid_spark, acid_table) == expected([0])


def test_a_new_checkpoint_behind_the_marker_is_refused(acid_spark, acid_table, work, ms):
    """A checkpoint deleted and re-created at the same path keeps the sink id; its batches
    0..N would be taken for replays, so the start is refused until the sink is reset."""
    import shutil
    from spark import hive_acid as H
    from spark import streaming_sink as streaming
    src, chk = work
    for k in (0, 1):
        drop_file(src, k)
    run_sink(acid_spark, src, chk, acid_table)
    shutil.rmtree(chk)
    with pytest.raises(H.HiveAcidError, match="recorded batch 1 but the checkpoint"):
        H.write_stream(source(acid_spark, src), acid_table, chk)
    streaming.reset_sink(acid_spark, acid_table, streaming.default_sink_id(chk))
    assert marker(ms, acid_table, streaming.default_sink_id(chk)) is None
    H.delete(acid_spark, acid_table)
    run_sink(acid_spark, src, chk, acid_table)
    assert table_rows(acid_spark, acid_table) == expected([0, 1])


def test_declared_errors(acid_spark, tname, work):
    from spark import hive_acid as H
    from spark import streaming_sink as streaming
    src, chk = work
    stream = source(acid_spark, src)
    with pytest.raises(H.HiveAcidError, match="does not exist"):
        H.write_stream(stream, "default.no_such_table_st", chk)
    H.create_table(acid_spark, tname, SCHEMA, properties={"transactional": "false"})
    with pytest.raises(H.HiveAcidError, match="not a transactional table"):
        H.write_stream(stream, tname, chk)
    acid = tname + "_acid"
    H.create_table(acid_spark, acid, "id INT, other STRING")
    with pytest.raises(H.HiveAcidError, match="has columns"):
        H.write_stream(stream, acid, chk)
    with pytest.raises(H.HiveAcidError, match="streaming DataFrame"):
        H.write_stream(acid_spark.createDataFrame([(1, "a")], "id INT, other STRING"), acid,
                       chk)
    with pytest.raises(H.HiveAcidError, match="sink_id"):
        H.write_stream(stream, acid, chk, sink_id="bad id!")
    with pytest.raises(H.HiveAcidError, match="checkpoint_location"):
        H.write_stream(stream, acid, "")
    with pytest.raises(H.HiveAcidError, match="sink_id"):
        streaming.foreach_batch_writer(acid_spark, acid, sink_id="a.b")
    # the default sink id is stable for one location, however it is spelled
    assert streaming.default_sink_id(chk) == streaming.default_sink_id("file://" + chk + "/")
    assert streaming.default_sink_id(chk) != streaming.default_sink_id(chk + "2")
