"""Hadoop's wire formats of a Hive delegation token: what ``get_delegation_token`` returns,
what a Hadoop credentials file holds and what a client presents in SASL DIGEST-MD5.

The string form of a token is what Hadoop's ``Token.decodeFromUrlString`` reads, so Hadoop
and Hive code use it unchanged: a Hadoop credentials file holding it, named by
``HADOOP_TOKEN_FILE_LOCATION``, puts it in the job's UGI, and Hive's ``HiveMetaStoreClient``
then authenticates with it (``HadoopThriftAuthBridge.Client.createClientTransport(...,
"DIGEST", ...)``). Issuing, renewing and cancelling tokens is ``delegation_tokens``.

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
password) (Hive's ``SaslClientCallbackHandler``); ``digest_secret`` is what the server keeps
of them. No database, no Thrift: the CLI writes and reads credentials files with this module.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import tempfile
from dataclasses import dataclass
from typing import Iterable

KIND = "HIVE_DELEGATION_TOKEN"
IDENTIFIER_VERSION = 0
CREDENTIALS_MAGIC = b"HDTS"
CREDENTIALS_FORMAT_WRITABLE = 0
DEFAULT_ALIAS = "hive.metastore.delegation.token"
MAX_INT32 = 2 ** 31 - 1


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
        if not -(2 ** 31) <= value <= MAX_INT32:
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
