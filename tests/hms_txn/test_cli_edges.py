"""The command line's edges a user trips on (issue 41), and ``compact --wait`` after the
queue already holds the table (issue 40, item 2). Each case: the exit status and the one
line on standard error.

* SASL on one side only. A SASL client (``delegation-token``) meeting a server without SASL
  used to wait for an answer the server never sends (it reads the START message as a
  Thrift call with a 16 MiB name): our server answers the START with a SASL ERROR saying
  it does not use SASL, and against a server that never answers the client gives up
  after ``wire.client.SASL_NEGOTIATION_TIMEOUT`` (5 s) without retrying. The reverse (no
  SASL against a SASL server) is answered in the client's protocol
  (``test_sasl_required``). The suite asserts no wall-clock bound under 30 s (GUIDE);
  that neither waits is shown by the answer coming from the server, and by the silent
  server seeing one connection.
* ``abort-txns`` says why each id was not aborted, with the answer of Hive 4's
  ``abort_txn`` (TxnUtils.raiseTxnUnexpectedState: "... is already committed.", "No such
  transaction ..."; already aborted from the listing, which AbortTxnFunction accepts
  silently), and exits 1.
* ``compact`` refuses an object that does not exist or is not transactional (exit 2), as
  HiveServer2 does before it calls compact2 (AlterTableCompactAnalyzer). The metastore
  itself queues such a request, as Hive 4's HMSHandler.compact2 -> TxnHandler.compact
  (CompactFunction.execute) does without looking at the table, and its Worker refuses it
  with Hive 4's text (Worker.findNextCompactionAndExecute: "Unable to find table ...,
  assuming it was dropped and moving on.").
* ``bench --java-db postgres`` without the JDBC driver names Debian's package.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

from hms_txn.cli import main
from hms_txn.wire.client import SASL_NEGOTIATION_TIMEOUT
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_compactor import FAST, Engine, rows
from tests.hms_txn.test_security import SASL_CONF
from tests.support.servers import checkout_env

# CLI behaviour: one backend is enough
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


# a log record of the in-process server (it logs to the same standard error)
SERVER_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ hms_txn\.")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit status, standard output, the one line of standard error or "")."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    lines = [x for x in err.strip().splitlines() if not SERVER_LOG.match(x)]
    assert len(lines) <= 1, err
    return status, out, lines[0] if lines else ""


# ---------------------------------------------------------------- SASL on one side only

def _token_command(uri: str, tmp_path) -> list[str]:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    return ["delegation-token", "--uri", uri, "--user", "alice", "--password-file",
            str(password), "--output", str(tmp_path / "token")]


@sqlite_only
@pytest.mark.parametrize("transport", ["buffered (event loop)", "framed (threads)"])
def test_sasl_client_against_a_server_without_sasl(hms_factory, capsys, tmp_path, transport):
    framed = transport.startswith("framed")
    server = hms_factory({"hive.metastore.thrift.framed.transport.enabled": str(framed).lower()})
    t0 = time.monotonic()
    status, out, line = run(capsys, *_token_command(server.uri, tmp_path))
    elapsed = time.monotonic() - t0
    assert (status, out) == (2, "")
    assert line == (f"hms-txn: cannot connect to {server.uri}: Bad status: 4 (this metastore "
                    f"does not use SASL (hive.metastore.sasl.enabled=false on the server): "
                    f"connect without SASL (no --user, hive.metastore.sasl.enabled=false))")
    assert elapsed < 30, elapsed
    assert not (tmp_path / "token").exists()
    with server.client(framed=framed) as c:      # and the server keeps serving
        assert c.get_all_databases() == ["default"]


def test_sasl_client_against_a_server_that_never_answers(capsys, tmp_path):
    """What a Thrift server without SASL does with a START message (the Java metastore
    among them): read it as a call and wait for the rest. The client gives up after its
    SASL negotiation timeout, once (a mismatch is not retried)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)        # read nothing, answer nothing

    threading.Thread(target=serve, daemon=True).start()
    uri = f"thrift://127.0.0.1:{listener.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        status, out, line = run(capsys, *_token_command(uri, tmp_path))
        elapsed = time.monotonic() - t0
    finally:
        listener.close()
        for conn in accepted:
            conn.close()
    assert (status, out) == (2, "")
    assert line == (f"hms-txn: cannot connect to {uri}: no answer to the SASL negotiation "
                    f"within {SASL_NEGOTIATION_TIMEOUT:g} s: the metastore does not seem to "
                    f"use SASL (hive.metastore.sasl.enabled)")
    assert len(accepted) == 1 and SASL_NEGOTIATION_TIMEOUT <= elapsed < 30, (accepted, elapsed)


@sqlite_only
def test_client_without_sasl_against_a_sasl_server(hms_factory, capsys):
    server = hms_factory(SASL_CONF)
    status, out, line = run(capsys, "show-transactions", "--uri", server.uri)
    assert (status, out) == (2, "")
    assert line.startswith("hms-txn: the metastore failed the call: this metastore requires "
                           "SASL (hive.metastore.sasl.enabled=true on the server)")


# ---------------------------------------------------------------- abort-txns

@sqlite_only
def test_abort_txns_says_why_each_id_was_not_aborted(hms, client, capsys):
    opened, committed, aborted, also_open = client.open_txns(
        T.OpenTxnRequest(num_txns=4, user="u", hostname="h")).txn_ids
    client.commit_txn(T.CommitTxnRequest(txnid=committed))
    client.abort_txn(T.AbortTxnRequest(txnid=aborted))
    status, out, line = run(capsys, "abort-txns", str(opened), str(committed), str(aborted),
                            "999999", "--uri", hms.uri)
    assert status == 1
    rows_ = [r.split(None, 1) for r in out.splitlines()[2:]]
    assert rows_ == [
        [str(opened), "aborted"],
        [str(committed), f"committed (Transaction txnid:{committed} is already committed.)"],
        [str(aborted), "already aborted"],
        ["999999", "unknown (No such transaction txnid:999999)"]]
    assert line == (f"hms-txn: 3 of 4 transaction(s) not aborted: {committed} committed, "
                    f"{aborted} already aborted, 999999 unknown")
    states = {t.id: t.state for t in client.get_open_txns_info().open_txns}
    assert states == {opened: 2, aborted: 2, also_open: 3}     # only the open one changed
    # every id aborted: exit 0, nothing on standard error
    assert run(capsys, "abort-txns", str(also_open), "--uri", hms.uri)[::2] == (0, "")


# ---------------------------------------------------------------- compact

@sqlite_only
def test_compact_refuses_what_does_not_exist_and_the_server_queues_it_as_hive(
        hms_factory, capsys):
    hms = hms_factory({**FAST, "hive.compactor.initiator.on": "false"})
    e = Engine(hms.client())
    e.create("t")
    e.create("tp", keys=(("p", "string"),))
    e.c.add_partitions([T.Partition(values=["a"], dbName="default", tableName="tp")])
    e.c.create_table(make_table("default", "plain"))
    uri = hms.uri
    for argv, expected in [
            (["nodb.notable"], "cannot compact nodb.notable: "),
            (["default.notable"], "cannot compact default.notable: "),
            (["tp", "--partition", "p=zz"], "cannot compact default.tp/p=zz: "),
            (["plain", "--wait"], "cannot compact default.plain: not a transactional table")]:
        status, out, line = run(capsys, "compact", *argv, "--uri", uri)
        assert (status, out) == (2, ""), argv
        assert line.startswith(f"hms-txn: {expected}"), (argv, line)
    assert e.c.show_compact(T.ShowCompactRequest()).compacts == []       # nothing queued

    # compact2 itself queues them, as Hive 4's does; its Worker refuses them with Hive's text
    ids = [e.c.compact2(T.CompactionRequest(dbname=db, tablename=tbl, partitionname=part,
                                            type=2)) for db, tbl, part in
           (("nodb", "notable", None), ("default", "tp", "p=zz"))]
    assert [(r.state, r.accepted) for r in ids] == [("initiated", True)] * 2
    deadline = time.monotonic() + 60
    while True:
        done = {c.id: c for c in e.c.show_compact(T.ShowCompactRequest()).compacts
                if c.state == "refused"}
        if len(done) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert [done[r.id].errorMessage for r in ids if r.id in done] == [
        "Unable to find table nodb.notable, assuming it was dropped and moving on.",
        "Unable to find partition default.tp.p=zz, assuming it was dropped and moving on."]


@sqlite_only
def test_compact_wait_follows_the_compaction_already_queued(hms_factory):
    """Issue 40, item 2: the table is queued already (here it waits 'ready for cleaning'
    behind an older reader); compact2 answers id -1 and "already scheduled ... id=N" (Hive
    4's CompactFunction), and --wait follows N to 'succeeded' instead of -1 ("gone")."""
    hms = hms_factory({**FAST, "hive.compactor.initiator.on": "false"})
    e = Engine(hms.client())
    e.create("t")
    reader = e.open()                       # a snapshot older than the compaction
    for i in range(3):
        e.insert("t", rows([i]))
    queued = e.c.compact2(T.CompactionRequest(dbname="default", tablename="t", type=1)).id
    deadline = time.monotonic() + 60
    while e.c.show_compact(T.ShowCompactRequest(id=queued)).compacts[0].state != \
            "ready for cleaning":
        assert time.monotonic() < deadline, "the compaction never got ready for cleaning"
        time.sleep(0.05)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hms_txn.cli", "compact", "default.t", "--minor", "--wait",
         "--poll", "0.05", "--wait-timeout", "120", "--uri", hms.uri],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=checkout_env())
    try:
        lines = []
        for line in proc.stdout:             # until it follows the queued compaction
            lines.append(line.rstrip("\n"))
            if line.startswith("waiting until"):
                break
        e.c.commit_txn(T.CommitTxnRequest(txnid=reader))    # the Cleaner may go on
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines += rest.splitlines()
    assert (proc.returncode, err) == (0, ""), (lines, err)
    assert lines[:3] == [
        f"default.t: Compaction is already scheduled with state='ready for cleaning' and "
        f"id={queued}",
        f"following compaction {queued}, queued before this request",
        "waiting until it is 'succeeded'"]
    assert lines[-1].endswith("] succeeded") and not any("gone" in x for x in lines), lines
    assert e.c.show_compact(T.ShowCompactRequest(id=queued)).compacts[0].state == "succeeded"


# ---------------------------------------------------------------- bench

def test_bench_names_the_missing_jdbc_driver(capsys, tmp_path, monkeypatch):
    from hms_bench import javahms
    monkeypatch.setattr(javahms, "POSTGRES_JDBC_JAR", str(tmp_path / "postgresql.jar"))
    status, out, line = run(capsys, "bench", "--java-db", "postgres", "--quick",
                            "--backends", "sqlite", "--workloads", "open_commit",
                            "--out", str(tmp_path / "out"))
    assert (status, out) == (2, "")
    assert line == (f"hms-txn bench: --java-db postgres needs the PostgreSQL JDBC driver "
                    f"{tmp_path}/postgresql.jar: install Debian's libpostgresql-jdbc-java (or "
                    f"use --java-db derby)")
    assert not os.path.exists(tmp_path / "out")          # stopped before anything started
