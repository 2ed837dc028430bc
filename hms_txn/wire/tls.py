"""TLS for the metastore's Thrift connections, as Hive's metastore offers it.

Hive turns TLS on with ``hive.metastore.use.SSL`` and reads Java key stores: the server's
certificate and key from ``hive.metastore.keystore.path`` (``.password``), the client's
trusted certificates from ``hive.metastore.truststore.path`` (``.password``). We read the
same keys, with PEM files where Java has key stores (docs/security.md has the mapping):

* server (``TlsServer``): ``hive.metastore.keystore.path`` is a PEM file with the
  certificate chain, followed by the private key unless ``hms_txn.ssl.key.path`` names a
  separate key file; ``hive.metastore.keystore.password`` decrypts an encrypted key.
  ``hms_txn.ssl.client.ca.path`` (PEM CA certificates) makes the server require a client
  certificate signed by one of them (Hive has no such option).
* clients (``TlsClient``): ``hive.metastore.truststore.path`` is a PEM CA bundle, or the
  JKS truststore a Java client of the same configuration uses (its trusted certificate
  entries are read; ``.password``, when given, checks the store's integrity); without it
  the system's CAs verify the server. The host name in the URI must match the certificate.
  ``hms_txn.ssl.client.certificate.path`` (``hms_txn.ssl.client.key.path``) is the
  certificate a client presents to a server that requires one.

TLS 1.2 is the lowest version either side accepts (Python's default).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ssl
import struct
from dataclasses import dataclass

from hms_txn.common.config import Config

# The first byte of every TLS connection: a handshake record (the ClientHello).
TLS_HANDSHAKE_RECORD = 0x16


class TlsSetupError(ValueError):
    """A certificate, key or trust store cannot be loaded; the message names the file."""


@dataclass(frozen=True)
class TlsServer:
    certificate: str
    key: str | None = None
    password: str | None = None
    client_ca: str | None = None

    @classmethod
    def from_config(cls, config: Config) -> "TlsServer | None":
        """None unless ``hive.metastore.use.SSL`` is on."""
        if not config["hive.metastore.use.SSL"]:
            return None
        certificate = config["hive.metastore.keystore.path"]
        if not certificate:
            raise TlsSetupError("hive.metastore.use.SSL=true needs hive.metastore.keystore.path "
                                "(a PEM file with the server's certificate and key)")
        return cls(certificate, config["hms_txn.ssl.key.path"],
                   config["hive.metastore.keystore.password"], config["hms_txn.ssl.client.ca.path"])

    def context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        _load_chain(ctx, self.certificate, self.key, self.password,
                    "hive.metastore.keystore.path")
        if self.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            _load_trust(ctx, self.client_ca, None, "hms_txn.ssl.client.ca.path")
        return ctx


@dataclass(frozen=True)
class TlsClient:
    truststore: str | None = None
    truststore_password: str | None = None
    certificate: str | None = None
    key: str | None = None
    # the key that named the trust store, for messages
    truststore_key: str = "hive.metastore.truststore.path"

    @classmethod
    def from_config(cls, config: Config) -> "TlsClient | None":
        """None unless ``hive.metastore.use.SSL`` is on."""
        if not config["hive.metastore.use.SSL"]:
            return None
        return cls(config["hive.metastore.truststore.path"],
                   config["hive.metastore.truststore.password"],
                   config["hms_txn.ssl.client.certificate.path"],
                   config["hms_txn.ssl.client.key.path"])

    def context(self) -> ssl.SSLContext:
        return client_context(self)


@functools.lru_cache(maxsize=16)
def client_context(tls: TlsClient) -> ssl.SSLContext:
    """One context per client TLS setting (loading the trust store once)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)    # verifies the chain and the host name
    if tls.truststore:
        _load_trust(ctx, tls.truststore, tls.truststore_password, tls.truststore_key)
    else:
        ctx.load_default_certs()
    if tls.certificate:
        _load_chain(ctx, tls.certificate, tls.key, None, "hms_txn.ssl.client.certificate.path")
    return ctx


def _load_chain(ctx: ssl.SSLContext, certificate: str, key: str | None, password: str | None,
                what: str) -> None:
    try:
        ctx.load_cert_chain(certificate, key or None, password or None)
    except (OSError, ssl.SSLError) as err:
        raise TlsSetupError(f"{what}: cannot load the certificate and key from {certificate}"
                            f"{' and ' + key if key else ''}: {_reason(err)}") from None


def _load_trust(ctx: ssl.SSLContext, path: str, password: str | None, what: str) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] == JKS_MAGIC:
            ctx.load_verify_locations(cadata=b"".join(jks_certificates(data, password)))
        else:
            ctx.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError, ValueError) as err:
        raise TlsSetupError(f"{what}: cannot load trusted certificates from {path} (PEM or "
                            f"JKS): {_reason(err)}") from None


def _reason(err: Exception) -> str:
    return getattr(err, "strerror", None) or getattr(err, "reason", None) or str(err)


# ---------------------------------------------------------------------- JKS trust stores

JKS_MAGIC = b"\xfe\xed\xfe\xed"
_PRIVATE_KEY_ENTRY, _TRUSTED_CERT_ENTRY = 1, 2


def jks_certificates(data: bytes, password: str | None = None) -> list[bytes]:
    """The DER certificates of a Java KeyStore (JKS, as ``keytool -storetype JKS`` writes
    it): its trusted certificate entries, and the chains of its key entries. With a
    password, the store's SHA-1 integrity digest is checked as Java's ``KeyStore.load``
    does; without one it is not (Java skips it too). ValueError for anything else."""
    if data[:4] != JKS_MAGIC or len(data) < 32:
        raise ValueError("not a JKS key store")
    body, digest = data[:-20], data[-20:]
    if password is not None:
        expected = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite"
                                + body).digest()
        if not hmac.compare_digest(expected, digest):
            raise ValueError("the key store was tampered with, or the password is wrong")
    pos = 4

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(body):
            raise ValueError("truncated JKS key store")
        pos += n
        return body[pos - n:pos]

    def u32() -> int:
        return struct.unpack(">I", take(4))[0]

    def utf() -> str:
        return take(struct.unpack(">H", take(2))[0]).decode("utf-8", "replace")

    def cert() -> bytes:
        kind = utf()
        der = take(u32())
        if kind != "X.509":
            raise ValueError(f"unsupported certificate type {kind!r}")
        return der

    version, count = u32(), u32()
    if version not in (1, 2):
        raise ValueError(f"unsupported JKS version {version}")
    out = []
    for _ in range(count):
        tag = u32()
        utf()                 # alias
        take(8)               # creation date
        if tag == _TRUSTED_CERT_ENTRY:
            out.append(cert() if version == 2 else take(u32()))
        elif tag == _PRIVATE_KEY_ENTRY:
            take(u32())       # the protected key
            out.extend(cert() if version == 2 else take(u32()) for _ in range(u32()))
        else:
            raise ValueError(f"unknown JKS entry type {tag}")
    if not out:
        raise ValueError("the key store holds no certificate")
    return out
