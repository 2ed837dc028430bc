"""Who is calling the Iceberg REST catalog (``metastore.catalog.servlet.auth``), as Hive 4.1's
``ServletSecurity`` decides it:

* ``none``: nobody is checked; changes are made as the server's own user.
* ``simple``: the ``x-actor-username`` header names the user (trusted as sent: for a
  catalog behind a proxy that sets it); a request without it is refused (401).
* ``jwt``: an ``Authorization: Bearer`` JSON Web Token signed by a key of the JSON Web Key
  Set(s) at ``metastore.authentication.jwt.jwks.url`` (comma-separated; fetched, cached, and
  fetched again for a key id not seen yet), not expired; the user is its ``sub`` claim.
  Anything else is refused (401).
"""

from __future__ import annotations

import getpass
import logging
from typing import Callable, Mapping

from hms_txn.common.config import Config, ConfigError
from hms_txn.rest.errors import IcebergError

log = logging.getLogger("hms_txn.rest")

USER_HEADER = "x-actor-username"
# Asymmetric signatures only: a JWKS publishes public keys.
_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
               "ES512", "EdDSA"]

Authenticator = Callable[[Mapping[str, str]], str]


def refused(reason: str) -> IcebergError:
    return IcebergError(401, "NotAuthorizedException", f"Authentication error: {reason}")


def authenticator(config: Config) -> Authenticator:
    """The configured check: headers (lower-case names) -> user, or IcebergError 401."""
    mode = config["metastore.catalog.servlet.auth"]
    if mode == "none":
        user = getpass.getuser()
        return lambda _headers: user
    if mode == "simple":
        return _simple
    urls = [u.strip() for u in (config["metastore.authentication.jwt.jwks.url"] or "").split(",")
            if u.strip()]
    if not urls:
        raise ConfigError(f"{config.source}: metastore.catalog.servlet.auth=jwt (the default) "
                          f"needs metastore.authentication.jwt.jwks.url; or set "
                          f"metastore.catalog.servlet.auth to simple or none")
    return JwtAuthenticator(urls)


def _simple(headers: Mapping[str, str]) -> str:
    user = headers.get(USER_HEADER)
    if not user:
        raise refused(f"User header {USER_HEADER} missing in request")
    return user


class JwtAuthenticator:
    """Bearer tokens checked against JSON Web Key Sets."""

    def __init__(self, urls: list[str]):
        import jwt
        self.jwt = jwt
        self.clients = [jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=10)
                        for url in urls]

    def __call__(self, headers: Mapping[str, str]) -> str:
        scheme, _, token = (headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise refused("Couldn't find bearer token in the auth header in the request")
        token = token.strip()
        problems = []
        for client in self.clients:
            try:
                key = client.get_signing_key_from_jwt(token)
                claims = self.jwt.decode(token, key.key, algorithms=_ALGORITHMS,
                                         options={"require": ["exp", "sub"],
                                                  "verify_aud": False})
            except (self.jwt.PyJWTError, ValueError) as err:
                problems.append(str(err))
                continue
            user = claims.get("sub")
            if isinstance(user, str) and user:
                return user
            problems.append("the token has no user (sub claim)")
        log.info("REST request refused: JWT not valid: %s", "; ".join(problems))
        raise refused("Failed to validate JWT from Bearer token in Authentication header")
