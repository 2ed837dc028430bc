"""Client authentication: the server side of Thrift's SASL handshake, mechanism PLAIN.

Hive clients with SASL negotiate before the first call: the client sends
``START(mechanism)`` then ``OK(initial response)``; the server answers ``COMPLETE`` (or
``BAD``/``ERROR`` with a reason and closes). Every message is a status byte, a 4-byte
big-endian length and the payload. After the handshake each Thrift message travels in a
4-byte length-prefixed frame (no SASL wrapping for PLAIN), which is exactly the framed
transport, so the server wraps the socket in ``TFramedTransport`` afterwards.

Users come from the configuration (``hive.metastore.authentication.config.username`` /
``.password``) and/or a users file (``hms_txn.authentication.users.file``: one
``user:password`` or ``user:sha256:<hex digest>`` per line, ``#`` comments).
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
import threading

from .config import Config, ConfigError

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
_MAX_HANDSHAKE_PAYLOAD = 64 * 1024
_HANDSHAKE_TIMEOUT = 30.0


class AuthenticationFailed(Exception):
    pass


class PasswordBook:
    """User → password check, from the configuration and an optional users file."""

    def __init__(self, entries: dict[str, str]):
        self._entries = entries

    @classmethod
    def from_config(cls, config: Config) -> "PasswordBook":
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
        if not entries:
            raise ConfigError("SASL authentication is on (hive.metastore.sasl.enabled) but no users "
                              "are configured: set hive.metastore.authentication.config.username/"
                              "password or hms_txn.authentication.users.file")
        return cls(entries)

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


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            raise AuthenticationFailed("client closed the connection during the SASL handshake")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _recv_message(sock: socket.socket) -> tuple[int, bytes]:
    status, length = struct.unpack(">BI", _recv_exact(sock, 5))
    if status not in (START, OK, BAD, ERROR, COMPLETE):
        raise AuthenticationFailed(f"not a SASL client (status byte {status}); this server requires SASL")
    if length > _MAX_HANDSHAKE_PAYLOAD:
        raise AuthenticationFailed(f"SASL message of {length} bytes is too large")
    return status, _recv_exact(sock, length)


def _send(sock: socket.socket, status: int, payload: bytes = b"") -> None:
    sock.sendall(struct.pack(">BI", status, len(payload)) + payload)


class SaslPlainServer:
    """Runs the handshake on a freshly accepted socket; returns the authenticated user."""

    def __init__(self, book: PasswordBook):
        self.book = book
        self._lock = threading.Lock()

    def handshake(self, sock: socket.socket) -> str:
        previous = sock.gettimeout()
        sock.settimeout(_HANDSHAKE_TIMEOUT)
        try:
            try:
                status, mechanism = _recv_message(sock)
                if status != START:
                    raise AuthenticationFailed("the SASL handshake must begin with START")
                name = mechanism.decode("ascii", "replace").strip().upper()
                if name != "PLAIN":
                    raise AuthenticationFailed(
                        f"SASL mechanism {name or '(none)'} is not supported: hms-txn accepts PLAIN "
                        f"(Kerberos/GSSAPI and DIGEST-MD5 are not supported yet)")
                status, response = _recv_message(sock)
                if status not in (OK, COMPLETE):
                    raise AuthenticationFailed("expected the PLAIN credentials")
                parts = response.split(b"\x00")
                if len(parts) != 3:
                    raise AuthenticationFailed("malformed PLAIN credentials")
                _authzid, user_b, password_b = parts
                user = user_b.decode("utf-8", "replace")
                if not self.book.check(user, password_b.decode("utf-8", "replace")):
                    raise AuthenticationFailed(f"authentication failed for user {user!r}")
                _send(sock, COMPLETE)
                return user
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
