"""SASL PLAIN authentication, connection limits, message-size limits, idle timeouts."""

from __future__ import annotations

import re
import socket
import time

import pytest
from thrift.Thrift import TApplicationException
from thrift.transport.TTransport import TTransportException

from hms_txn.common.config import Config, ConfigError
from hms_txn.wire.client import ClientOptions, Endpoint, SaslDigest, SaslPlain, open_endpoint
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.servers import client_for

SASL_CONF = {
    "hive.metastore.sasl.enabled": "true",
    "hive.metastore.authentication": "CONFIG",
    "hive.metastore.authentication.config.username": "alice",
    "hive.metastore.authentication.config.password": "s3cret",
}


def sasl_client(port: int, user: str, password: str):
    return open_endpoint(Endpoint("127.0.0.1", port),
                         ClientOptions(sasl=SaslPlain(user, password), timeout=20))


@pytest.fixture
def sasl_hms(hms_factory, tmp_path):
    users = tmp_path / "users"
    import hashlib
    users.write_text("# test users\nbob:sha256:%s\n" % hashlib.sha256(b"hunter2").hexdigest())
    return hms_factory({**SASL_CONF, "hms_txn.authentication.users.file": str(users)})


def test_sasl_right_password_works(sasl_hms):
    client = sasl_client(sasl_hms.port, "alice", "s3cret")
    try:
        client.create_database(t.Database(name="authed"))
        assert client.get_all_databases() == ["authed", "default"]
    finally:
        client.close()
    other = sasl_client(sasl_hms.port, "bob", "hunter2")  # from the users file, hashed
    try:
        assert "authed" in other.get_all_databases()
    finally:
        other.close()


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("mallory", "s3cret"), ("bob", "s3cret")])
def test_sasl_wrong_credentials_refused(sasl_hms, user, password):
    with pytest.raises(TTransportException, match="Bad status: 3"):
        sasl_client(sasl_hms.port, user, password)


def test_no_sasl_client_refused_before_any_call(sasl_hms):
    # answered "requires SASL" in the client's protocol (tests/hms_txn/test_sasl_required.py)
    with pytest.raises(TApplicationException, match="this metastore requires SASL"):
        with client_for(sasl_hms.port, timeout_ms=10000) as c:
            c.create_database(t.Database(name="sneaky"))
    client = sasl_client(sasl_hms.port, "alice", "s3cret")
    try:
        assert client.get_all_databases() == ["default"]  # the unauthenticated call never ran
    finally:
        client.close()


def test_unsupported_auth_modes_are_refused_at_startup():
    with pytest.raises(ConfigError, match="LDAP is not supported"):
        Config({"hive.metastore.authentication": "LDAP"}).sasl_required()
    # Kerberos is supported (tests/hms_txn/test_kerberos.py); without its keys the server
    # names the missing one before the database is opened
    from hms_txn.server.authentication import kerberos_server
    with pytest.raises(ConfigError, match="hive.metastore.kerberos.keytab.file"):
        kerberos_server(Config({"hive.metastore.authentication": "KERBEROS"}))
    from hms_txn.wire.sasl import PasswordBook
    with pytest.raises(ConfigError, match="no users"):
        PasswordBook.from_config(Config({"hive.metastore.sasl.enabled": "true"}))


def test_connection_limit_gives_clean_error(hms_factory):
    server = hms_factory({"hive.metastore.server.max.threads": "2"})
    held = [server.client(), server.client()]
    try:
        for c in held:
            assert c.get_all_databases() == ["default"]
        with pytest.raises(TApplicationException, match="connection limit"):
            with client_for(server.port) as extra:
                extra.get_all_databases()
        assert held[0].get_all_databases() == ["default"]  # others unaffected
    finally:
        for c in held:
            c.close()
    deadline = time.monotonic() + 30
    while True:  # slots free up once the server sees the hang-ups
        try:
            with client_for(server.port) as again:
                assert again.get_all_databases() == ["default"]
            break
        except TApplicationException:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_oversized_message_closes_only_that_connection(hms_factory):
    server = hms_factory({"hive.metastore.server.max.message.size": "10000"})
    bystander = server.client()
    try:
        with pytest.raises((TTransportException, EOFError, OSError)):
            with client_for(server.port) as c:
                c.create_database(t.Database(name="big", description="x" * 50000))
        assert bystander.get_all_databases() == ["default"]
    finally:
        bystander.close()


def test_idle_connections_are_closed(hms_factory):
    server = hms_factory({"hms_txn.connection.idle.timeout": "1s"})
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.settimeout(60)        # a deadline for a loaded machine; the default timeout is 1 h
    assert sock.recv(1) == b""  # server closed it
    sock.close()


# ------------------------------------------------- delegation tokens and DIGEST-MD5 (issue 9)

def digest_client(port: int, token_str: str):
    """DIGEST-MD5 answered as Hive's client does: user base64(token identifier), password
    base64(token password)."""
    from hms_txn.domain.security.token_codec import Token
    token = Token.decode_url_string(token_str)
    return open_endpoint(Endpoint("127.0.0.1", port),
                         ClientOptions(sasl=SaslDigest(token.sasl_username, token.sasl_password),
                                       timeout=20))


def test_delegation_tokens_need_sasl(hms):
    with client_for(hms.port) as c:
        with pytest.raises(t.MetaException, match="hive.metastore.sasl.enabled=true"):
            c.get_delegation_token("alice", "alice")
        with pytest.raises(t.MetaException, match="needs an authenticated connection"):
            c.renew_delegation_token("x")


def test_digest_md5_authenticates_as_the_token_owner(sasl_hms, caplog):
    plain = sasl_client(sasl_hms.port, "alice", "s3cret")
    try:
        with pytest.raises(t.MetaException, match="User: alice is not allowed to impersonate bob"):
            plain.get_delegation_token("bob", "bob")
        token = plain.get_delegation_token("alice", "alice")
    finally:
        plain.close()

    caplog.set_level("INFO", logger="hms_txn.wire.server")
    client = digest_client(sasl_hms.port, token)
    try:
        client.create_database(t.Database(name="via_token"))
        assert "via_token" in client.get_all_databases()
        with pytest.raises(t.MetaException, match="cannot obtain another delegation token"):
            client.get_delegation_token("alice", "alice")
        assert client.renew_delegation_token(token) > time.time() * 1000  # owner = renewer
    finally:
        client.close()
    assert any(r.getMessage().endswith("authenticated as alice with SASL DIGEST-MD5 "
                                       "(delegation token 1)") for r in caplog.records)

    other = digest_client(sasl_hms.port, token)
    try:
        other.cancel_delegation_token(token)  # the owner may cancel over its own token
    finally:
        other.close()
    with pytest.raises(TTransportException, match="Bad status: 3.*delegation token 1 of alice "
                                                  "is not known"):
        digest_client(sasl_hms.port, token)


def test_expired_token_fails_the_handshake(hms_factory):
    server = hms_factory({**SASL_CONF, "hive.cluster.delegation.token.renew-interval": "1000"})
    plain = sasl_client(server.port, "alice", "s3cret")
    try:
        token = plain.get_delegation_token("alice", "")
    finally:
        plain.close()
    digest_client(server.port, token).close()
    deadline = time.monotonic() + 30              # until the 1 s renew interval has passed
    while True:
        try:
            digest_client(server.port, token).close()
        except TTransportException as err:
            assert re.search("Bad status: 3.*has expired", str(err)), err
            break
        assert time.monotonic() < deadline, "the token never expired"
        time.sleep(0.1)
