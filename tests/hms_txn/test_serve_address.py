"""Issue 30: ``serve`` prints the address it really listens on, and binding an address other
hosts can reach with neither SASL nor TLS logs a warning that names the risk. Hive's default
bind (every interface, hive.metastore.bind.host unset) is kept; the warning says what it
exposes."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_security import SASL_CONF
from tests.hms_txn.test_tls import tls_conf
from tests.support.certs import make_certs
from tests.support.servers import checkout_env, client_for

RISK = ("reachable from other hosts, with neither SASL (hive.metastore.sasl.enabled) nor TLS "
        "(hive.metastore.use.SSL): anyone who can reach this port can read and change every "
        "database, table and transaction without authenticating")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(str(tmp_path_factory.mktemp("certs")))


def serve(tmp_path, *args: str, conf: dict[str, str] | None = None) -> tuple[str, str, int]:
    """Start ``hms-txn serve --port 0 args``; its first stdout line, its stderr, its port."""
    hiveconf = [a for k, v in (conf or {}).items() for a in ("--hiveconf", f"{k}={v}")]
    proc = subprocess.Popen([sys.executable, "-m", "hms_txn.cli", "serve", "--port", "0",
                             *args, *hiveconf], cwd=tmp_path, env=checkout_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("hms-txn listening on thrift://"), line + proc.stderr.read()
        port = int(line.rsplit(":", 1)[1])
        if not conf:
            with client_for(port) as c:          # the printed port is the one that answers
                c.create_database(t.Database(name="reached"))
                assert c.get_all_databases() == ["default", "reached"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return line, err, port


@pytest.mark.parametrize("host_args", [[], ["--host", "0.0.0.0"]], ids=["default", "0.0.0.0"])
def test_every_interface_without_sasl_or_tls_warns(tmp_path, host_args):
    line, err, port = serve(tmp_path, *host_args)
    assert line == f"hms-txn listening on thrift://0.0.0.0:{port}"   # as bound, as Hive binds
    [warning] = [x for x in err.splitlines() if "WARNING" in x]
    assert f"listening on thrift://0.0.0.0:{port}, {RISK}" in warning
    assert "bind to 127.0.0.1 (--host) or enable SASL and/or TLS" in warning


def test_loopback_does_not_warn(tmp_path):
    line, err, port = serve(tmp_path, "--host", "127.0.0.1")
    assert line == f"hms-txn listening on thrift://127.0.0.1:{port}"
    assert "WARNING" not in err and "reachable from other hosts" not in err


@pytest.mark.parametrize("secured", ["sasl", "tls"])
def test_every_interface_with_sasl_or_tls_does_not_warn(tmp_path, certs, secured):
    conf = SASL_CONF if secured == "sasl" else tls_conf(certs)
    line, err, port = serve(tmp_path, "--host", "0.0.0.0", conf=conf)
    assert line == f"hms-txn listening on thrift://0.0.0.0:{port}"
    assert "reachable from other hosts" not in err, err
