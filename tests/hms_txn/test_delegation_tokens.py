"""Delegation tokens (issue 9): Hadoop formats, the DIGEST-MD5 server mechanism, the token
manager on both backends, the CLI, and a cross-check of the formats with Hadoop/Hive's own
Java classes (from PySpark's jars)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import threading

import pytest
from puresasl.client import SASLClient

from hms_txn.wire import sasl as auth
from hms_txn.wire.sasl import (COMPLETE, OK, START, AuthenticationFailed, DigestMD5Server, PasswordBook, SaslServer, digest_response_value, parse_directives)
from hms_txn.cli import main as cli_main
from hms_txn.domain.security.delegation_tokens import (DelegationTokenError, DelegationTokens,
                                                       InvalidToken)
from hms_txn.domain.security.token_codec import (KIND, Token, TokenIdentifier, WritableReader,
                                                 credentials_bytes, digest_secret, read_credentials,
                                                 write_credentials_file, write_vlong)
from hms_txn.service.security.tokens import TokenService
from hms_txn.service.units import UnitOfWork
from hms_txn.store import Store, ensure_schema
from tests.support.requirements import require

# ------------------------------------------------------------------------ Writable formats

VLONGS = [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (-1, b"\xff"), (-112, b"\x90"),
    (-113, b"\x87\x70"), (128, b"\x8f\x80"), (255, b"\x8f\xff"), (256, b"\x8e\x01\x00"),
    (2 ** 31 - 1, b"\x8c\x7f\xff\xff\xff"),
    (1700000000000, b"\x8a\x01\x8b\xcf\xe5\x68\x00"),
]


@pytest.mark.parametrize("value, encoded", VLONGS)
def test_vlong_matches_hadoop_writable_utils(value, encoded):
    out = bytearray()
    write_vlong(out, value)
    assert bytes(out) == encoded
    assert WritableReader(encoded).vlong() == value


def test_vlong_round_trips_extremes():
    for value in (-(2 ** 63), 2 ** 63 - 1, -(2 ** 31), 2 ** 40 + 3, -129, 112, -(2 ** 20)):
        out = bytearray()
        write_vlong(out, value)
        r = WritableReader(bytes(out))
        assert r.vlong() == value and r.at_end()


IDENT = TokenIdentifier(owner="alice", renewer="bob", real_user="", issue_date=1700000000000,
                        max_date=1700604800000, sequence_number=7, master_key_id=0)
IDENT_BYTES = (b"\x00" + b"\x05alice" + b"\x03bob" + b"\x00"
               + b"\x8a\x01\x8b\xcf\xe5\x68\x00" + b"\x8a\x01\x8b\xf3\xf1\xec\x00"
               + b"\x07" + b"\x00")


def test_identifier_is_abstract_delegation_token_identifier_writable():
    assert IDENT.to_bytes() == IDENT_BYTES
    assert TokenIdentifier.from_bytes(IDENT_BYTES) == IDENT
    with pytest.raises(ValueError, match="version"):
        TokenIdentifier.from_bytes(b"\x01" + IDENT_BYTES[1:])
    with pytest.raises(ValueError):
        TokenIdentifier.from_bytes(IDENT_BYTES[:-3])


def test_token_url_string_is_urlsafe_base64_of_the_token_writable():
    password = bytes(range(250, 256)) + b"\xfb\xff" * 7
    token = Token(IDENT_BYTES, password, service="sig")
    writable = (bytes([len(IDENT_BYTES)]) + IDENT_BYTES + bytes([len(password)]) + password
                + b"\x15HIVE_DELEGATION_TOKEN" + b"\x03sig")
    assert token.to_writable() == writable
    text = token.encode_url_string()
    assert "=" not in text and "+" not in text and "/" not in text
    assert text == base64.urlsafe_b64encode(writable).decode().rstrip("=")
    assert Token.decode_url_string(text) == token
    # commons-codec also decodes the standard alphabet and padding
    assert Token.decode_url_string(base64.b64encode(writable).decode()) == token
    for bad in ("", "!!!!", base64.urlsafe_b64encode(writable[:-2]).decode()):
        with pytest.raises(ValueError):
            Token.decode_url_string(bad)
    # what Hive's SaslClientCallbackHandler answers in DIGEST-MD5
    assert token.sasl_username == base64.b64encode(IDENT_BYTES).decode()
    assert token.sasl_password == base64.b64encode(password).decode()


def test_credentials_file_is_hadoop_token_storage(tmp_path):
    token = Token(IDENT_BYTES, b"p" * 20)
    data = credentials_bytes([("hive.metastore.delegation.token", token)])
    assert data == (b"HDTS\x00" + b"\x01" + b"\x1fhive.metastore.delegation.token"
                    + token.to_writable() + b"\x00")
    assert read_credentials(data) == [("hive.metastore.delegation.token", token)]
    path = str(tmp_path / "creds")
    write_credentials_file(path, [("a", token), ("b", token.with_service("x"))])
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert read_credentials(open(path, "rb").read())[1] == ("b", token.with_service("x"))
    with pytest.raises(ValueError, match="HDTS"):
        read_credentials(b"nope")


# ------------------------------------------------------------------------------ DIGEST-MD5

def test_rfc2831_example_vector():
    """RFC 2831 section 4: chris / secret at elwood.innosoft.com, IMAP."""
    secret = digest_secret("chris", "elwood.innosoft.com", "secret")

    def creds(username):
        assert username == "chris"
        return auth.DigestCredential(user="chris", secret=secret, label="test")

    mech = DigestMD5Server(creds, realm="elwood.innosoft.com", nonce=b"OA6MG9tEQGm2hh")
    assert mech.challenge() == (b'realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",'
                                b'qop="auth",charset=utf-8,algorithm=md5-sess')
    who, final = mech.respond(
        b'charset=utf-8,username="chris",realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",'
        b'nc=00000001,cnonce="OA6MHXh6VqTrRk",digest-uri="imap/elwood.innosoft.com",'
        b'response=d388dad90d4bbd760a152321f2143af7,qop=auth')
    assert final == b"rspauth=ea40f60335c427b5527b84dbabcdfffd"
    assert (who.user, who.mechanism) == ("chris", "DIGEST-MD5")


def _hand_digest(username: str, password: str, nonce: str, cnonce: str, uri: str,
                 authzid: str | None = None, a2_prefix: str = "AUTHENTICATE") -> str:
    """RFC 2831 2.1.2.1 written out independently of hms_txn.auth."""
    md5 = lambda b: hashlib.md5(b).digest()          # noqa: E731
    hexmd5 = lambda b: hashlib.md5(b).hexdigest()    # noqa: E731
    a1 = md5(f"{username}:default:{password}".encode()) + f":{nonce}:{cnonce}".encode()
    if authzid:
        a1 += f":{authzid}".encode()
    a2 = f"{a2_prefix}:{uri}".encode()
    return hexmd5(f"{hexmd5(a1)}:{nonce}:00000001:{cnonce}:auth:{hexmd5(a2)}".encode())


def test_hive_style_response_hand_computed():
    """What Hive's client sends: user = base64(identifier), password = base64(password),
    realm "default", digest-uri "null/default" (protocol null, server name "default")."""
    token = Token(IDENT_BYTES, b"\x01" * 20)
    user, password = token.sasl_username, token.sasl_password
    secret = digest_secret(user, "default", password)
    for authzid in (None, "alice"):
        fields = dict(nonce=b"n0nce", cnonce=b"cn", nc=b"00000001", qop=b"auth",
                      digest_uri=b"null/default",
                      authzid=authzid.encode() if authzid else None)
        assert digest_response_value(secret, **fields).decode() == _hand_digest(
            user, password, "n0nce", "cn", "null/default", authzid)
        assert digest_response_value(secret, server=True, **fields).decode() == _hand_digest(
            user, password, "n0nce", "cn", "null/default", authzid, a2_prefix="")


def test_parse_directives():
    d = parse_directives(b' username="a\\"b" , realm="r",nc=00000001 ,qop=auth,x="1,2"')
    assert d == {"username": b'a"b', "realm": b"r", "nc": b"00000001", "qop": b"auth",
                 "x": b"1,2"}
    for bad in (b'username="x', b"username", b'nonce="a",nonce="b"', b'a="b"c'):
        with pytest.raises(AuthenticationFailed, match="malformed"):
            parse_directives(bad)


@pytest.fixture
def token_store(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/tokens.sqlite")
    ensure_schema(store)
    yield store
    store.dispose()


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def tokens(token_store):
    return TokenService(UnitOfWork(token_store), DelegationTokens(
        renew_interval=3600, max_lifetime=4 * 3600, clock=Clock()))


def _issue(tokens: TokenService, owner="alice", renewer="alice") -> Token:
    return Token.decode_url_string(tokens.issue(owner, renewer, user=owner, mechanism="PLAIN"))


def _handshake(server: SaslServer, client_steps) -> tuple[object, list[tuple[int, bytes]]]:
    """Run ``server.handshake`` on one end of a socket pair; ``client_steps(send, recv)``
    plays the client. Returns the server's result (or exception) and what it sent."""
    ours, theirs = socket.socketpair()
    outcome: dict = {}

    def serve():
        try:
            outcome["result"] = server.handshake(ours)
        except AuthenticationFailed as err:
            outcome["result"] = err
        finally:
            ours.close()

    thread = threading.Thread(target=serve)
    thread.start()
    received: list[tuple[int, bytes]] = []

    def send(status: int, payload: bytes = b"") -> None:
        try:
            theirs.sendall(bytes([status]) + len(payload).to_bytes(4, "big") + payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server refused early and closed; its answer is still readable

    def recv() -> tuple[int, bytes]:
        header = theirs.recv(5, socket.MSG_WAITALL)
        if len(header) < 5:
            return (-1, b"")
        length = int.from_bytes(header[1:], "big")
        payload = theirs.recv(length, socket.MSG_WAITALL) if length else b""
        received.append((header[0], payload))
        return header[0], payload

    try:
        client_steps(send, recv)
    finally:
        thread.join(30)
        theirs.close()
    return outcome.get("result"), received


def _puresasl_steps(token: Token, *, password: str | None = None, host: str = "default"):
    client = SASLClient(host, "hive", mechanism="DIGEST-MD5", username=token.sasl_username,
                        password=password or token.sasl_password)
    state: dict = {}

    def steps(send, recv):
        send(START, b"DIGEST-MD5")
        send(OK, client.process() or b"")
        status, challenge = recv()
        if status != OK:
            return
        send(OK, client.process(challenge))
        status, final = recv()
        state["status"], state["final"] = status, final
        if status == COMPLETE:
            client.process(final)  # pure-sasl checks rspauth here (raises when wrong)
            state["complete"] = client.complete

    return steps, state


def test_digest_md5_with_puresasl_client(tokens):
    token = _issue(tokens)
    server = SaslServer(PasswordBook({"alice": "pw"}), tokens.sasl_credential)
    steps, state = _puresasl_steps(token)
    who, sent = _handshake(server, steps)
    assert not isinstance(who, Exception), who
    assert (who.user, who.mechanism) == ("alice", "DIGEST-MD5")
    assert who.detail == f"delegation token {token.decode_identifier().sequence_number}"
    assert state["status"] == COMPLETE and state["complete"] is True
    challenge = parse_directives(sent[0][1])
    assert challenge["realm"] == b"default" and challenge["qop"] == b"auth"
    assert challenge["algorithm"] == b"md5-sess" and challenge["charset"] == b"utf-8"


def _refused(server, steps) -> str:
    result, sent = _handshake(server, steps)
    assert isinstance(result, AuthenticationFailed), result
    assert sent and sent[-1][0] == auth.BAD
    assert sent[-1][1].decode() == str(result)
    return str(result)


def test_digest_md5_refusals(tokens):
    server = SaslServer(PasswordBook({"alice": "pw"}), tokens.sasl_credential)
    token = _issue(tokens)

    steps, _ = _puresasl_steps(token, password="d3JvbmcK")
    assert "wrong token password" in _refused(server, steps)

    forged = Token(TokenIdentifier("alice", "alice", "", 1, 2, 999).to_bytes(), token.password)
    steps, _ = _puresasl_steps(forged)
    assert "delegation token 999 of alice is not known" in _refused(server, steps)

    other = _issue(tokens)
    tokens.cancel(other.encode_url_string(), user="alice", mechanism="PLAIN")
    steps, _ = _puresasl_steps(other)
    assert "is not known" in _refused(server, steps)

    tokens.tokens.clock.now += 3601  # past the renew interval
    steps, _ = _puresasl_steps(token)
    assert "has expired" in _refused(server, steps)


def _crafted(server, response_of) -> str:
    """Refusal text for a hand-made response: ``response_of(challenge_dict) -> bytes``."""
    def steps(send, recv):
        send(START, b"DIGEST-MD5")
        send(OK, b"")
        _status, challenge = recv()
        send(OK, response_of(parse_directives(challenge)))
        recv()
    return _refused(server, steps)


def test_digest_md5_protocol_violations(tokens):
    server = SaslServer(PasswordBook({"alice": "pw"}), tokens.sasl_credential)
    token = _issue(tokens)
    user = token.sasl_username

    def response(ch, **over):
        fields = {"username": f'"{user}"', "realm": '"default"',
                  "nonce": '"' + ch["nonce"].decode() + '"', "cnonce": '"abc"',
                  "nc": "00000001", "qop": "auth", "digest-uri": '"null/default"',
                  "response": _hand_digest(user, token.sasl_password, ch["nonce"].decode(),
                                           "abc", "null/default")}
        fields.update(over)
        return ",".join(f"{k}={v}" for k, v in fields.items() if v is not None).encode()

    assert "qop=auth-int is not supported" in _crafted(server, lambda ch: response(ch, qop="auth-int"))
    assert "qop=auth-conf is not supported" in _crafted(server, lambda ch: response(ch, qop="auth-conf"))
    assert "another nonce" in _crafted(server, lambda ch: response(ch, nonce='"x"'))
    assert "nonce-count" in _crafted(server, lambda ch: response(ch, nc="00000002"))
    assert "realm" in _crafted(server, lambda ch: response(ch, realm='"elsewhere"'))
    assert "lacks the cnonce" in _crafted(server, lambda ch: response(ch, cnonce=None))
    assert "authorization id 'bob'" in _crafted(server, lambda ch: response(ch, authzid='"bob"'))
    assert "wrong token password" in _crafted(server, lambda ch: response(ch, response="0" * 32))

    # a well-formed response is accepted (the helper itself is right)
    def steps(send, recv):
        send(START, b"DIGEST-MD5")
        send(OK, b"")
        _status, challenge = recv()
        send(OK, response(parse_directives(challenge)))
        recv()
    who, sent = _handshake(server, steps)
    assert who.user == "alice" and sent[-1][0] == COMPLETE


def test_other_mechanisms_are_refused(tokens):
    server = SaslServer(PasswordBook({"alice": "pw"}), tokens.sasl_credential)

    def gssapi(send, recv):
        send(START, b"GSSAPI")
        send(OK, b"\x60\x82")
        recv()
    assert "SASL mechanism GSSAPI is not offered: this metastore accepts PLAIN (user and " \
        "password) or DIGEST-MD5 (a Hive delegation token) (Kerberos is not configured on " \
        "the server" in _refused(server, gssapi)

    no_tokens = SaslServer(PasswordBook({"alice": "pw"}), None)
    steps, _ = _puresasl_steps(_issue(tokens))
    assert "DIGEST-MD5 is not offered" in _refused(no_tokens, steps)

    def gives_up(send, recv):  # what Java's client sends when GSSAPI fails locally
        send(auth.BAD, b"GSS initiate failed")
        recv()
    assert "gave up" in _refused(server, gives_up)


# -------------------------------------------------------------------- manager (2 backends)

@pytest.fixture
def backend_tokens(backend, request, tmp_path):
    if backend == "postgres":
        url = request.getfixturevalue("postgres").create_database()
    else:
        url = f"sqlite:///{tmp_path}/store.sqlite"
    store = Store(url)
    ensure_schema(store)
    yield TokenService(UnitOfWork(store), DelegationTokens(
        renew_interval=3600, max_lifetime=2 * 3600 + 60, clock=Clock()))
    store.dispose()


def test_issue_rules(backend_tokens):
    t = backend_tokens
    with pytest.raises(DelegationTokenError, match="hive.metastore.sasl.enabled"):
        t.issue("alice", "alice", user=None, mechanism=None)
    with pytest.raises(DelegationTokenError, match="cannot obtain another delegation token"):
        t.issue("alice", "alice", user="alice", mechanism="DIGEST-MD5")
    with pytest.raises(DelegationTokenError, match="User: alice is not allowed to impersonate bob"):
        t.issue("bob", "alice", user="alice", mechanism="PLAIN")
    first = Token.decode_url_string(t.issue("", "yarn/rm.example.com@EXAMPLE.COM", user="alice",
                                            mechanism="PLAIN"))
    ident = first.decode_identifier()
    assert (ident.owner, ident.renewer, ident.real_user) == ("alice", "yarn", "")
    assert ident.issue_date == 1_700_000_000_000
    assert ident.max_date == ident.issue_date + (2 * 3600 + 60) * 1000
    assert first.kind == KIND and first.service == "" and len(first.password) == 20
    second = _issue(t)
    assert second.decode_identifier().sequence_number == ident.sequence_number + 1
    cred = t.digest_credential(second.sasl_username)
    assert cred.user == "alice"
    assert cred.secret == digest_secret(second.sasl_username, "default", second.sasl_password)


def test_renew_and_cancel_rules(backend_tokens):
    t = backend_tokens
    token = _issue(t, renewer="bob")
    text = token.encode_url_string()
    issued = token.decode_identifier().issue_date
    with pytest.raises(DelegationTokenError, match="its renewer is 'bob'"):
        t.renew(text, user="alice", mechanism="PLAIN")
    with pytest.raises(DelegationTokenError, match="needs an authenticated connection"):
        t.renew(text, user=None, mechanism=None)
    with pytest.raises(InvalidToken, match="wrong token password"):
        t.renew(Token(token.identifier, b"x" * 20).encode_url_string(), user="bob", mechanism="PLAIN")
    with pytest.raises(InvalidToken, match="not a Hive delegation token string"):
        t.renew("garbage!", user="bob", mechanism="PLAIN")

    t.tokens.clock.now += 3000
    assert t.renew(text, user="bob", mechanism="PLAIN") == issued + (3000 + 3600) * 1000
    t.tokens.clock.now += 3000   # would have expired without the renewal
    t.digest_credential(token.sasl_username)
    # never past the max date
    assert t.renew(text, user="bob", mechanism="DIGEST-MD5") == issued + (2 * 3600 + 60) * 1000
    t.tokens.clock.now += 3600
    with pytest.raises(InvalidToken, match="has expired"):
        t.digest_credential(token.sasl_username)
    with pytest.raises(InvalidToken, match="has expired"):
        t.renew(text, user="bob", mechanism="PLAIN")

    fresh = _issue(t, renewer="bob")
    with pytest.raises(DelegationTokenError, match="only its owner or renewer"):
        t.cancel(fresh.encode_url_string(), user="mallory", mechanism="PLAIN")
    t.cancel(fresh.encode_url_string(), user="bob", mechanism="PLAIN")  # the renewer may
    with pytest.raises(InvalidToken, match="not known"):
        t.cancel(fresh.encode_url_string(), user="alice", mechanism="PLAIN")
    with pytest.raises(InvalidToken, match="not known"):
        t.digest_credential(fresh.sasl_username)

    # issuing purges expired tokens
    _issue(t)
    with pytest.raises(InvalidToken, match="not known"):
        t.digest_credential(token.sasl_username)


def test_token_without_renewer_cannot_be_renewed(backend_tokens):
    token = backend_tokens.issue("alice", "", user="alice", mechanism="PLAIN")
    with pytest.raises(DelegationTokenError, match="has no renewer"):
        backend_tokens.renew(token, user="alice", mechanism="PLAIN")


# --------------------------------------------------------------------------------- the CLI

SASL_CONF = {
    "hive.metastore.sasl.enabled": "true",
    "hive.metastore.authentication.config.username": "alice",
    "hive.metastore.authentication.config.password": "s3cret",
}


def test_cli_obtains_renews_and_cancels(hms_factory, tmp_path, capsys):
    server = hms_factory(SASL_CONF)
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    out = str(tmp_path / "creds")
    base = ["--uri", server.uri, "--user", "alice", "--password-file", str(pw)]
    assert cli_main(["delegation-token", *base, "--signature", "hms1", "--output", out,
                     "--json"]) == 0
    assert '"owner": "alice"' in capsys.readouterr().out
    [(alias, token)] = read_credentials(open(out, "rb").read())
    assert (alias, token.kind, token.service) == ("hms1", KIND, "hms1")
    seq = token.decode_identifier().sequence_number
    server.ms.token_service.digest_credential(token.sasl_username)  # the server knows it

    assert cli_main(["renew-delegation-token", *base, "--token-file", out]) == 0
    assert f"delegation token {seq} of alice: renewed until" in capsys.readouterr().out
    assert cli_main(["cancel-delegation-token", *base, "--token-file", out]) == 0
    assert cli_main(["cancel-delegation-token", *base, "--token-file", out]) == 1
    assert "is not known" in capsys.readouterr().err

    pw.write_text("wrong\n")
    assert cli_main(["delegation-token", *base, "--output", str(tmp_path / "x")]) == 2
    last = capsys.readouterr().err.splitlines()[-1]     # (the in-process server logs too)
    assert last.startswith("hms-txn: cannot connect")
    assert "authentication failed for user 'alice'" in last
    assert not os.path.exists(tmp_path / "x")


def test_cli_against_a_server_without_sasl(hms_factory, tmp_path, capsys):
    server = hms_factory()
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    assert cli_main(["delegation-token", "--uri", server.uri, "--user", "alice",
                     "--password-file", str(pw), "--output", str(tmp_path / "x"),
                     "--timeout", "2"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("hms-txn: cannot connect")


# ------------------------------------------------- cross-check with Hadoop/Hive's classes

JAVA_CHECK = r"""
import java.io.*;
import java.util.*;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.hive.thrift.DelegationTokenIdentifier;

public class CheckTokens {
  public static void main(String[] a) throws Exception {
    Token<DelegationTokenIdentifier> t = new Token<>();
    t.decodeFromUrlString(a[0]);
    DelegationTokenIdentifier id = new DelegationTokenIdentifier();
    id.readFields(new DataInputStream(new ByteArrayInputStream(t.getIdentifier())));
    System.out.println("kind=" + t.getKind());
    System.out.println("owner=" + id.getOwner());
    System.out.println("renewer=" + id.getRenewer());
    System.out.println("realUser=" + id.getRealUser());
    System.out.println("issueDate=" + id.getIssueDate());
    System.out.println("maxDate=" + id.getMaxDate());
    System.out.println("sequenceNumber=" + id.getSequenceNumber());
    System.out.println("reencoded=" + t.encodeToUrlString());
    Credentials c = Credentials.readTokenStorageFile(new File(a[1]), new Configuration());
    System.out.println("fileTokens=" + c.numberOfTokens());
    // What HiveMetaStoreClient.open() does: the UGI (loaded from HADOOP_TOKEN_FILE_LOCATION
    // at login) and Hive's token selector for hive.metastore.token.signature.
    System.out.println("ugiTokens=" + UserGroupInformation.getCurrentUser().getTokens().size());
    System.out.println("selected=" + org.apache.hadoop.hive.shims.Utils.getTokenStrForm(a[2]));
  }
}
"""


def test_hadoop_and_hive_read_our_tokens(tmp_path, tokens):
    java = shutil.which("java")
    require(java is not None, "java is not installed")
    try:
        from hms_bench.javahms import pyspark_jars
        jars = pyspark_jars()
    except (ImportError, RuntimeError):
        jars = None
    require(jars is not None, "pyspark (its Hadoop and Hive jars) is not installed")

    token = _issue(tokens, renewer="bob")
    creds = str(tmp_path / "creds")
    write_credentials_file(creds, [("alias", token.with_service("sig"))])
    source = tmp_path / "CheckTokens.java"
    source.write_text(JAVA_CHECK)
    env = dict(os.environ, HADOOP_TOKEN_FILE_LOCATION=creds, HADOOP_USER_NAME="alice")
    proc = subprocess.run([java, "-cp", os.path.join(jars, "*"), str(source),
                           token.encode_url_string(), creds, "sig"],
                          capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    got = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    ident = token.decode_identifier()
    assert got["kind"] == KIND
    assert (got["owner"], got["renewer"], got["realUser"]) == ("alice", "bob", "")
    assert int(got["issueDate"]) == ident.issue_date and int(got["maxDate"]) == ident.max_date
    assert int(got["sequenceNumber"]) == ident.sequence_number
    assert got["reencoded"] == token.encode_url_string()
    assert got["fileTokens"] == "1" and got["ugiTokens"] == "1"
    assert got["selected"] == token.with_service("sig").encode_url_string()
