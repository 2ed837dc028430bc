"""Who may call the Iceberg REST catalog (``metastore.catalog.servlet.auth``, Hive 4.1's
``ServletSecurity``), TLS with the server's certificate, and the start-up checks of
``hms-txn serve`` (issue 43).

``none`` is what the other REST test modules run with (their requests carry no credentials);
here ``simple`` (the ``x-actor-username`` header; none: 401) and ``jwt`` (a bearer token
signed by a key of a JSON Web Key Set this test serves over HTTP on loopback; anything else:
401), the latter over TLS.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from pyiceberg.exceptions import UnauthorizedError

from hms_txn.common.config import ConfigError, load
from hms_txn.server import iceberg_rest
from tests.support.certs import make_certs
from tests.support.iceberg_rest import rest_catalog, rest_server
from tests.support.servers import ServerProcess


def _key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def keys():
    return {"good": _key(), "other": _key()}


@pytest.fixture(scope="module")
def jwks_url(keys):
    """A JSON Web Key Set with the "good" key (kid k1), served on loopback."""
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["good"].public_key()))
    body = json.dumps({"keys": [dict(public, kid="k1", alg="RS256", use="sig")]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/jwks.json"
    httpd.shutdown()


def token(keys, key="good", kid="k1", **claims) -> str:
    claims.setdefault("sub", "alice")
    claims.setdefault("exp", int(time.time()) + 600)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, keys[key], algorithm="RS256", headers={"kid": kid})


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(str(tmp_path_factory.mktemp("rest-certs")))


@pytest.fixture(scope="module")
def jwt_server(tmp_path_factory, jwks_url, certs):
    srv = rest_server(str(tmp_path_factory.mktemp("rest-jwt")), {
        "metastore.catalog.servlet.auth": "jwt",
        "metastore.authentication.jwt.jwks.url": jwks_url,
        "hive.metastore.use.SSL": "true", "hive.metastore.keystore.path": certs.server})
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def simple_server(tmp_path_factory):
    srv = rest_server(str(tmp_path_factory.mktemp("rest-simple")),
                      {"metastore.catalog.servlet.auth": "simple"})
    yield srv
    srv.stop()


def test_simple_auth_takes_the_user_from_x_actor_username(simple_server):
    base = simple_server.server.rest_address
    refused = requests.get(f"{base}/v1/config")
    assert refused.status_code == 401
    assert refused.json()["error"] == {
        "message": "Authentication error: User header x-actor-username missing in request",
        "type": "NotAuthorizedException", "code": 401}
    with pytest.raises(UnauthorizedError):
        rest_catalog(simple_server)
    catalog = rest_catalog(simple_server, **{"header.x-actor-username": "bob"})
    catalog.create_namespace("owned")
    client = simple_server.client()
    try:
        assert client.get_database("owned").ownerName == "bob"
    finally:
        client.close()


def test_jwt_auth_over_tls(jwt_server, keys, certs, monkeypatch):
    # requests lets these variables override a session's own CA bundle (pyiceberg's ssl.cabundle)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    base = jwt_server.server.rest_address
    assert base.startswith("https://127.0.0.1:")

    def status(headers=None) -> int:
        return requests.get(f"{base}/v1/config", headers=headers or {}, verify=certs.ca).status_code

    def bearer(value: str) -> dict:
        return {"Authorization": f"Bearer {value}"}

    assert status() == 401
    assert status(bearer(token(keys))) == 200
    assert status(bearer(token(keys, key="other"))) == 401            # not the JWKS's key
    assert status(bearer(token(keys, kid="unknown"))) == 401
    assert status(bearer(token(keys, exp=int(time.time()) - 60))) == 401   # expired
    assert status(bearer(token(keys, exp=None))) == 401               # no expiry
    assert status(bearer(token(keys, sub=None))) == 401               # no user
    assert status({"Authorization": "Basic YWxpY2U6eA=="}) == 401
    # pyiceberg with the token: changes are made as its subject.
    catalog = rest_catalog(jwt_server, token=token(keys), **{"ssl": {"cabundle": certs.ca}})
    catalog.create_namespace("jwt_owned")
    owner = catalog.load_namespace_properties("jwt_owned")["hive.metastore.database.owner"]
    assert owner == "alice"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{base}/v1/config", verify=certs.other_ca)


def conf(**overrides: str):
    return load(None, {"metastore.catalog.servlet.port": "0", **overrides})


def test_serve_refuses_what_cannot_run():
    with pytest.raises(ConfigError, match="needs metastore.authentication.jwt.jwks.url"):
        iceberg_rest.check(conf(), extension_mode=False)       # jwt is Hive's default
    with pytest.raises(ConfigError, match="extension mode"):
        iceberg_rest.check(conf(**{"metastore.catalog.servlet.auth": "none"}),
                           extension_mode=True)
    with pytest.raises(ConfigError, match="a URL path"):
        iceberg_rest.check(conf(**{"metastore.catalog.servlet.auth": "none",
                                   "metastore.iceberg.catalog.servlet.path": "/"}),
                           extension_mode=False)
    with pytest.raises(ConfigError, match="oauth2 is not supported"):
        conf(**{"metastore.catalog.servlet.auth": "oauth2"})
    with pytest.raises(ConfigError, match="-1 .off."):
        conf(**{"metastore.catalog.servlet.port": "-2"})
    off = load(None, {})
    assert not iceberg_rest.enabled(off)
    iceberg_rest.check(off, extension_mode=True)        # off: nothing to check


def test_serve_names_the_extra_when_its_packages_are_missing(monkeypatch):
    monkeypatch.setitem(iceberg_rest.PACKAGES, "no_such_module_for_rest", "fastapi")
    with pytest.raises(ConfigError) as err:
        iceberg_rest.check(conf(**{"metastore.catalog.servlet.auth": "none"}),
                           extension_mode=False)
    assert "pip install 'hms-txn[rest]'" in str(err.value)
    assert "(fastapi)" in str(err.value)


def test_serve_prints_the_rest_address_after_the_thrift_one(tmp_path):
    server = ServerProcess(str(tmp_path / "serve"), {"metastore.catalog.servlet.port": "0",
                                                     "metastore.catalog.servlet.auth": "none"})
    try:
        line = server.proc.stdout.readline().decode().strip()
        assert line.startswith("hms-txn Iceberg REST catalog on http://127.0.0.1:"), line
        assert line.endswith("/iceberg")
        answer = requests.get(line.rsplit(" ", 1)[1] + "/v1/namespaces").json()
        assert ["default"] in answer["namespaces"]
    finally:
        assert server.stop() == 0
