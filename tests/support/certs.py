"""Certificates for the TLS tests, made by the tests with openssl: a CA, a server
certificate for localhost/127.0.0.1 signed by it, a client certificate signed by it, an
untrusted CA, and (with the JDK's keytool) a JKS truststore holding the CA, as a Java
client's hive.metastore.truststore.path."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from tests.support.requirements import require

JKS_PASSWORD = "changeit"


@dataclass(frozen=True)
class Certs:
    ca: str               # PEM CA certificate
    server: str           # PEM server certificate (chain) followed by its key
    server_cert: str      # the same certificate alone
    server_key: str       # and its key alone
    client: str           # PEM client certificate followed by its key
    other_ca: str         # a CA that signed nothing here
    directory: str

    def truststore_jks(self) -> str:
        """The CA as a JKS truststore (password JKS_PASSWORD), made with keytool."""
        path = os.path.join(self.directory, "truststore.jks")
        if not os.path.exists(path):
            require(shutil.which("keytool") is not None, "keytool (a JDK) is not installed")
            _run("keytool", "-importcert", "-noprompt", "-alias", "hms-ca", "-file", self.ca,
                 "-keystore", path, "-storetype", "JKS", "-storepass", JKS_PASSWORD)
        return path


def _run(*args: str) -> None:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{args[0]} failed: {proc.stderr}"


def _ca(d: str, name: str) -> tuple[str, str]:
    key, cert = os.path.join(d, f"{name}.key"), os.path.join(d, f"{name}.pem")
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
         cert, "-days", "2", "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def _leaf(d: str, name: str, ca: tuple[str, str], ext: str) -> tuple[str, str]:
    key, csr, cert = (os.path.join(d, f"{name}.{x}") for x in ("key", "csr", "crt"))
    extfile = os.path.join(d, f"{name}.ext")
    with open(extfile, "w") as f:
        f.write(ext)
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
         "-subj", f"/CN={name}")
    _run("openssl", "x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1],
         "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", extfile)
    return cert, key


def _concat(path: str, *parts: str) -> str:
    with open(path, "w") as out:
        for part in parts:
            with open(part) as f:
                out.write(f.read())
    return path


def make_certs(directory: str) -> Certs:
    require(shutil.which("openssl") is not None, "openssl is not installed")
    os.makedirs(directory, exist_ok=True)
    ca = _ca(directory, "test-ca")
    other = _ca(directory, "other-ca")
    server = _leaf(directory, "localhost", ca,
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client = _leaf(directory, "client", ca, "extendedKeyUsage=clientAuth\n")
    return Certs(ca=ca[0], server=_concat(os.path.join(directory, "server.pem"), *server),
                 server_cert=server[0], server_key=server[1],
                 client=_concat(os.path.join(directory, "client.pem"), *client),
                 other_ca=other[0], directory=directory)
