"""Where the driver's coordinator listens and who may talk to it.

Executor tasks call the coordinator before and after writing (``_as_attempt``) and report
read progress, so on a cluster it must listen where executors reach the driver, not on
loopback. These tests stay on one host: the coordinator is bound to 127.0.0.2, another
loopback address, so that a task calling 127.0.0.1 (the old fixed address) would fail."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import pytest

from hms_txn.clients.acid.metastore import HiveAcidError
from spark._rpc import rpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OTHER_LOOPBACK = "127.0.0.2"


def test_coordinator_hosts_follow_the_driver_address():
    from spark.hive_acid import COORDINATOR_HOST, coordinator_hosts
    cluster = {"spark.master": "spark://master:7077", "spark.driver.host": "10.1.2.3"}
    assert coordinator_hosts({}) == ("127.0.0.1", "127.0.0.1")
    assert coordinator_hosts({"spark.master": "local[2]"}) == ("127.0.0.1", "127.0.0.1")
    assert coordinator_hosts({"spark.master": "local-cluster[2,1,1024]",
                              "spark.driver.host": "10.1.2.3"}) == ("127.0.0.1", "127.0.0.1")
    assert coordinator_hosts(cluster) == ("10.1.2.3", "10.1.2.3")
    # Spark's own split: listen on bindAddress, executors call spark.driver.host
    assert coordinator_hosts({**cluster, "spark.driver.bindAddress": "0.0.0.0"}) == \
        ("0.0.0.0", "10.1.2.3")
    assert coordinator_hosts({**cluster, "spark.driver.bindAddress": "172.17.0.5"}) == \
        ("172.17.0.5", "10.1.2.3")
    # the explicit setting wins, also with a local master
    assert coordinator_hosts({"spark.master": "local[2]", COORDINATOR_HOST: " 127.0.0.2 "}) \
        == ("127.0.0.2", "127.0.0.2")
    assert coordinator_hosts({**cluster, COORDINATOR_HOST: "0.0.0.0"}) == ("0.0.0.0", "10.1.2.3")
    # yarn without spark.driver.host set yet: every interface, called by this host's name
    assert coordinator_hosts({"spark.master": "yarn"}) == ("0.0.0.0", socket.getfqdn())


@pytest.fixture
def coordinator(acid_hms):
    from spark._driver import Driver
    d = Driver(acid_hms.uri, bind_host=OTHER_LOOPBACK)
    d.attempts.open("1/0", object())
    yield d
    d.close()


def test_the_coordinator_listens_on_its_bind_address_only(coordinator):
    d = coordinator
    assert d.address[0] == OTHER_LOOPBACK
    assert rpc(d.address, d.authkey, "task_started", "1/0", "a") is True
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", d.address[1]), timeout=5)


def test_a_wildcard_bind_needs_an_advertised_address(acid_hms):
    from spark._driver import Driver
    with pytest.raises(ValueError, match="advertised_host"):
        Driver(acid_hms.uri, bind_host="0.0.0.0")


def test_the_coordinator_port_setting_is_a_port_or_a_range():
    from spark.hive_acid import COORDINATOR_PORT, coordinator_ports
    assert coordinator_ports({}) == (0, 0)
    assert coordinator_ports({COORDINATOR_PORT: "0"}) == (0, 0)
    assert coordinator_ports({COORDINATOR_PORT: " 40100 "}) == (40100, 40100)
    assert coordinator_ports({COORDINATOR_PORT: "40100-40115"}) == (40100, 40115)
    for bad in ("x", "40115-40100", "70000", "0-5", "-1", "40100-"):
        with pytest.raises(HiveAcidError, match=f"{COORDINATOR_PORT}={bad!r}.*a range"):
            coordinator_ports({COORDINATOR_PORT: bad})


def _taken_port_with_a_free_neighbour():
    """A listening socket on OTHER_LOOPBACK whose port + 1 is free there."""
    for _ in range(50):
        taken = socket.socket()
        taken.bind((OTHER_LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        with socket.socket() as probe:
            try:
                probe.bind((OTHER_LOOPBACK, port + 1))
                return taken, port
            except OSError:
                pass
        taken.close()
    raise AssertionError("no port with a free neighbour")


def test_the_coordinator_listens_on_the_first_free_port_of_its_range(acid_hms):
    from spark._driver import Driver
    taken, port = _taken_port_with_a_free_neighbour()
    try:
        d = Driver(acid_hms.uri, bind_host=OTHER_LOOPBACK, ports=(port, port + 1))
        try:
            assert d.address == (OTHER_LOOPBACK, port + 1)
            d.attempts.open("1/0", object())
            assert rpc(d.address, d.authkey, "task_started", "1/0", "a") is True
        finally:
            d.close()
        # a fixed port that is taken: a clear error naming the setting, no driver
        with pytest.raises(HiveAcidError, match=rf"at port {port} .*spark.hive_acid."
                                                r"coordinator.port"):
            Driver(acid_hms.uri, bind_host=OTHER_LOOPBACK, ports=(port, port))
    finally:
        taken.close()


def test_a_silent_peer_does_not_hold_up_the_coordinator(coordinator, monkeypatch):
    import spark._coordinator as D
    d = coordinator
    # a handshake timeout far beyond the 30 s a loaded machine may need for the call: the
    # call is answered while the silent peer's handshake still waits, not after it
    monkeypatch.setattr(D, "HANDSHAKE_TIMEOUT_S", 300.0)
    silent = socket.create_connection(d.address, timeout=30)
    try:
        time.sleep(0.2)           # accepted: its handshake now waits for an answer
        start = time.monotonic()
        assert rpc(d.address, d.authkey, "task_started", "1/0", "b") is True
        assert time.monotonic() - start < 30                # not after its 300 s timeout
    finally:
        silent.close()
    # and a silent peer is hung up on once its handshake times out: the challenge, then EOF
    # (recv raises socket.timeout after 60 s if it never is)
    monkeypatch.setattr(D, "HANDSHAKE_TIMEOUT_S", 0.5)
    silent = socket.create_connection(d.address, timeout=60)
    try:
        received = b""
        while True:
            chunk = silent.recv(4096)
            if not chunk:
                break
            received += chunk
        assert received, "the coordinator sent no challenge"
    finally:
        silent.close()


def test_a_wrong_key_is_refused_and_the_coordinator_goes_on(coordinator):
    d = coordinator
    with pytest.raises(AuthenticationError):
        Client(d.address, authkey=b"not the key 1234")
    assert rpc(d.address, d.authkey, "task_started", "1/0", "c") is True


def test_a_task_that_cannot_reach_the_coordinator_refuses_to_write(coordinator):
    from spark._attempts import run_as_attempt as _as_attempt
    d = coordinator
    wrote = []
    unreachable = ("127.0.0.1", d.address[1])       # the port, on an address not listened on
    with pytest.raises(HiveAcidError, match="cannot reach the hive_acid coordinator .*"
                                            "spark.hive_acid.coordinator.host"):
        _as_attempt((unreachable, d.authkey, "1/0"), lambda: wrote.append(1) or [])
    with pytest.raises(HiveAcidError, match="AuthenticationError"):
        _as_attempt((d.address, b"not the key 1234", "1/0"), lambda: wrote.append(1) or [])
    assert wrote == []



def test_a_coordinator_that_never_answers_fails_a_task_in_bounded_time(monkeypatch):
    """A listener that accepts nothing stands for a driver whose packets are lost: the
    connection and the key handshake are bounded (CONNECT_TIMEOUT_S), the call is not."""
    import spark._rpc as R
    from spark._attempts import run_as_attempt as _as_attempt
    monkeypatch.setattr(R, "CONNECT_TIMEOUT_S", 0.5)
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(1)
    wrote = []
    try:
        start = time.monotonic()
        with pytest.raises(HiveAcidError, match="cannot reach the hive_acid coordinator"):
            _as_attempt((mute.getsockname(), b"any key 12345678", "1/0"),
                        lambda: wrote.append(1) or [])
        assert time.monotonic() - start < 30      # bounded: an unbounded call never returns
    finally:
        mute.close()
    assert wrote == []

SESSION = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {repo!r})
    from pyspark.sql import SparkSession
    from spark import hive_acid
    from spark._driver import Driver
    from spark._session import registered_driver

    started = []
    real = Driver.rpc_task_started
    def counted(self, token, attempt):
        started.append(token)
        return real(self, token, attempt)
    Driver.rpc_task_started = counted

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.hive_acid.coordinator.host", {host!r})
             # insert() by Python tasks, which call the coordinator (the JVM writer's do not)
             .config("spark.hive_acid.jvmWriter", "false")
             .config("spark.hadoop.hive.metastore.uris", {uri!r}).getOrCreate())
    hive_acid.register(spark)
    d = registered_driver(spark)
    spark.createDataFrame([(i,) for i in range(6)], "id INT").repartition(2) \\
        .write.format("hive_acid").mode("append").save({table!r})
    hive_acid.insert(spark, {table!r}, spark.createDataFrame([(6,)], "id INT"))
    rows = sorted(r.id for r in spark.read.format("hive_acid").load({table!r}).collect())
    print("RESULT " + json.dumps({{"address": list(d.address), "started": len(started),
                                  "rows": rows}}), flush=True)
""")


@pytest.mark.spark
def test_spark_tasks_call_the_coordinator_at_its_configured_address(acid_spark, acid_hms,
                                                                    tname, tmp_path):
    from spark import hive_acid as H
    H.create_table(acid_spark, tname, "id INT")
    script = tmp_path / "job.py"
    script.write_text(SESSION.format(repo=REPO, uri=acid_hms.uri, table=tname,
                                     host=OTHER_LOOPBACK))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"), timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    out = json.loads(lines[0][len("RESULT "):])
    assert out["address"][0] == OTHER_LOOPBACK
    # two write tasks of the append, at least one of the insert, each asked before writing
    assert out["started"] >= 3, out
    assert out["rows"] == list(range(7))
    assert sorted(r.id for r in acid_spark.read.format("hive_acid").load(tname).collect()) \
        == list(range(7))
