"""The server process: transports, protocol edge cases, restarts, crashes, the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport import TSocket, TTransport

from hms_txn.service.errors import DeclaredErrors
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import ServerProcess, checkout_env, client_for, write_site_xml


@pytest.mark.parametrize("framed, compact", [(True, False), (False, True), (True, True)])
def test_framed_and_compact_transports(hms_factory, framed, compact):
    server = hms_factory({"hive.metastore.thrift.framed.transport.enabled": str(framed).lower(),
                          "hive.metastore.thrift.compact.protocol.enabled": str(compact).lower()})
    with client_for(server.port, framed=framed, compact=compact) as c:
        c.create_database(t.Database(name="wire"))
        assert c.get_all_databases() == ["default", "wire"]


def _raw_call(port: int, method: str) -> TApplicationException:
    sock = TSocket.TSocket("127.0.0.1", port)
    transport = TTransport.TBufferedTransport(sock)
    proto = TBinaryProtocol.TBinaryProtocol(transport)
    transport.open()
    try:
        proto.writeMessageBegin(method, TMessageType.CALL, 7)
        proto.writeStructBegin("args")
        proto.writeFieldStop()
        proto.writeStructEnd()
        proto.writeMessageEnd()
        transport.flush()
        name, mtype, seqid = proto.readMessageBegin()
        assert (name, mtype, seqid) == (method, TMessageType.EXCEPTION, 7)
        err = TApplicationException()
        err.read(proto)
        proto.readMessageEnd()
        return err
    finally:
        transport.close()


def test_unknown_method_is_unknown_method(hms):
    err = _raw_call(hms.port, "no_such_method")
    assert err.type == TApplicationException.UNKNOWN_METHOD


def test_declared_but_unsupported_method_names_itself():
    """Every method of the IDL has an implementation today (docs/compatibility.md); one
    without would answer its declared MetaException naming itself (DeclaredErrors, the
    proxy the Thrift processor calls), here shown with a handler that has no methods."""
    proxy = DeclaredErrors(object())
    with pytest.raises(t.MetaException, match="create_role is not supported by hms-txn"):
        proxy.create_role(t.Role(roleName="r"))


def test_oneway_shutdown_is_ignored(hms):
    with client_for(hms.port) as c:
        c.shutdown()  # what HiveMetaStoreClient.close() sends
        assert c.get_all_databases() == ["default"]
    with client_for(hms.port) as c:
        assert c.getVersion()


def _process_overrides(db_overrides, tmp_path):
    overrides = dict(db_overrides)
    overrides["hive.metastore.warehouse.dir"] = str(tmp_path / "warehouse")
    return overrides


def test_restart_keeps_everything(tmp_path, db_overrides):
    overrides = _process_overrides(db_overrides, tmp_path)
    server = ServerProcess(str(tmp_path / "srv"), overrides)
    with client_for(server.port) as c:
        c.create_database(t.Database(name="keep", parameters={"a": "b"}))
        c.create_table(make_table("keep", "tbl", keys=[("ds", "string")]))
        c.add_partitions([t.Partition(values=["x"], dbName="keep", tableName="tbl")])
    assert server.stop() == 0
    server = ServerProcess(str(tmp_path / "srv"), overrides)
    try:
        with client_for(server.port) as c:
            assert c.get_database("keep").parameters == {"a": "b"}
            assert c.get_all_tables("keep") == ["tbl"]
            assert c.get_partition_names("keep", "tbl", -1) == ["ds=x"]
    finally:
        server.stop()


def test_acknowledged_calls_survive_kill_9(tmp_path, db_overrides):
    overrides = _process_overrides(db_overrides, tmp_path)
    server = ServerProcess(str(tmp_path / "srv"), overrides)
    with client_for(server.port) as c:
        c.create_database(t.Database(name="crash"))
        for i in range(20):
            c.create_table(make_table("crash", f"t{i}"))
        server.kill9()  # right after the last acknowledged call
    server = ServerProcess(str(tmp_path / "srv"), overrides)
    try:
        with client_for(server.port) as c:
            assert c.get_all_tables("crash") == sorted(f"t{i}" for i in range(20))
    finally:
        server.stop()


def test_sigterm_stops_cleanly_with_connected_client(tmp_path):
    server = ServerProcess(str(tmp_path / "srv"), {"hive.metastore.warehouse.dir": str(tmp_path / "wh")})
    c = server.client()
    assert c.get_all_databases() == ["default"]
    assert server.stop(signal.SIGTERM) == 0
    c.close()


def test_embedded_default_without_conf(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "hms_txn.cli", "serve", "--port", "0",
                             "--host", "127.0.0.1"], cwd=tmp_path, env=checkout_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline().decode()
        assert line.startswith("hms-txn listening on thrift://127.0.0.1:")
        port = int(line.rsplit(":", 1)[1])
        with client_for(port) as c:
            c.create_database(t.Database(name="embedded"))
        assert (tmp_path / "metastore_data" / "metastore.sqlite").exists()
        assert (tmp_path / "metastore_data" / "warehouse" / "embedded.db").is_dir()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0


def test_cpu_affinity_pins_every_server_thread(tmp_path):
    """hms_txn.server.cpu.affinity pins the whole server process: the threads that exist
    at start and the connection threads started later (checked in /proc, from outside)."""
    cpu = max(os.sched_getaffinity(0))
    server = ServerProcess(str(tmp_path / "srv"), {"hive.metastore.warehouse.dir": str(tmp_path / "wh"),
                                                   "hms_txn.server.cpu.affinity": str(cpu)})
    try:
        clients = [server.client() for _ in range(3)]
        for c in clients:
            assert c.get_all_databases() == ["default"]
        tids = [int(x) for x in os.listdir(f"/proc/{server.proc.pid}/task")]
        assert len(tids) >= 4                        # main, accept, 3 connections
        assert {tid: os.sched_getaffinity(tid) for tid in tids} == {tid: {cpu} for tid in tids}
        for c in clients:
            c.close()
    finally:
        assert server.stop() == 0
    # the default leaves the process as started
    server = ServerProcess(str(tmp_path / "srv"), {"hive.metastore.warehouse.dir": str(tmp_path / "wh")})
    try:
        assert os.sched_getaffinity(server.proc.pid) == os.sched_getaffinity(0)
    finally:
        server.stop()


@pytest.mark.parametrize("content, message", [
    ("<configuration><property><name>hive.txn.timeout</name><value>soon</value></property></configuration>",
     "hive.txn.timeout"),
    ("<configuration><property><name>hive.metastore.port</name>", "not well-formed"),
    ("<configuration><property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:oracle:thin:@x</value>"
     "</property></configuration>", "javax.jdo.option.ConnectionURL"),
    ("<configuration><property><name>hms_txn.server.cpu.affinity</name><value>3-1</value>"
     "</property></configuration>", "hms_txn.server.cpu.affinity"),
    ("<configuration><property><name>hms_txn.server.cpu.affinity</name><value>first</value>"
     "</property></configuration>", "not a CPU number or range: 'first'"),
    ("<configuration><property><name>hms_txn.server.cpu.affinity</name><value>4095</value>"
     "</property></configuration>", "cannot pin to these CPUs"),
])
def test_bad_configuration_stops_startup_naming_the_problem(tmp_path, content, message):
    conf = tmp_path / "hive-site.xml"
    conf.write_text(content)
    result = subprocess.run([sys.executable, "-m", "hms_txn.cli", "serve", "--conf", str(conf),
                             "--port", "0"], cwd=tmp_path, env=checkout_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr


def test_malformed_hiveconf_is_refused_naming_it(tmp_path):
    result = subprocess.run([sys.executable, "-m", "hms_txn.cli", "serve", "--port", "0",
                             "--hiveconf", "hive.txn.timeout"], cwd=tmp_path, env=checkout_env(),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "argument --hiveconf: takes KEY=VALUE, not 'hive.txn.timeout'" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_help_documents_commands():
    result = subprocess.run([sys.executable, "-m", "hms_txn.cli", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    for command in ("serve", "upgrade-schema"):
        assert command in result.stdout
    serve = subprocess.run([sys.executable, "-m", "hms_txn.cli", "serve", "--help"],
                           capture_output=True, text=True, timeout=60)
    assert "--conf" in serve.stdout and "--port" in serve.stdout


def test_example_hive_site_is_valid(tmp_path):
    from hms_txn.common.config import load
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    config = load(os.path.join(repo, "conf", "hive-site.xml"))
    assert config["hive.metastore.port"] == 9083
    assert config["hive.txn.timeout"] == 300.0


def test_server_from_site_xml_with_metastore_aliases(tmp_path):
    conf = write_site_xml(str(tmp_path / "metastore-site.xml"), {
        "metastore.warehouse.dir": str(tmp_path / "aliased-wh"),
        "metastore.txn.timeout": "42s",
    })
    proc = subprocess.Popen([sys.executable, "-m", "hms_txn.cli", "serve", "--conf", conf, "--port", "0",
                             "--host", "127.0.0.1", "--data-dir", str(tmp_path / "data")],
                            cwd=tmp_path, env=checkout_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        port = int(proc.stdout.readline().decode().rsplit(":", 1)[1])
        with client_for(port) as c:
            assert c.get_config_value("hive.txn.timeout", "") == "42s"
            c.create_database(t.Database(name="a"))
            assert c.get_database("a").locationUri == f"file:{tmp_path}/aliased-wh/a.db"
    finally:
        proc.terminate()
        proc.wait(30)
