"""Differential: the same Kerberos client sequences against our server and the Java reference
metastore 2.3 (PySpark's jars), both configured the Java way -- hive-site.xml keys
(``hive.metastore.sasl.enabled``, ``hive.metastore.kerberos.principal``/``.keytab.file``),
core-site.xml keys (``hadoop.security.authentication=kerberos``, ``hadoop.rpc.protection``,
``hadoop.proxyuser.*``), ``-Djava.security.krb5.conf`` -- on the suite's KDC.

The outcomes must be the same, call by call, except where Hive 2.3 itself is behind:
* it leaves a new database's owner empty when the client names none (Hive 4's
  ``HMSHandler.create_database`` sets the caller's short name, as we do);
* its ``TokenStoreDelegationTokenSecretManager.renewDelegationToken`` compares the caller's
  full principal with the token's short-name renewer and refuses every renewal over
  Kerberos ("... with non-matching renewer alice"); we compare short names;
* it answers a client without SASL by closing the connection; we answer in the client's
  protocol that SASL is required.
And extension mode in front of the Kerberized Java metastore (its upstream connection
authenticates as our principal from our keytab).
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest
from thrift.Thrift import TApplicationException
from thrift.transport.TTransport import TTransportException

from hms_txn.domain.security.token_codec import Token
from hms_txn.wire.client import ClientOptions, MetastoreUnreachable, SaslDigest, connect
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_kerberos import gssapi, kerberos_conf, krb_env  # noqa: F401 (fixture)
from tests.support.kerberos import REALM, SERVICE
from tests.support.requirements import require
from tests.support.servers import InProcessServer, client_for

pytestmark = pytest.mark.javahms

PROTECTION = "authentication,privacy"      # auth and auth-conf offered, auth-int not
PROXY = {"hadoop.proxyuser.oozie.users": "alice", "hadoop.proxyuser.oozie.hosts": "127.0.0.1"}


@pytest.fixture(scope="module")
def java_krb(krb_env, tmp_path_factory):
    """The Java metastore 2.3, Kerberized: keys in hive-site.xml, Hadoop's in core-site.xml."""
    require(shutil.which("java") is not None, "java is not installed")
    require(importlib.util.find_spec("pyspark") is not None, "pyspark (its jars) is not installed")
    from hms_bench.javahms import start_java_metastore
    from tests.support.postgres import free_port
    server = start_java_metastore(
        free_port(), str(tmp_path_factory.mktemp("javahms-krb")),
        extra_conf={"hive.metastore.sasl.enabled": "true",
                    "hive.metastore.kerberos.principal": SERVICE,
                    "hive.metastore.kerberos.keytab.file": krb_env.keytab("hive/localhost")},
        core_site={"hadoop.security.authentication": "kerberos",
                   "hadoop.rpc.protection": PROTECTION, **PROXY},
        jvm_options=tuple(krb_env.java_options()))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ours(krb_env, tmp_path_factory):
    server = InProcessServer(str(tmp_path_factory.mktemp("ours-krb") / "data"), {
        **kerberos_conf(krb_env, **{"hadoop.rpc.protection": PROTECTION, **PROXY}),
        "hive.metastore.authentication": "NOSASL"})        # the Hive 2.3 key set
    yield server
    server.stop()


def uri(server) -> str:
    return f"thrift://localhost:{server.port}"       # _HOST -> localhost, as Hive's client


def outcome(action):
    """("ok", value) or (the exception's type, its message)."""
    try:
        return "ok", action()
    except (t.MetaException, TApplicationException) as err:
        return type(err).__name__, getattr(err, "message", None) or str(err)
    except (MetastoreUnreachable, TTransportException) as err:
        return type(err).__name__, str(err).split(": ", 1)[-1]


def both(sequence, java, ours_):
    return sequence(java), sequence(ours_)


def test_each_protection_level(krb_env, java_krb, ours):
    def levels(server):
        out = []
        for qop in ("auth", "auth-int", "auth-conf"):
            def call():
                name = f"level_{qop.replace('-', '_')}"
                with connect(uri(server), options=gssapi(krb_env, qop=qop)) as c:
                    c.create_database(t.Database(name=name))
                    return name in c.get_all_databases(), c.get_database(name).ownerName
            out.append(outcome(call))
        return out

    java, mine = both(levels, java_krb, ours)
    assert [o[0] for o in java] == [o[0] for o in mine] == [
        "ok", "MetastoreUnreachable", "ok"]
    assert java[1] == mine[1] == ("MetastoreUnreachable", (
        "SASL GSSAPI: no common protection: the metastore offers auth,auth-conf, this client "
        "accepts auth-int (hadoop.rpc.protection must share a level on both sides)"))
    # the one difference: who owns a database created without an owner (Hive 4's rule here)
    assert [java[0][1], java[2][1]] == [(True, None)] * 2
    assert [mine[0][1], mine[2][1]] == [(True, "alice")] * 2


def test_the_same_refusals(krb_env, java_krb, ours, tmp_path, monkeypatch):
    def refusals(server):
        monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/empty.ccache")
        no_ticket = outcome(lambda: connect(uri(server), options=gssapi(krb_env, keytab=False)))
        monkeypatch.undo()
        wrong = outcome(lambda: connect(uri(server), options=gssapi(
            krb_env, service=f"hive/otherhost@{REALM}")))

        def plain():
            with client_for(server.port, timeout_ms=10000) as c:
                return c.get_all_databases()
        without_sasl = outcome(plain)

        def still():
            with connect(uri(server), options=gssapi(krb_env)) as c:
                return "default" in c.get_all_databases()
        return no_ticket, wrong, without_sasl, outcome(still)

    java, mine = both(refusals, java_krb, ours)
    assert java[0] == mine[0] and "Kerberos: no ticket: run kinit" in mine[0][1]
    # refused in the handshake with SASL BAD; Java's reason is "GSS initiate failed"
    assert java[1] == ("MetastoreUnreachable", "Bad status: 3 (GSS initiate failed)")
    assert mine[1][0] == "MetastoreUnreachable" and mine[1][1].startswith(
        f"Bad status: 3 (Kerberos: the client's service ticket is for hive/otherhost@{REALM}")
    # no call runs without SASL: Java closes, we answer that SASL is required
    assert java[2][0] == "TTransportException" and mine[2][0] == "TApplicationException"
    assert java[3] == mine[3] == ("ok", True)


def test_delegation_tokens_and_proxy_users(krb_env, java_krb, ours):
    def tokens(server):
        out = []
        with connect(uri(server), options=gssapi(krb_env)) as c:
            token_str = c.get_delegation_token("alice", f"alice@{REALM}")
            out.append(outcome(lambda: c.get_delegation_token("bob", "alice")))
        token = Token.decode_url_string(token_str)
        ident = token.decode_identifier()
        out.append((ident.owner, ident.renewer, ident.real_user))
        digest = ClientOptions(timeout=20, sasl=SaslDigest(token.sasl_username,
                                                           token.sasl_password))

        def use():
            with connect(uri(server), options=digest) as c:
                return "default" in c.get_all_databases()
        out.append(outcome(use))
        with connect(uri(server), options=gssapi(krb_env, "oozie")) as c:
            proxied = Token.decode_url_string(c.get_delegation_token("alice", "oozie"))
            out.append(outcome(lambda: c.get_delegation_token("bob", "oozie")))
        p = proxied.decode_identifier()
        out.append((p.owner, p.renewer, p.real_user))
        with connect(uri(server), options=gssapi(krb_env)) as c:
            renewed = outcome(lambda: c.renew_delegation_token(token_str) > ident.issue_date)
            out.append(outcome(lambda: c.cancel_delegation_token(token_str)))
        out.append(outcome(use)[0])
        return out, renewed

    (java, java_renew), (mine, my_renew) = both(tokens, java_krb, ours)
    assert java == mine
    assert mine == [
        ("MetaException", f"User: alice@{REALM} is not allowed to impersonate bob"),
        ("alice", "alice", ""), ("ok", True),
        ("MetaException", f"User: oozie@{REALM} is not allowed to impersonate bob"),
        ("alice", "oozie", f"oozie@{REALM}"), ("ok", None), "MetastoreUnreachable"]
    # Hive 2.3 compares alice@REALM with the renewer "alice" and refuses; we renew
    assert java_renew[0] == "MetaException" and "non-matching renewer alice" in java_renew[1]
    assert my_renew == ("ok", True)


def test_extension_mode_in_front_of_the_kerberized_java_metastore(krb_env, java_krb, tmp_path):
    ext = InProcessServer(str(tmp_path / "ext"), {
        "hms_txn.upstream.uris": uri(java_krb), "hms_txn.upstream.sasl.enabled": "true",
        "hms_txn.upstream.kerberos.principal": f"hive/_HOST@{REALM}",
        "hive.metastore.kerberos.principal": SERVICE,
        "hive.metastore.kerberos.keytab.file": krb_env.keytab("hive/localhost"),
        "hadoop.rpc.protection": "privacy"})
    try:
        with ext.client() as c:
            c.create_database(t.Database(name="through_ext"))
            c.create_table(t.Table(
                tableName="t", dbName="through_ext", owner="alice", partitionKeys=[],
                parameters={}, tableType="EXTERNAL_TABLE",
                sd=t.StorageDescriptor(cols=[t.FieldSchema("id", "int", None)],
                                       location=f"file://{tmp_path}/t",
                                       serdeInfo=t.SerDeInfo(serializationLib="x"),
                                       inputFormat="i", outputFormat="o")))
            assert c.get_table("through_ext", "t").owner == "alice"
        with connect(uri(java_krb), options=gssapi(krb_env, qop="auth-conf")) as up:
            assert up.get_table("through_ext", "t").sd.cols[0].name == "id"
    finally:
        ext.stop()
