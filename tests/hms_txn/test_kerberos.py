"""Kerberos (SASL GSSAPI) against a real MIT KDC the suite starts (tests/support/kerberos.py):
the server beside PLAIN and DIGEST-MD5 on one port, the three protection levels with their
wrapping, identities as short names, delegation tokens obtained over Kerberos and used over
DIGEST-MD5, proxy users, the refusals (each one line naming its cause, the server serving
on), and our clients: the commands, streaming ingest, extension mode's upstream, and
pyiceberg's HiveCatalog with its Kerberos option.

The exchange replayed is Hive's: ``HadoopThriftAuthBridge.Server`` (GSSAPI with
``SaslRpcServer.SaslGssCallbackHandler``: the authorization id must be the principal;
``getDelegationToken``: proxy users through ``ProxyUsers.authorize``) over OpenJDK's
``GssKrb5Server`` (``doHandshake1``: the wrapped offer of protections; ``doHandshake2``: the
client's choice). The Java metastore and Spark run the same sequences in
tests/hms_txn/test_kerberos_java.py and tests/spark/test_spark_kerberos.py.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from thrift.Thrift import TApplicationException
from thrift.transport.TTransport import TTransportException

from hms_txn.cli import main as cli_main
from hms_txn.common import logs
from hms_txn.common.config import ConfigError, load
from hms_txn.domain.security.token_codec import Token, read_credentials
from hms_txn.server import create_server
from hms_txn.wire.client import (ClientOptions, MetastoreUnreachable, SaslDigest, SaslGssapi,
                                 SaslPlain, connect)
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_streaming import create, ids
from tests.hms_txn.test_compactor import Engine
from tests.support.kerberos import REALM, SERVICE, realm_environment
from tests.support.relay import Relay
from tests.support.requirements import require, require_module
from tests.support.servers import REPO_ROOT, InProcessServer, client_for

ALL_LEVELS = "authentication,integrity,privacy"


def kerberos_conf(realm, **extra: str) -> dict[str, str]:
    """The Java metastore's Kerberos keys (issue 39), plus ``extra``."""
    return {"hive.metastore.sasl.enabled": "true",
            "hive.metastore.authentication": "KERBEROS",
            "hive.metastore.kerberos.principal": SERVICE,
            "hive.metastore.kerberos.keytab.file": realm.keytab("hive/localhost"),
            "hadoop.security.authentication": "kerberos", **extra}


@pytest.fixture(scope="module")
def krb_env(kdc):
    """This process uses the test realm (tests/support/kerberos.py)."""
    with realm_environment(kdc):
        yield kdc


@pytest.fixture(scope="module")
def kserver(krb_env, tmp_path_factory):
    """One Kerberized server for the module: GSSAPI at all three levels, PLAIN (carol) and
    DIGEST-MD5 on the same port; oozie may act for alice from loopback."""
    root = tmp_path_factory.mktemp("kerberos")
    server = InProcessServer(str(root / "data"), kerberos_conf(
        krb_env, **{"hadoop.rpc.protection": ALL_LEVELS,
                    "hive.metastore.authentication.config.username": "carol",
                    "hive.metastore.authentication.config.password": "pw",
                    "hadoop.proxyuser.oozie.users": "alice",
                    "hadoop.proxyuser.oozie.hosts": "127.0.0.1",
                    "hadoop.proxyuser.bob.users": "*",
                    "hadoop.proxyuser.bob.hosts": "10.1.2.3"}))
    yield server
    server.stop()


class Lines(logging.Handler):
    """The server's log lines; ``wait`` polls for one to a deadline (a refusal is logged by
    the server's connection thread after the client has its answer)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def wait(self, text: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            found = [line for line in list(self.lines) if text in line]
            if found:
                return found[0]
            assert time.monotonic() < deadline, (text, self.lines)
            time.sleep(0.05)


@pytest.fixture
def server_log():
    handler, logger = Lines(), logging.getLogger("hms_txn.wire.server")
    previous = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


def gssapi(realm, who: str = "alice", *, qop: str = "auth", service: str = SERVICE,
           keytab: bool = True) -> ClientOptions:
    return ClientOptions(timeout=20, sasl=SaslGssapi(
        service, realm.principal(who) if keytab else None,
        realm.keytab(who) if keytab else None, (qop,)))


def kclient(server, realm, who: str = "alice", *, host: str = "127.0.0.1", **kwargs):
    return connect(f"thrift://{host}:{server.port}", options=gssapi(realm, who, **kwargs))


# ------------------------------------------------------------------------- the handshake

@pytest.mark.parametrize("qop", ["auth", "auth-int", "auth-conf"])
def test_a_ticket_at_each_protection_level(kserver, kdc, server_log, qop):
    """hadoop.rpc.protection authentication / integrity / privacy: after the handshake the
    messages travel plain, signed, or signed and encrypted (the relay sees the database
    name in clear text in the first two only). Objects created without an owner belong
    to the principal's short name (Hive 4's HMSHandler.create_database)."""
    db = "level_" + qop.replace("-", "_")
    relay = Relay(kserver.port)
    with kclient(relay, kdc, qop=qop) as c:
        c.create_database(t.Database(name=db))
        table = make_table(db, "t")
        table.owner = None
        c.create_table(table)
        got = c.get_database(db)
        assert (got.ownerName, got.ownerType) == ("alice", t.PrincipalType.USER)
        assert c.get_table(db, "t").owner == "alice"
    assert (db.encode() in relay.sent) == (qop != "auth-conf")
    server_log.wait(f"authenticated as alice with SASL GSSAPI (alice@{REALM}, {qop})")


class Contexts(logging.Handler):
    """The connection and call context (``common.logs``) of each record."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.addFilter(logs.ContextFilter())
        self.seen: list[tuple[str, dict]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append((record.getMessage(), dict(record.context)))


def test_identity_is_the_short_name_everywhere(kserver, kdc, server_log):
    """alice/admin@REALM is "alice" (the DEFAULT rule): in set_ugi's answer, the
    transaction's user, the audit record of each call and the owner of what it creates,
    whatever the client claims."""
    audit, logger = Contexts(), logging.getLogger("hms_txn.txn_calls")
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(audit)
    try:
        _as_alice_admin(kserver, kdc)
    finally:
        logger.removeHandler(audit)
        logger.setLevel(previous)
    calls = [(message.split(" ")[0], context.get("user")) for message, context in audit.seen]
    assert calls == [("open_txns", "alice"), ("get_open_txns_info", "alice"),
                     ("abort_txn", "alice")], calls
    server_log.wait(f"authenticated as alice with SASL GSSAPI (alice/admin@{REALM}, auth)")


def _as_alice_admin(kserver, kdc) -> None:
    with kclient(kserver, kdc, "alice/admin") as c:
        assert c.set_ugi("mallory", ["staff"]) == ["alice", "staff"]
        txn = c.open_txns(t.OpenTxnRequest(num_txns=1, user="mallory", hostname="h")).txn_ids[0]
        assert {i.id: i.user for i in c.get_open_txns_info().open_txns}[txn] == "alice"
        c.abort_txn(t.AbortTxnRequest(txnid=txn))
        c.create_database(t.Database(name="admins_db"))
        assert c.get_database("admins_db").ownerName == "alice"


def test_ticket_cache_and_the_host_placeholder(kserver, kdc, tmp_path, monkeypatch):
    """A client with kinit's ticket and hive/_HOST@REALM: _HOST becomes the URI's host, as
    Hive's client does (SecurityUtil.getServerPrincipal)."""
    cache = str(tmp_path / "bob.ccache")
    kdc.kinit("bob", cache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
    placeholder = f"hive/_HOST@{REALM}"
    with kclient(kserver, kdc, host="localhost", service=placeholder, keytab=False) as c:
        assert c.set_ugi("x", []) == ["bob"]
    with pytest.raises(MetastoreUnreachable, match="the KDC does not know the metastore's "
                       "service principal.*hive/127.0.0.1@"):
        kclient(kserver, kdc, host="127.0.0.1", service=placeholder, keytab=False)


# ----------------------------------------------------------------------------- refusals

def test_refusals_name_their_cause_and_the_server_serves_on(kserver, kdc, server_log,
                                                            tmp_path, monkeypatch):
    # no ticket: the client stops before sending anything
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/empty.ccache")
    with pytest.raises(MetastoreUnreachable, match="Kerberos: no ticket: run kinit"):
        kclient(kserver, kdc, keytab=False)
    # a real service principal, but another host's: the server cannot decrypt the ticket
    with pytest.raises(MetastoreUnreachable) as wrong:
        kclient(kserver, kdc, service=f"hive/otherhost@{REALM}")
    assert (f"Bad status: 3 (Kerberos: the client's service ticket is for hive/otherhost@"
            f"{REALM}, not for this metastore's principal {SERVICE}") in str(wrong.value)
    # a client without SASL is told, in its own protocol
    with pytest.raises(TApplicationException, match=r"requires SASL .*authenticate with SASL "
                       r"GSSAPI \(Kerberos\), PLAIN \(user and password\) or DIGEST-MD5"):
        with client_for(kserver.port, timeout_ms=10000) as c:
            c.get_all_databases()
    # PLAIN on the same port, and Kerberos after all that
    with connect(kserver.uri, options=ClientOptions(sasl=SaslPlain("carol", "pw"))) as c:
        assert c.set_ugi("x", []) == ["carol"]
    with kclient(kserver, kdc) as c:
        assert "default" in c.get_all_databases()
    assert server_log.wait("without starting the SASL handshake").startswith("refused connection")
    assert server_log.wait(f"the client's service ticket is for hive/otherhost@{REALM}") \
        .startswith("refused connection")
    assert server_log.wait("does not use SASL").startswith("refused a connection")


def test_protection_mismatch(krb_env, tmp_path, server_log):
    """The server offers privacy only, the client accepts authentication only: the client
    says so to the server (SASL BAD, as Java's TSaslTransport does) and both name it."""
    server = InProcessServer(str(tmp_path / "data"),
                             kerberos_conf(krb_env, **{"hadoop.rpc.protection": "privacy"}))
    try:
        with pytest.raises(MetastoreUnreachable, match="no common protection: the metastore "
                           "offers auth-conf, this client accepts auth"):
            kclient(server, krb_env, qop="auth")
        with kclient(server, krb_env, qop="auth-conf") as c:
            assert c.get_all_databases() == ["default"]
    finally:
        server.stop()
    server_log.wait(f"alice@{REALM} gave up the SASL GSSAPI handshake after the offer of "
                    f"protection auth-conf (hadoop.rpc.protection): SASL GSSAPI: no common "
                    f"protection")


def test_kerberos_inside_tls(krb_env, tmp_path, server_log):
    """``hive.metastore.use.SSL`` with Kerberos: the SASL GSSAPI exchange and the calls run
    inside the TLS session (Hive's own server takes one or the other; ours takes both, so
    both are tested together): a Kerberos client with the CA works and is alice; one
    without TLS, and a TLS client without a ticket's SASL, are refused."""
    from hms_txn.wire.tls import TlsClient
    from tests.support.certs import make_certs
    certs = make_certs(str(tmp_path / "certs"))
    server = InProcessServer(str(tmp_path / "data"), kerberos_conf(
        krb_env, **{"hadoop.rpc.protection": "authentication,privacy",
                    "hive.metastore.use.SSL": "true",
                    "hive.metastore.keystore.path": certs.server}))
    relay = Relay(server.port)
    try:
        options = gssapi(krb_env, qop="auth")
        tls = TlsClient(certs.ca)
        with connect(f"thrift://127.0.0.1:{relay.port}",
                     options=ClientOptions(timeout=20, sasl=options.sasl, tls=tls)) as c:
            c.create_database(t.Database(name="kerberos_in_tls"))
            assert c.get_database("kerberos_in_tls").ownerName == "alice"
        # the relay saw TLS records only: neither the database's name nor the mechanism
        assert b"kerberos_in_tls" not in relay.sent and b"GSSAPI" not in relay.sent
        server_log.wait(f"authenticated as alice with SASL GSSAPI (alice@{REALM}, auth)")
        with pytest.raises(MetastoreUnreachable):            # Kerberos without TLS
            kclient(server, krb_env, qop="auth")
        server_log.wait("that does not use TLS (hive.metastore.use.SSL is on)")
        with connect(server.uri, options=ClientOptions(timeout=20, tls=tls)) as plain:
            with pytest.raises(TTransportException):       # TLS without SASL: no answer
                plain.get_all_databases()
        server_log.wait("not a SASL client (status byte 128); this server requires SASL")
        with connect(server.uri, options=ClientOptions(timeout=20, sasl=options.sasl,
                                                       tls=tls)) as c:
            assert "kerberos_in_tls" in c.get_all_databases()   # the server serves on
    finally:
        server.stop()


FAKETIME = next(iter(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")), "")   # Debian's faketime
SKEWED_CLIENT = """
import sys
from hms_txn.wire.client import ClientOptions, SaslGssapi, connect
try:
    connect(sys.argv[1], options=ClientOptions(timeout=20, sasl=SaslGssapi(sys.argv[2])))
except Exception as err:
    print(err)
"""


def test_an_out_of_date_keytab_is_named(krb_env, tmp_path, server_log):
    """The service's key changed on the KDC after its keytab was exported: clients get
    tickets the server's keytab cannot decrypt."""
    server = InProcessServer(str(tmp_path / "data"), kerberos_conf(krb_env, **{
        "hive.metastore.kerberos.principal": f"hive/stale@{REALM}",
        "hive.metastore.kerberos.keytab.file": krb_env.keytab("hive/stale")}))
    try:
        krb_env.new_key("hive/stale")
        with pytest.raises(MetastoreUnreachable, match="keytab is out of date"):
            kclient(server, krb_env, service=f"hive/stale@{REALM}")
    finally:
        server.stop()
    server_log.wait("keytab is out of date")


def test_clock_skew_is_named(kserver, kdc, tmp_path, server_log):
    """A client whose clock runs 10 minutes ahead (libfaketime) presents a ticket the KDC
    issued before: the server refuses its authenticator for the skew and says so."""
    require(bool(FAKETIME), "libfaketime is not installed (Debian's faketime)")
    cache = str(tmp_path / "skewed.ccache")
    kdc.kinit("alice", cache)
    env = {**os.environ, **kdc.env(cache), "PYTHONPATH": REPO_ROOT}
    # the service ticket, while the clock is right (the KDC would refuse a skewed request)
    subprocess.run(["kvno", SERVICE], env=env, check=True, capture_output=True, timeout=60)
    skewed = {**env, "LD_PRELOAD": FAKETIME, "FAKETIME": "+10m",
              "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    out = subprocess.run([sys.executable, "-c", SKEWED_CLIENT, kserver.uri, SERVICE], env=skewed,
                         capture_output=True, text=True, timeout=120)
    assert "Kerberos: clock skew too great between the client and the server" in out.stdout, \
        out.stdout + out.stderr
    server_log.wait("clock skew too great")
    with kclient(kserver, kdc) as c:
        assert "default" in c.get_all_databases()


# ----------------------------------------------------------------------- delegation tokens

def test_delegation_token_over_kerberos_then_digest(kserver, kdc, server_log):
    with kclient(kserver, kdc) as c:
        token_str = c.get_delegation_token("alice", f"alice@{REALM}")
    token = Token.decode_url_string(token_str)
    ident = token.decode_identifier()
    assert (ident.owner, ident.renewer, ident.real_user) == ("alice", "alice", "")
    digest = ClientOptions(timeout=20, sasl=SaslDigest(token.sasl_username, token.sasl_password))
    with connect(kserver.uri, options=digest) as c:
        assert c.set_ugi("x", []) == ["alice"]
        with pytest.raises(t.MetaException, match="cannot obtain another delegation token"):
            c.get_delegation_token("alice", "alice")
    server_log.wait(f"authenticated as alice with SASL DIGEST-MD5 (delegation token "
                    f"{ident.sequence_number})")
    with kclient(kserver, kdc) as c:
        assert c.renew_delegation_token(token_str) > ident.issue_date
        c.cancel_delegation_token(token_str)
    with pytest.raises(MetastoreUnreachable, match="is not known to this metastore"):
        connect(kserver.uri, options=digest)


def test_proxy_users(kserver, kdc):
    """hadoop.proxyuser.oozie.users=alice, .hosts=127.0.0.1: oozie obtains alice's token
    (real user oozie) and nobody else's; alice may not obtain bob's; bob may act for anyone
    but only from 10.1.2.3 (HadoopThriftAuthBridge.Server.getDelegationToken)."""
    with kclient(kserver, kdc, "oozie") as c:
        token = Token.decode_url_string(c.get_delegation_token("alice", "oozie"))
        with pytest.raises(t.MetaException, match=f"User: oozie@{REALM} is not allowed to "
                                                  f"impersonate bob"):
            c.get_delegation_token("bob", "oozie")
    ident = token.decode_identifier()
    assert (ident.owner, ident.renewer, ident.real_user) == ("alice", "oozie", f"oozie@{REALM}")
    with connect(kserver.uri, options=ClientOptions(
            sasl=SaslDigest(token.sasl_username, token.sasl_password))) as c:
        assert c.set_ugi("x", []) == ["alice"]
    with kclient(kserver, kdc) as c:
        with pytest.raises(t.MetaException, match=f"User: alice@{REALM} is not allowed to "
                                                  f"impersonate bob"):
            c.get_delegation_token("bob", "alice")
    with kclient(kserver, kdc, "bob") as c:
        with pytest.raises(t.MetaException, match=f"Unauthorized connection for super-user: "
                                                  f"bob@{REALM} from IP 127.0.0.1"):
            c.get_delegation_token("alice", "bob")


# ------------------------------------------------------------------------ configuration

def test_auth_to_local_rules_on_the_server(krb_env, tmp_path):
    rules = (f"RULE:[2:$1/$2@$0](alice/admin@{REALM})s/.*/root_alice/\n"
             f"RULE:[1:$1@$0](bob@.*)s/@.*//")
    server = InProcessServer(str(tmp_path / "data"), kerberos_conf(
        krb_env, **{"hadoop.security.auth_to_local": rules}))
    try:
        with kclient(server, krb_env, "alice/admin") as c:
            assert c.set_ugi("x", []) == ["root_alice"]
        with kclient(server, krb_env, "bob") as c:
            assert c.set_ugi("x", []) == ["bob"]
        with pytest.raises(MetastoreUnreachable, match=f"no auth_to_local rule applies to "
                                                       f"alice@{REALM}"):
            kclient(server, krb_env)
    finally:
        server.stop()


def _site(path, props: dict[str, str]) -> str:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>"
                   for k, v in props.items())
    path.write_text(f"<configuration>{body}</configuration>")
    return str(path)


def test_start_up_checks_and_the_hive_2_3_key_set(krb_env, tmp_path, monkeypatch):
    keytab = krb_env.keytab("hive/localhost")
    data = str(tmp_path / "data")
    with pytest.raises(ConfigError, match="hive.metastore.kerberos.keytab.file: .*/missing "
                                          "does not exist"):
        create_server(load(None, kerberos_conf(krb_env, **{
            "hive.metastore.kerberos.keytab.file": str(tmp_path / "missing")})), data_dir=data)
    with pytest.raises(ConfigError, match=f"cannot serve {SERVICE}.*No key table entry"):
        create_server(load(None, kerberos_conf(krb_env, **{
            "hive.metastore.kerberos.keytab.file": krb_env.keytab("alice")})), data_dir=data)
    # _HOST in the server's own principal is this host's canonical name
    monkeypatch.setattr(socket, "getfqdn", lambda *a: "Metastore-7.example.com")
    with pytest.raises(ConfigError, match=f"cannot serve hive/metastore-7.example.com@{REALM}"):
        create_server(load(None, kerberos_conf(krb_env, **{
            "hive.metastore.kerberos.principal": f"hive/_HOST@{REALM}"})), data_dir=data)
    monkeypatch.undo()
    with pytest.raises(ConfigError, match="Framed transport is not supported with SASL"):
        create_server(load(None, kerberos_conf(krb_env, **{
            "hive.metastore.thrift.framed.transport.enabled": "true"})), data_dir=data)
    with pytest.raises(ConfigError, match="hadoop.security.auth_to_local.*invalid"):
        load(None, kerberos_conf(krb_env, **{"hadoop.security.auth_to_local": "RULE:oops"}))
    assert not os.path.exists(data)          # none of them got as far as the database
    # Hive 2.3's set: no hive.metastore.authentication; the Hadoop keys in core-site.xml
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    _site(conf_dir / "core-site.xml", {"hadoop.security.authentication": "kerberos",
                                       "hadoop.rpc.protection": "privacy"})
    site = _site(conf_dir / "hive-site.xml", {
        "hive.metastore.sasl.enabled": "true", "hive.metastore.kerberos.principal": SERVICE,
        "hive.metastore.kerberos.keytab.file": keytab})
    server = create_server(load(site), data_dir=data, host="127.0.0.1", port=0).start()
    try:
        with pytest.raises(MetastoreUnreachable, match="the metastore offers auth-conf"):
            connect(server.address, options=gssapi(krb_env))
        with connect(server.address, options=gssapi(krb_env, qop="auth-conf")) as c:
            assert c.set_ugi("x", []) == ["alice"]
    finally:
        server.stop()


# ----------------------------------------------------------------------------- our clients

def test_the_commands_with_kerberos(kserver, kdc, tmp_path, capsys):
    site = _site(tmp_path / "hive-site.xml", {
        "hive.metastore.uris": kserver.uri, "hive.metastore.sasl.enabled": "true",
        "hadoop.security.authentication": "kerberos",
        "hive.metastore.kerberos.principal": f"hive/localhost@{REALM}"})
    who = ["--principal", kdc.principal("oozie"), "--keytab", kdc.keytab("oozie")]
    assert cli_main(["show-transactions", "--conf", site, "--json", *who]) == 0
    output = str(tmp_path / "alice.token")
    assert cli_main(["delegation-token", "--conf", site, *who, "--owner", "alice",
                     "--output", output]) == 0
    [(_alias, token)] = read_credentials(open(output, "rb").read())
    ident = token.decode_identifier()
    assert (ident.owner, ident.renewer, ident.real_user) == ("alice", "oozie", f"oozie@{REALM}")
    capsys.readouterr()
    # without a ticket: one line that says what to do
    assert cli_main(["show-transactions", "--conf", site]) == 2
    err = [line for line in capsys.readouterr().err.splitlines()   # (the in-process
           if line.startswith("hms-txn:")]                             # server logs too)
    assert len(err) == 1 and "Kerberos: no ticket: run kinit" in err[0], err


def test_streaming_ingest_with_kerberos(kserver, kdc):
    with kclient(kserver, kdc) as c:
        create(c, "k_ev")
        conf = {"hive.metastore.sasl.enabled": "true",
                "hadoop.security.authentication": "kerberos",
                "hive.metastore.kerberos.principal": SERVICE,
                "hadoop.rpc.protection": "privacy",
                "hms_txn.client.kerberos.principal": kdc.principal("bob"),
                "hms_txn.client.kerberos.keytab": kdc.keytab("bob")}
        from hms_txn.clients import streaming_ingest
        with streaming_ingest.connect(kserver.uri, "default.k_ev", heartbeat_interval=0.5,
                                      user="mallory", conf=conf) as conn:
            conn.begin_batch(1)
            users = {i.id: i.user for i in c.get_open_txns_info().open_txns}
            assert [users[x] for x in conn.batch.txn_ids] == ["bob"]
            conn.write([(1, "a"), (2, "b")])
            conn.commit()
        assert ids(Engine(c), "k_ev") == [1, 2]


def test_extension_mode_upstream_with_kerberos(kserver, kdc, tmp_path, server_log):
    """Our server in front of a Kerberized metastore authenticates to it as its own
    principal from its keytab (here: our Kerberized server as the upstream; the Java one
    in test_kerberos_java.py)."""
    ext = InProcessServer(str(tmp_path / "ext"), {
        "hms_txn.upstream.uris": f"thrift://localhost:{kserver.port}",
        "hms_txn.upstream.sasl.enabled": "true",
        "hms_txn.upstream.kerberos.principal": f"hive/_HOST@{REALM}",
        "hive.metastore.kerberos.principal": SERVICE,
        "hive.metastore.kerberos.keytab.file": kdc.keytab("hive/localhost"),
        "hadoop.rpc.protection": "integrity"})
    try:
        with ext.client() as c:
            c.create_database(t.Database(name="via_ext"))
        with kclient(kserver, kdc) as up:
            assert up.get_database("via_ext").ownerName == "hive"
    finally:
        ext.stop()
    server_log.wait(f"authenticated as hive with SASL GSSAPI ({SERVICE}, auth-int)")


def test_pyiceberg_hive_catalog_with_kerberos(kserver, kdc, tmp_path, monkeypatch, server_log):
    """pyiceberg's HiveCatalog with hive.kerberos-authentication=true (pure-sasl's GSSAPI,
    from the ticket cache, service hive@<the URI's host>)."""
    require_module("kerberos")
    hive = require_module("pyiceberg.catalog.hive")
    schema = require_module("pyiceberg.schema")
    types = require_module("pyiceberg.types")
    cache = str(tmp_path / "alice.ccache")
    kdc.kinit("alice", cache)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{cache}")
    catalog = hive.HiveCatalog("kerberized", **{
        "uri": f"thrift://localhost:{kserver.port}", "hive.kerberos-authentication": "true",
        "warehouse": f"file://{tmp_path}/iceberg"})
    catalog.create_namespace("ice")
    catalog.create_table("ice.events", schema.Schema(
        types.NestedField(1, "id", types.LongType(), required=False)),
        location=f"file://{tmp_path}/iceberg/events")
    assert catalog.load_table("ice.events").schema().find_field("id").field_id == 1
    assert ("ice",) in catalog.list_namespaces()
    with kclient(kserver, kdc) as c:
        assert c.get_database("ice").ownerName == "alice"
    server_log.wait(f"authenticated as alice with SASL GSSAPI (alice@{REALM}, auth)")
    shutil.rmtree(tmp_path / "iceberg", ignore_errors=True)
