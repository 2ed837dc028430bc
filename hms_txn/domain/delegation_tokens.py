"""Hive delegation tokens: the Hadoop wire formats, and issuing, renewing and cancelling them.

A delegation token lets a job that has no password (a Spark driver or executor, a YARN
container) authenticate to the metastore with SASL DIGEST-MD5. Someone who can
authenticate with a password (SASL PLAIN) calls ``get_delegation_token``; the string it
returns is what Hadoop's ``Token.decodeFromUrlString`` reads, so Hadoop and Hive code use it
unchanged: a Hadoop credentials file holding it, named by ``HADOOP_TOKEN_FILE_LOCATION``,
puts it in the job's UGI, and Hive's ``HiveMetaStoreClient`` then authenticates with it
(``HadoopThriftAuthBridge.Client.createClientTransport(..., "DIGEST", ...)``).

Formats (all Hadoop ``Writable``; integers are ``WritableUtils`` variable-length):

* identifier (``AbstractDelegationTokenIdentifier``): version byte 0, Text owner, Text
  renewer, Text realUser, VLong issueDate, VLong maxDate (ms), VInt sequenceNumber, VInt
  masterKeyId;
* token (``Token``): VInt length + identifier, VInt length + password, Text kind
  (``HIVE_DELEGATION_TOKEN``), Text service; its string form is URL-safe base64 without
  padding;
* credentials file (``Credentials``, format WRITABLE): ``HDTS``, byte 0, VInt number of
  tokens, per token Text alias + token, VInt number of secret keys (0).

In DIGEST-MD5 the client's user name is base64(identifier) and its password base64(token
password), realm ``default`` (Hive's ``SaslClientCallbackHandler``). The server keeps only
what DIGEST-MD5 needs, ``H(username:realm:password)`` (RFC 2831's A1 prefix), not the
password itself, with the token's owner, renewer and expiry. Tokens expire a renew
interval after issue or renewal and never outlive their max date; cancelled tokens are
deleted. This module has no Thrift imports; the handler maps its errors to MetaException.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from sqlalchemy import delete, select, update

from hms_txn.common.errors import MetastoreError
from hms_txn.store.schema import delegation_tokens, next_delegation_token_id
from hms_txn.store.sql import reserve_ids

log = logging.getLogger(__name__)

KIND = "HIVE_DELEGATION_TOKEN"
DIGEST_REALM = "default"           # Hive's SaslRpcServer.SASL_DEFAULT_REALM
IDENTIFIER_VERSION = 0
PASSWORD_BYTES = 20
CREDENTIALS_MAGIC = b"HDTS"
CREDENTIALS_FORMAT_WRITABLE = 0
DEFAULT_ALIAS = "hive.metastore.delegation.token"
PLAIN, DIGEST = "PLAIN", "DIGEST-MD5"
_MAX_INT32 = 2 ** 31 - 1


class DelegationTokenError(MetastoreError):
    """A delegation token call was refused, or a token cannot be used (MetaException)."""


class InvalidToken(DelegationTokenError):
    """The token is malformed, unknown, cancelled, expired or has a wrong password."""


# ------------------------------------------------------------------------------ Writable

def write_vlong(out: bytearray, value: int) -> None:
    """Hadoop ``WritableUtils.writeVLong`` (also ``writeVInt``)."""
    if not -(2 ** 63) <= value < 2 ** 63:
        raise ValueError(f"{value} does not fit a Java long")
    if -112 <= value <= 127:
        out.append(value & 0xFF)
        return
    length = -112
    if value < 0:
        value ^= -1
        length = -120
    tmp = value
    while tmp != 0:
        tmp >>= 8
        length -= 1
    out.append(length & 0xFF)
    count = -(length + 120) if length < -120 else -(length + 112)
    for idx in range(count, 0, -1):
        out.append((value >> ((idx - 1) * 8)) & 0xFF)


def write_text(out: bytearray, text: str) -> None:
    """Hadoop ``Text.write``: VInt byte length, then UTF-8."""
    data = text.encode("utf-8")
    write_vlong(out, len(data))
    out += data


def write_bytes(out: bytearray, data: bytes) -> None:
    write_vlong(out, len(data))
    out += data


class WritableReader:
    """Reads Hadoop ``Writable`` primitives; ``ValueError`` on truncated or bad input."""

    def __init__(self, data: bytes):
        self.data = bytes(data)
        self.pos = 0

    def byte(self) -> int:
        """A signed byte (Java ``readByte``)."""
        if self.pos >= len(self.data):
            raise ValueError("truncated Writable data")
        value = self.data[self.pos]
        self.pos += 1
        return value - 256 if value > 127 else value

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated Writable data")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def vlong(self) -> int:
        """Hadoop ``WritableUtils.readVLong``."""
        first = self.byte()
        if first >= -112:
            return first
        size = (-119 - first) if first < -120 else (-111 - first)
        value = 0
        for _ in range(size - 1):
            value = (value << 8) | (self.byte() & 0xFF)
        negative = first < -120
        if not negative and value >= 2 ** 63:
            raise ValueError("VLong out of range")
        return (value ^ -1) if negative else value

    def vint(self) -> int:
        value = self.vlong()
        if not -(2 ** 31) <= value <= _MAX_INT32:
            raise ValueError("VInt out of range")
        return value

    def blob(self) -> bytes:
        return self.raw(self.vint())

    def text(self) -> str:
        try:
            return self.blob().decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("Text is not UTF-8") from None

    def at_end(self) -> bool:
        return self.pos == len(self.data)


# --------------------------------------------------------------------- identifier, token

@dataclass(frozen=True)
class TokenIdentifier:
    """Hive's ``DelegationTokenIdentifier`` (an ``AbstractDelegationTokenIdentifier``)."""

    owner: str
    renewer: str
    real_user: str
    issue_date: int        # ms since the epoch
    max_date: int          # ms since the epoch
    sequence_number: int
    master_key_id: int = 0

    def to_bytes(self) -> bytes:
        out = bytearray([IDENTIFIER_VERSION])
        write_text(out, self.owner)
        write_text(out, self.renewer)
        write_text(out, self.real_user)
        write_vlong(out, self.issue_date)
        write_vlong(out, self.max_date)
        write_vlong(out, self.sequence_number)
        write_vlong(out, self.master_key_id)
        return bytes(out)

    @classmethod
    def from_bytes(cls, data: bytes) -> "TokenIdentifier":
        r = WritableReader(data)
        version = r.byte()
        if version != IDENTIFIER_VERSION:
            raise ValueError(f"unknown delegation token identifier version {version}")
        ident = cls(owner=r.text(), renewer=r.text(), real_user=r.text(), issue_date=r.vlong(),
                    max_date=r.vlong(), sequence_number=r.vint(), master_key_id=r.vint())
        if not r.at_end():
            raise ValueError("trailing bytes after the delegation token identifier")
        return ident


def _b64url_decode(text: str) -> bytes:
    text = text.strip()
    if not text:
        raise ValueError("empty token string")
    # Hadoop encodes URL-safe without padding; commons-codec decodes both alphabets.
    text = text.replace("+", "-").replace("/", "_").rstrip("=")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not URL-safe base64") from None


@dataclass(frozen=True)
class Token:
    """Hadoop ``Token``: identifier and password bytes, kind and service."""

    identifier: bytes
    password: bytes
    kind: str = KIND
    service: str = ""

    def write(self, out: bytearray) -> None:
        write_bytes(out, self.identifier)
        write_bytes(out, self.password)
        write_text(out, self.kind)
        write_text(out, self.service)

    def to_writable(self) -> bytes:
        out = bytearray()
        self.write(out)
        return bytes(out)

    @classmethod
    def read(cls, r: WritableReader) -> "Token":
        return cls(identifier=r.blob(), password=r.blob(), kind=r.text(), service=r.text())

    @classmethod
    def from_writable(cls, data: bytes) -> "Token":
        r = WritableReader(data)
        token = cls.read(r)
        if not r.at_end():
            raise ValueError("trailing bytes after the token")
        return token

    def encode_url_string(self) -> str:
        """``Token.encodeToUrlString``: URL-safe base64, no padding."""
        return base64.urlsafe_b64encode(self.to_writable()).decode("ascii").rstrip("=")

    @classmethod
    def decode_url_string(cls, text: str) -> "Token":
        """``Token.decodeFromUrlString``; ValueError when it is not a token."""
        return cls.from_writable(_b64url_decode(text))

    def decode_identifier(self) -> TokenIdentifier:
        return TokenIdentifier.from_bytes(self.identifier)

    def with_service(self, service: str) -> "Token":
        return Token(self.identifier, self.password, self.kind, service)

    # What Hive's SaslClientCallbackHandler answers in DIGEST-MD5.
    @property
    def sasl_username(self) -> str:
        return base64.b64encode(self.identifier).decode("ascii")

    @property
    def sasl_password(self) -> str:
        return base64.b64encode(self.password).decode("ascii")


def credentials_bytes(tokens: Iterable[tuple[str, Token]]) -> bytes:
    """A Hadoop credentials file (``Credentials.writeTokenStorageToStream``, WRITABLE)."""
    tokens = list(tokens)
    out = bytearray(CREDENTIALS_MAGIC)
    out.append(CREDENTIALS_FORMAT_WRITABLE)
    write_vlong(out, len(tokens))
    for alias, token in tokens:
        write_text(out, alias)
        token.write(out)
    write_vlong(out, 0)  # no secret keys
    return bytes(out)


def read_credentials(data: bytes) -> list[tuple[str, Token]]:
    """The tokens of a credentials file in the WRITABLE format."""
    if data[:4] != CREDENTIALS_MAGIC:
        raise ValueError("not a Hadoop credentials file (no HDTS header)")
    r = WritableReader(data[4:])
    fmt = r.byte()
    if fmt != CREDENTIALS_FORMAT_WRITABLE:
        raise ValueError(f"credentials format {fmt} is not WRITABLE (0)")
    tokens = [(r.text(), Token.read(r)) for _ in range(r.vint())]
    for _ in range(r.vint()):
        r.text()
        r.blob()
    if not r.at_end():
        raise ValueError("trailing bytes after the credentials")
    return tokens


def write_credentials_file(path: str, tokens: Iterable[tuple[str, Token]]) -> None:
    """Write a credentials file readable by the owner only, atomically."""
    data = credentials_bytes(tokens)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".hms-token-", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def digest_secret(username: str, realm: str, password: str) -> bytes:
    """RFC 2831's ``H({username-value, ":", realm-value, ":", passwd})`` (16 bytes).

    The strings are hashed in ISO 8859-1 when they fit it, else in UTF-8 (RFC 2831
    2.1.2.1, the client having announced charset=utf-8)."""
    def enc(s: str) -> bytes:
        try:
            return s.encode("iso-8859-1")
        except UnicodeEncodeError:
            return s.encode("utf-8")
    return hashlib.md5(enc(username) + b":" + enc(realm) + b":" + enc(password)).digest()


def short_name(principal: str) -> str:
    """``primary`` of ``primary/instance@REALM`` (what Hadoop keeps as a token's renewer)."""
    return principal.split("@", 1)[0].split("/", 1)[0]


# ------------------------------------------------------------------------------- manager

@dataclass(frozen=True)
class DigestCredential:
    """What the DIGEST-MD5 server needs for one token."""

    user: str            # the authenticated identity: the token's owner
    secret: bytes        # H(username:realm:password)
    label: str           # for logs: "delegation token 7"


class DelegationTokens:
    """Issues, renews and cancels tokens; answers DIGEST-MD5 credential look-ups."""

    def __init__(self, store: Any, *, renew_interval: float = 86400.0,
                 max_lifetime: float = 7 * 86400.0, clock: Callable[[], float] = time.time):
        self.store = store
        self.renew_interval_ms = int(renew_interval * 1000)
        self.max_lifetime_ms = int(max_lifetime * 1000)
        self.clock = clock

    @classmethod
    def from_config(cls, store: Any, config: Any) -> "DelegationTokens":
        return cls(store, renew_interval=config["hive.cluster.delegation.token.renew-interval"],
                   max_lifetime=config["hive.cluster.delegation.token.max-lifetime"])

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ---------------------------------------------------------------- Thrift-facing calls

    def issue(self, owner: str | None, renewer: str | None, *, user: str | None,
              mechanism: str | None) -> str:
        """``get_delegation_token``: a new token of ``user``, as its URL string."""
        if user is None:
            raise DelegationTokenError(
                "get_delegation_token needs an authenticated connection: this metastore does "
                "not require SASL (set hive.metastore.sasl.enabled=true) or the client did not "
                "authenticate; connect with SASL PLAIN to obtain a delegation token")
        if mechanism != PLAIN:
            raise DelegationTokenError(
                f"get_delegation_token: a connection authenticated with {mechanism} (a "
                f"delegation token) cannot obtain another delegation token; connect with SASL "
                f"PLAIN (user and password)")
        owner = (owner or "").strip() or user
        if owner != user:
            raise DelegationTokenError(
                f"get_delegation_token: user {user!r} may not obtain a delegation token owned "
                f"by {owner!r} (tokens are issued to the authenticated user; proxy users are "
                f"not supported)")
        renewer = short_name((renewer or "").strip())
        now = self._now_ms()
        password = secrets.token_bytes(PASSWORD_BYTES)

        def work(conn) -> Token:
            # Expired tokens can never be used again: drop them as new ones are issued.
            conn.execute(delete(delegation_tokens).where(delegation_tokens.c.expiry_ms < now))
            seq = reserve_ids(conn, next_delegation_token_id, 1)
            if seq > _MAX_INT32:
                raise DelegationTokenError("delegation token sequence numbers are exhausted")
            ident = TokenIdentifier(owner=owner, renewer=renewer, real_user="", issue_date=now,
                                    max_date=now + self.max_lifetime_ms, sequence_number=seq)
            token = Token(ident.to_bytes(), password)
            secret = digest_secret(token.sasl_username, DIGEST_REALM, token.sasl_password)
            conn.execute(delegation_tokens.insert().values(
                sequence_number=seq, identifier=token.sasl_username, owner=owner,
                renewer=renewer, real_user="", issue_ms=now, max_date_ms=ident.max_date,
                expiry_ms=min(now + self.renew_interval_ms, ident.max_date),
                digest_secret=secret.hex()))
            return token

        token = self.store.transaction(work)
        seq = token.decode_identifier().sequence_number
        log.info("issued delegation token %d to %s (renewer %r)", seq, owner, renewer)
        return token.encode_url_string()

    def renew(self, token_str: str, *, user: str | None, mechanism: str | None) -> int:
        """``renew_delegation_token``: the token's new expiry (ms since the epoch)."""
        caller = self._caller("renew_delegation_token", user)
        token, ident = self._decode(token_str)
        now = self._now_ms()

        def work(conn) -> int:
            row = self._row(conn, token, ident, for_update=True)
            if not ident.renewer:
                raise DelegationTokenError(
                    f"delegation token {ident.sequence_number} of {ident.owner} has no renewer "
                    f"and cannot be renewed")
            if caller != ident.renewer:
                raise DelegationTokenError(
                    f"user {caller!r} may not renew delegation token {ident.sequence_number} "
                    f"of {ident.owner}: its renewer is {ident.renewer!r}")
            if row.expiry_ms < now:
                raise InvalidToken(
                    f"delegation token {ident.sequence_number} of {ident.owner} has expired")
            expiry = min(now + self.renew_interval_ms, row.max_date_ms)
            conn.execute(update(delegation_tokens)
                         .where(delegation_tokens.c.sequence_number == ident.sequence_number)
                         .values(expiry_ms=expiry))
            return expiry

        expiry = self.store.transaction(work)
        log.info("%s renewed delegation token %d of %s until %d", caller,
                 ident.sequence_number, ident.owner, expiry)
        return expiry

    def cancel(self, token_str: str, *, user: str | None, mechanism: str | None) -> None:
        """``cancel_delegation_token``: by the token's owner or renewer."""
        caller = self._caller("cancel_delegation_token", user)
        token, ident = self._decode(token_str)

        def work(conn) -> None:
            self._row(conn, token, ident, for_update=True)
            if caller not in (ident.owner, ident.renewer):
                raise DelegationTokenError(
                    f"user {caller!r} may not cancel delegation token {ident.sequence_number} "
                    f"of {ident.owner}: only its owner or renewer may")
            conn.execute(delete(delegation_tokens)
                         .where(delegation_tokens.c.sequence_number == ident.sequence_number))

        self.store.transaction(work)
        log.info("%s cancelled delegation token %d of %s", caller, ident.sequence_number,
                 ident.owner)

    # -------------------------------------------------------------------- DIGEST-MD5 side

    def digest_credential(self, username: str) -> DigestCredential:
        """The credential of the token whose base64 identifier is ``username``.

        Raises ``InvalidToken`` (with a reason for the client) when the token is not one of
        ours, was cancelled or has expired."""
        try:
            identifier = base64.b64decode(username.encode("ascii"), validate=True)
            ident = TokenIdentifier.from_bytes(identifier)
        except (ValueError, UnicodeEncodeError, binascii.Error):
            raise InvalidToken("the DIGEST-MD5 user name is not a Hive delegation token "
                               "identifier") from None
        with self.store.read() as conn:
            row = conn.execute(select(delegation_tokens).where(
                delegation_tokens.c.sequence_number == ident.sequence_number)).first()
        label = f"delegation token {ident.sequence_number} of {ident.owner}"
        if row is None or not hmac.compare_digest(row.identifier, username):
            raise InvalidToken(f"{label} is not known to this metastore (cancelled, expired "
                               f"and purged, or never issued here)")
        if row.expiry_ms < self._now_ms():
            raise InvalidToken(f"{label} has expired (renew it before it expires, or obtain "
                               f"a new one)")
        return DigestCredential(user=row.owner, secret=bytes.fromhex(row.digest_secret),
                                label=f"delegation token {ident.sequence_number}")

    # ------------------------------------------------------------------------- helpers

    @staticmethod
    def _caller(method: str, user: str | None) -> str:
        if user is None:
            raise DelegationTokenError(
                f"{method} needs an authenticated connection: this metastore does not require "
                f"SASL (set hive.metastore.sasl.enabled=true) or the client did not authenticate")
        return user

    @staticmethod
    def _decode(token_str: str) -> tuple[Token, TokenIdentifier]:
        try:
            token = Token.decode_url_string(token_str or "")
            ident = token.decode_identifier()
        except ValueError as err:
            raise InvalidToken(f"not a Hive delegation token string: {err}") from None
        if token.kind not in (KIND, ""):
            raise InvalidToken(f"token kind {token.kind!r} is not {KIND}")
        return token, ident

    @staticmethod
    def _row(conn, token: Token, ident: TokenIdentifier, *, for_update: bool):
        query = select(delegation_tokens).where(
            delegation_tokens.c.sequence_number == ident.sequence_number)
        if for_update:
            query = query.with_for_update()
        row = conn.execute(query).first()
        label = f"delegation token {ident.sequence_number} of {ident.owner}"
        if row is None or not hmac.compare_digest(row.identifier, token.sasl_username):
            raise InvalidToken(f"{label} is not known to this metastore (cancelled, expired "
                               f"and purged, or never issued here)")
        secret = digest_secret(token.sasl_username, DIGEST_REALM, token.sasl_password)
        if not hmac.compare_digest(secret.hex(), row.digest_secret):
            raise InvalidToken(f"{label}: wrong token password")
        return row
