"""Client authentication: the server side of Thrift's SASL handshake, mechanisms PLAIN,
DIGEST-MD5 and GSSAPI (Kerberos, ``wire.sasl_gssapi``), chosen by the client's START
message as Java's ``TSaslServerTransport`` chooses among its server definitions.

Hive clients with SASL negotiate before the first call. Every handshake message is a
status byte (START, OK, BAD, ERROR, COMPLETE), a 4-byte big-endian length and the payload.
The client sends ``START(mechanism)`` and ``OK(initial response)``; then

* PLAIN: the initial response is ``authzid NUL user NUL password``; the server answers
  ``COMPLETE`` (or ``BAD`` with a reason, and closes);
* DIGEST-MD5 (RFC 2831, Hive delegation tokens): the initial response is empty; the server
  sends ``OK(challenge)`` (realm "default", a fresh nonce, qop "auth", charset utf-8,
  algorithm md5-sess), the client ``OK(response)`` with its digest, and the server
  ``COMPLETE("rspauth=...")`` proving it knows the token secret too. The user name is
  base64 of the token identifier; the connection is authenticated as the token's owner.

* GSSAPI (RFC 4752): the Kerberos exchange of ``wire.sasl_gssapi``; the connection is
  authenticated as the short name of the client's principal (``hadoop.security.
  auth_to_local``), and may negotiate a security layer (``hadoop.rpc.protection``).

DIGEST-MD5 offers qop "auth" only. Without a security layer each Thrift message travels in
a 4-byte length-prefixed frame, exactly the framed transport, and the server wraps the
socket in ``TFramedTransport``; with GSSAPI's ``auth-int``/``auth-conf`` each frame holds
one wrapped message (``Authenticated.layer``).

Users come from the configuration (``hive.metastore.authentication.config.username`` /
``.password``) and/or a users file (``hms_txn.authentication.users.file``: one
``user:password`` or ``user:sha256:<hex digest>`` per line, ``#`` comments). DIGEST-MD5
credentials come from a look-up the server is given (``CredentialLookup``: the delegation
token service's). Kerberos: ``KerberosServer`` (the acceptor and the principal -> short
name rules).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import struct
from dataclasses import dataclass
from typing import Callable

from hms_txn.common.config import Config, ConfigError
from hms_txn.common.kerberos_names import AuthToLocal, KerberosNameError
from hms_txn.wire.sasl_gssapi import Acceptor, KerberosFailure, SecurityLayer

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
_MAX_HANDSHAKE_PAYLOAD = 64 * 1024
_HANDSHAKE_TIMEOUT = 30.0
PLAIN, DIGEST_MD5, GSSAPI = "PLAIN", "DIGEST-MD5", "GSSAPI"
MECHANISMS = (PLAIN, DIGEST_MD5, GSSAPI)
# The realm DIGEST-MD5 offers: Hive's SaslRpcServer.SASL_DEFAULT_REALM, which Hive's clients
# answer with; the token secrets the look-up returns are hashed with it.
DIGEST_REALM = "default"


class AuthenticationFailed(Exception):
    pass


@dataclass(frozen=True)
class DigestCredential:
    """What the DIGEST-MD5 server needs for one user name (a delegation token)."""

    user: str            # the authenticated identity: the token's owner
    secret: bytes        # H(username:realm:password)
    label: str           # for logs: "delegation token 7"


class CredentialRefused(Exception):
    """Raised by a ``CredentialLookup``: the user name names no usable credential. The
    message says why; the client is told."""


# A DIGEST-MD5 user name -> its credential, or CredentialRefused.
CredentialLookup = Callable[[str], DigestCredential]


class PasswordBook:
    """User → password check, from the configuration and an optional users file."""

    def __init__(self, entries: dict[str, str]):
        self._entries = entries

    @classmethod
    def from_config(cls, config: Config, *, required: bool = True) -> "PasswordBook":
        """The configured users; with none, ConfigError when ``required`` (PLAIN is the
        only way in), else an empty book (PLAIN is not offered)."""
        entries: dict[str, str] = {}
        user = config["hive.metastore.authentication.config.username"]
        password = config["hive.metastore.authentication.config.password"]
        if user:
            if password is None:
                raise ConfigError("hive.metastore.authentication.config.password must be set "
                                  "with hive.metastore.authentication.config.username")
            entries[user] = password
        path = config["hms_txn.authentication.users.file"]
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except OSError as err:
                raise ConfigError(f"hms_txn.authentication.users.file: cannot read {path}: {err}") from None
            for number, line in enumerate(lines, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                name, sep, secret = line.partition(":")
                if not sep or not name:
                    raise ConfigError(f"hms_txn.authentication.users.file: {path}:{number}: "
                                      f"expected user:password or user:sha256:<hex>")
                entries[name] = secret
        if not entries and required:
            raise ConfigError("SASL authentication is on (hive.metastore.sasl.enabled) but no users "
                              "are configured: set hive.metastore.authentication.config.username/"
                              "password or hms_txn.authentication.users.file, or configure "
                              "Kerberos (hive.metastore.kerberos.principal and "
                              "hive.metastore.kerberos.keytab.file, "
                              "hadoop.security.authentication=kerberos)")
        return cls(entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def check(self, user: str, password: str) -> bool:
        secret = self._entries.get(user)
        if secret is None:
            # Compare anyway so unknown users and wrong passwords take the same time.
            hmac.compare_digest(password, password)
            return False
        if secret.startswith("sha256:"):
            digest = hashlib.sha256(password.encode("utf-8")).hexdigest()
            return hmac.compare_digest(digest, secret[len("sha256:"):].lower())
        return hmac.compare_digest(password.encode("utf-8"), secret.encode("utf-8"))


def _recv_exact(sock: socket.socket, n: int, first: bool = False) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            if first and not chunks:
                raise AuthenticationFailed(
                    "the client closed the connection without starting the SASL handshake "
                    "(a client that cannot begin it gives up before sending anything, e.g. "
                    "Kerberos without a ticket)")
            raise AuthenticationFailed("client closed the connection during the SASL handshake")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _recv_message(sock: socket.socket, first: bool = False) -> tuple[int, bytes]:
    status, length = struct.unpack(">BI", _recv_exact(sock, 5, first))
    if status not in (START, OK, BAD, ERROR, COMPLETE):
        raise AuthenticationFailed(f"not a SASL client (status byte {status}); this server requires SASL")
    if length > _MAX_HANDSHAKE_PAYLOAD:
        raise AuthenticationFailed(f"SASL message of {length} bytes is too large")
    return status, _recv_exact(sock, length)


def begins_handshake(data: bytes) -> bool:
    """Whether ``data``, the first bytes a client sent, begin a SASL handshake: START, the
    mechanism name's length, and the name (PLAIN, DIGEST-MD5, GSSAPI). No Thrift message
    begins so: an unframed one begins with 0x80 (binary) or 0x82 (compact), a framed one
    of under 16 MiB with 0x00, and one of 16 MiB and a few bytes would be followed by one
    of those, not by a letter."""
    if len(data) < 6 or data[0] != START:
        return False
    (length,) = struct.unpack_from(">I", data, 1)
    return 0 < length <= 64 and 0x41 <= data[5] <= 0x5A        # an upper-case letter


def error_frame(message: str) -> bytes:
    """A SASL ERROR message carrying ``message`` (a SASL client reports it and stops)."""
    payload = message.encode("utf-8")
    return struct.pack(">BI", ERROR, len(payload)) + payload


def _send(sock: socket.socket, status: int, payload: bytes = b"") -> None:
    sock.sendall(struct.pack(">BI", status, len(payload)) + payload)


@dataclass(frozen=True)
class Authenticated:
    """The outcome of a successful handshake."""

    user: str               # the short name every check and record uses
    mechanism: str
    detail: str = ""        # e.g. "delegation token 7", "alice@EXAMPLE.COM, auth-conf"
    principal: str | None = None            # GSSAPI: the client's full principal
    layer: SecurityLayer | None = None      # GSSAPI auth-int / auth-conf


class KerberosServer:
    """What the GSSAPI mechanism needs: the acceptor (principal, keytab, offered
    protections) and the principal -> short name rules."""

    def __init__(self, acceptor: Acceptor, names: AuthToLocal):
        self.acceptor = acceptor
        self.names = names


# ----------------------------------------------------------------------------- DIGEST-MD5

_DIGEST_MAX_RESPONSE = 4096     # RFC 2831 2.1.2: a digest-response is under 4096 bytes
# Directives that may appear at most once in a digest-response (RFC 2831 2.1.2).
_DIGEST_SINGLE = {"username", "realm", "nonce", "cnonce", "nc", "qop", "digest-uri",
                  "response", "maxbuf", "charset", "cipher", "authzid"}


def parse_directives(data: bytes) -> dict[str, bytes]:
    """RFC 2831 ``1#( name "=" ( token | quoted-string ) )``: names lower-cased, values
    unquoted (backslash escapes removed), as bytes. Raises AuthenticationFailed."""
    out: dict[str, bytes] = {}
    i, n = 0, len(data)

    def bad(why: str) -> AuthenticationFailed:
        return AuthenticationFailed(f"malformed DIGEST-MD5 response: {why}")

    while i < n:
        while i < n and data[i] in b" \t\r\n,":
            i += 1
        if i >= n:
            break
        start = i
        while i < n and data[i] not in b"= \t,":
            i += 1
        name = data[start:i].decode("ascii", "replace").lower()
        while i < n and data[i] in b" \t":
            i += 1
        if not name or i >= n or data[i] != ord("="):
            raise bad(f"expected name=value near byte {start}")
        i += 1
        while i < n and data[i] in b" \t":
            i += 1
        if i < n and data[i] == ord('"'):
            i += 1
            value = bytearray()
            while True:
                if i >= n:
                    raise bad(f"unterminated quoted value of {name}")
                c = data[i]
                if c == ord("\\") and i + 1 < n:
                    value.append(data[i + 1])
                    i += 2
                elif c == ord('"'):
                    i += 1
                    break
                else:
                    value.append(c)
                    i += 1
            val = bytes(value)
        else:
            start = i
            while i < n and data[i] not in b", \t":
                i += 1
            val = data[start:i]
        while i < n and data[i] in b" \t":
            i += 1
        if i < n and data[i] != ord(","):
            raise bad(f"expected a comma after {name}")
        if name in out and name in _DIGEST_SINGLE:
            raise bad(f"directive {name} appears more than once")
        out[name] = val
    return out


def _hex_md5(data: bytes) -> bytes:
    return hashlib.md5(data).hexdigest().encode("ascii")


def digest_response_value(secret: bytes, *, nonce: bytes, cnonce: bytes, nc: bytes,
                          qop: bytes, digest_uri: bytes, authzid: bytes | None = None,
                          server: bool = False) -> bytes:
    """RFC 2831 2.1.2.1 ``response-value`` (``server=True``: the ``rspauth`` value).

    ``secret`` is ``H(username:realm:password)``. A1 = secret ":" nonce ":" cnonce
    [":" authzid]; A2 = "AUTHENTICATE:" digest-uri (rspauth: ":" digest-uri), qop auth."""
    a1 = secret + b":" + nonce + b":" + cnonce
    if authzid:
        a1 += b":" + authzid
    a2 = (b"" if server else b"AUTHENTICATE") + b":" + digest_uri
    return _hex_md5(_hex_md5(a1) + b":" + nonce + b":" + nc + b":" + cnonce + b":" + qop
                    + b":" + _hex_md5(a2))


class DigestMD5Server:
    """One DIGEST-MD5 exchange (RFC 2831, initial authentication, qop=auth only).

    ``credentials(username)`` returns the ``DigestCredential`` for a user name or raises
    CredentialRefused (or AuthenticationFailed) with the reason."""

    def __init__(self, credentials: CredentialLookup, *, realm: str = DIGEST_REALM,
                 nonce: bytes | None = None):
        self.credentials = credentials
        self.realm = realm.encode("utf-8")
        self.nonce = nonce or base64.b64encode(os.urandom(24))

    def challenge(self) -> bytes:
        return (b'realm="' + self.realm + b'",nonce="' + self.nonce
                + b'",qop="auth",charset=utf-8,algorithm=md5-sess')

    def respond(self, response: bytes) -> tuple[Authenticated, bytes]:
        """Check the client's digest-response; returns who it is and the final message."""
        if len(response) >= _DIGEST_MAX_RESPONSE:
            raise AuthenticationFailed("DIGEST-MD5 response is too long")
        d = parse_directives(response)
        for name in ("username", "nonce", "cnonce", "nc", "digest-uri", "response"):
            if name not in d:
                raise AuthenticationFailed(f"DIGEST-MD5 response lacks the {name} directive")
        qop = d.get("qop", b"auth")
        if qop != b"auth":
            shown = qop.decode("ascii", "replace")
            if qop in (b"auth-int", b"auth-conf"):
                raise AuthenticationFailed(
                    f"DIGEST-MD5 qop={shown} is not supported: hms-txn offers qop=auth only "
                    f"(no SASL integrity or confidentiality layer); use "
                    f"hadoop.rpc.protection=authentication on the client")
            raise AuthenticationFailed(f"DIGEST-MD5 qop={shown} is not one the server offered (auth)")
        charset = d.get("charset")
        if charset is not None and charset.lower() != b"utf-8":
            raise AuthenticationFailed("DIGEST-MD5 charset must be utf-8")
        if not hmac.compare_digest(d["nonce"], self.nonce):
            raise AuthenticationFailed("DIGEST-MD5 response is for another nonce")
        nc = d["nc"]
        try:
            count = int(nc, 16)
        except ValueError:
            count = -1
        if len(nc) != 8 or count != 1:
            raise AuthenticationFailed("DIGEST-MD5 nonce-count must be 00000001")
        realm = d.get("realm", b"")
        if realm != self.realm:
            raise AuthenticationFailed(
                f"DIGEST-MD5 realm {realm.decode('utf-8', 'replace')!r} is not the realm "
                f"{self.realm.decode()!r} the server offered")
        try:
            username = d["username"].decode("utf-8" if charset else "iso-8859-1")
        except UnicodeDecodeError:
            raise AuthenticationFailed("DIGEST-MD5 user name is not UTF-8") from None
        try:
            cred = self.credentials(username)
        except CredentialRefused as err:
            raise AuthenticationFailed(f"DIGEST-MD5: {err}") from None
        authzid = d.get("authzid")
        if authzid and authzid.decode("utf-8", "replace") != cred.user:
            raise AuthenticationFailed(
                f"DIGEST-MD5 authorization id {authzid.decode('utf-8', 'replace')!r} is not "
                f"the token owner {cred.user!r} (impersonation is not supported)")
        fields = dict(nonce=self.nonce, cnonce=d["cnonce"], nc=nc, qop=qop,
                      digest_uri=d["digest-uri"], authzid=authzid)
        expected = digest_response_value(cred.secret, **fields)
        if not hmac.compare_digest(expected, d["response"].lower()):
            raise AuthenticationFailed(
                f"DIGEST-MD5 response does not match {cred.label} (wrong token password)")
        rspauth = digest_response_value(cred.secret, server=True, **fields)
        return Authenticated(cred.user, DIGEST_MD5, cred.label), b"rspauth=" + rspauth


# ------------------------------------------------------------------------------ handshake

class SaslServer:
    """Runs the handshake on a freshly accepted socket; returns who authenticated.

    ``credentials`` answers DIGEST-MD5 look-ups (the delegation token service's
    ``sasl_credential``); without it DIGEST-MD5 is refused."""

    def __init__(self, book: PasswordBook, credentials: CredentialLookup | None = None,
                 kerberos: KerberosServer | None = None):
        self.book = book
        self.credentials = credentials
        self.kerberos = kerberos

    def offered(self) -> tuple[str, ...]:
        return tuple(m for m, on in ((GSSAPI, self.kerberos is not None), (PLAIN, bool(self.book)),
                                     (DIGEST_MD5, self.credentials is not None)) if on)

    def describe_offer(self) -> str:
        """The mechanisms, as the refusals of a client without SASL name them."""
        names = {GSSAPI: "GSSAPI (Kerberos)", PLAIN: "PLAIN (user and password)",
                 DIGEST_MD5: "DIGEST-MD5 (a Hive delegation token)"}
        shown = [names[m] for m in self.offered()]
        return " or ".join(filter(None, (", ".join(shown[:-1]), shown[-1])))

    def handshake(self, sock: socket.socket) -> Authenticated:
        previous = sock.gettimeout()
        sock.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            try:
                status, mechanism = _recv_message(sock, first=True)
                if status in (BAD, ERROR):
                    raise AuthenticationFailed(
                        "the client gave up before the SASL handshake: "
                        + mechanism.decode("utf-8", "replace"))
                if status != START:
                    raise AuthenticationFailed("the SASL handshake must begin with START")
                name = mechanism.decode("ascii", "replace").strip().upper()
                if name not in self.offered():
                    raise AuthenticationFailed(
                        f"SASL mechanism {name or '(none)'} is not offered: this metastore "
                        f"accepts {self.describe_offer()}"
                        + ("" if self.kerberos is not None or name != GSSAPI else
                           " (Kerberos is not configured on the server: "
                           "hive.metastore.kerberos.principal and .keytab.file)"))
                status, initial = self._expect_ok(sock)
                if name == PLAIN:
                    return self._plain(sock, initial)
                if name == GSSAPI:
                    return self._gssapi(sock, initial)
                return self._digest(sock)
            except AuthenticationFailed as err:
                try:
                    _send(sock, BAD, str(err).encode("utf-8"))
                except OSError:
                    pass
                raise
            except (OSError, struct.error) as err:
                raise AuthenticationFailed(f"SASL handshake failed: {err}") from None
        finally:
            sock.settimeout(previous)

    @staticmethod
    def _expect_ok(sock: socket.socket) -> tuple[int, bytes]:
        status, payload = _recv_message(sock)
        if status in (BAD, ERROR):
            raise AuthenticationFailed("the client gave up the SASL handshake: "
                                       + payload.decode("utf-8", "replace"))
        if status not in (OK, COMPLETE):
            raise AuthenticationFailed("unexpected SASL message status from the client")
        return status, payload

    def _plain(self, sock: socket.socket, response: bytes) -> Authenticated:
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("malformed PLAIN credentials")
        _authzid, user_b, password_b = parts
        user = user_b.decode("utf-8", "replace")
        if not self.book.check(user, password_b.decode("utf-8", "replace")):
            raise AuthenticationFailed(f"authentication failed for user {user!r}")
        _send(sock, COMPLETE)
        return Authenticated(user, PLAIN)

    def _digest(self, sock: socket.socket) -> Authenticated:
        # A non-empty initial response would be RFC 2831 "subsequent authentication",
        # which we do not support: as the RFC allows, answer with a fresh challenge.
        assert self.credentials is not None     # refused in handshake() otherwise
        mech = DigestMD5Server(self.credentials)
        _send(sock, OK, mech.challenge())
        _status, response = self._expect_ok(sock)
        who, final = mech.respond(response)
        _send(sock, COMPLETE, final)
        return who

    def _gssapi(self, sock: socket.socket, token: bytes) -> Authenticated:
        assert self.kerberos is not None     # refused in handshake() otherwise
        negotiation = self.kerberos.acceptor.negotiation()
        try:
            while True:
                reply = negotiation.respond(token)
                if negotiation.outcome is not None:
                    break
                _send(sock, OK, reply)
                status, token = _recv_message(sock)
                if status in (BAD, ERROR):
                    raise AuthenticationFailed(self._gave_up(negotiation, token))
                if status not in (OK, COMPLETE):
                    raise AuthenticationFailed("unexpected SASL message status from the client")
        except KerberosFailure as err:
            raise AuthenticationFailed(str(err)) from None
        outcome = negotiation.outcome
        try:
            user = self.kerberos.names.short_name(outcome.principal)
        except KerberosNameError as err:
            raise AuthenticationFailed(f"Kerberos principal {outcome.principal}: {err}") from None
        _send(sock, COMPLETE)
        return Authenticated(user, GSSAPI, f"{outcome.principal}, {outcome.qop}",
                             principal=outcome.principal, layer=outcome.layer)

    @staticmethod
    def _gave_up(negotiation, payload: bytes) -> str:
        reason = payload.decode("utf-8", "replace")
        if negotiation.principal is not None:       # after the offer of protections
            return (f"{negotiation.principal} gave up the SASL GSSAPI handshake after the "
                    f"offer of protection {negotiation.offered} (hadoop.rpc.protection): "
                    f"{reason}")
        return "the client gave up the SASL GSSAPI handshake: " + reason
