"""Hive delegation tokens: issuing, renewing and cancelling them, and the DIGEST-MD5 look-up.

A delegation token lets a job that has no password or ticket (a Spark driver or executor,
a YARN container) authenticate to the metastore with SASL DIGEST-MD5. Someone who
authenticated with Kerberos (SASL GSSAPI) or a password (SASL PLAIN) calls
``get_delegation_token``; the string it returns is a Hadoop ``Token`` (formats in
``token_codec``). A token for another user is issued to a proxy user only
(``proxy_users``, Hadoop's ``hadoop.proxyuser.*``), as Hive's ``HadoopThriftAuthBridge``
does; owners and renewers are short names (``hadoop.security.auth_to_local``).

In DIGEST-MD5 the client's user name is base64(identifier) and its password base64(token
password), realm ``default`` (Hive's ``SaslClientCallbackHandler``). The server keeps only
what DIGEST-MD5 needs, ``H(username:realm:password)`` (RFC 2831's A1 prefix), not the
password itself, with the token's owner, renewer and expiry. Tokens expire a renew
interval after issue or renewal and never outlive their max date; cancelled tokens are
deleted.

The checks that need no database (who asks, is the string a token) run first
(``check_issue``, ``check_use``) and return a plain value; the methods that take a
connection then run inside the caller's transaction. No Thrift: the service layer maps the
errors to MetaException.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.security.token_codec import (KIND, MAX_INT32, Token, TokenIdentifier,
                                                 digest_secret, short_name)
from hms_txn.domain.security.proxy_users import ImpersonationRefused, ProxyUsers
from hms_txn.store.security_schema import delegation_tokens, next_delegation_token_id
from hms_txn.store.sql import reserve_ids

DIGEST_REALM = "default"           # Hive's SaslRpcServer.SASL_DEFAULT_REALM
PASSWORD_BYTES = 20
PLAIN, DIGEST, GSSAPI = "PLAIN", "DIGEST-MD5", "GSSAPI"


class DelegationTokenError(MetastoreError):
    """A delegation token call was refused, or a token cannot be used (MetaException)."""


class InvalidToken(DelegationTokenError):
    """The token is malformed, unknown, cancelled, expired or has a wrong password."""


@dataclass(frozen=True)
class Issue:
    """A ``get_delegation_token`` that passed the checks: the token to issue."""

    owner: str
    renewer: str
    now_ms: int
    password: bytes
    real_user: str = ""     # the proxy user who asked for ``owner``'s token (its principal)


@dataclass(frozen=True)
class TokenUse:
    """A ``renew_delegation_token`` / ``cancel_delegation_token`` that passed the checks:
    who asks and the token they presented."""

    caller: str
    token: Token
    ident: TokenIdentifier
    now_ms: int


@dataclass(frozen=True)
class TokenSecret:
    """What the DIGEST-MD5 server needs of one token."""

    owner: str             # the authenticated identity
    secret: bytes          # H(username:realm:password)
    sequence_number: int


class DelegationTokens:
    """The token rules: lifetimes, who may issue, renew and cancel, and the token rows."""

    def __init__(self, *, renew_interval: float = 86400.0, max_lifetime: float = 7 * 86400.0,
                 clock: Callable[[], float] = time.time,
                 short_name: Callable[[str], str] = short_name,
                 proxy_users: ProxyUsers | None = None):
        self.renew_interval_ms = int(renew_interval * 1000)
        self.max_lifetime_ms = int(max_lifetime * 1000)
        self.clock = clock
        self.short_name = short_name
        self.proxy_users = proxy_users or ProxyUsers({})

    @classmethod
    def from_config(cls, config: Any, **kwargs: Any) -> "DelegationTokens":
        return cls(renew_interval=config["hive.cluster.delegation.token.renew-interval"],
                   max_lifetime=config["hive.cluster.delegation.token.max-lifetime"],
                   proxy_users=ProxyUsers.from_config(config.raw), **kwargs)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------- checks (no database)

    def check_issue(self, owner: str | None, renewer: str | None, *, user: str | None,
                    mechanism: str | None, address: str | None = None,
                    principal: str | None = None) -> Issue:
        """``get_delegation_token`` by ``user`` (authenticated with ``mechanism`` as
        ``principal``, from ``address``)."""
        if user is None:
            raise DelegationTokenError(
                "get_delegation_token needs an authenticated connection: this metastore does "
                "not require SASL (set hive.metastore.sasl.enabled=true) or the client did not "
                "authenticate; connect with Kerberos or SASL PLAIN to obtain a delegation token")
        if mechanism not in (GSSAPI, PLAIN):
            raise DelegationTokenError(
                f"get_delegation_token: a connection authenticated with {mechanism} (a "
                f"delegation token) cannot obtain another delegation token; connect with "
                f"Kerberos or SASL PLAIN")
        owner = self._name("owner", owner) or user
        real_user = ""
        if owner != user:          # Hive compares short names, then asks the proxy rules
            try:
                self.proxy_users.authorize(user, owner, address, real_name=principal)
            except ImpersonationRefused as err:
                raise DelegationTokenError(str(err)) from None
            real_user = principal or user     # Hadoop records the real user's full name
        return Issue(owner=owner, renewer=self._name("renewer", renewer), now_ms=self._now_ms(),
                     password=secrets.token_bytes(PASSWORD_BYTES), real_user=real_user)

    def _name(self, what: str, name: str | None) -> str:
        name = (name or "").strip()
        try:
            return self.short_name(name) if name else ""
        except ValueError as err:          # no auth_to_local rule maps it
            raise DelegationTokenError(f"get_delegation_token: {what} {name}: {err}") from None

    def check_use(self, method: str, token_str: str, *, user: str | None) -> TokenUse:
        """``method`` (renew or cancel) of the token ``token_str`` by ``user``."""
        if user is None:
            raise DelegationTokenError(
                f"{method} needs an authenticated connection: this metastore does not require "
                f"SASL (set hive.metastore.sasl.enabled=true) or the client did not authenticate")
        try:
            token = Token.decode_url_string(token_str or "")
            ident = token.decode_identifier()
        except ValueError as err:
            raise InvalidToken(f"not a Hive delegation token string: {err}") from None
        if token.kind not in (KIND, ""):
            raise InvalidToken(f"token kind {token.kind!r} is not {KIND}")
        return TokenUse(caller=user, token=token, ident=ident, now_ms=self._now_ms())

    # ------------------------------------------------------- in the caller's transaction

    def issue(self, conn: Connection, request: Issue) -> Token:
        """A new token as ``request`` says."""
        now = request.now_ms
        # Expired tokens can never be used again: drop them as new ones are issued.
        conn.execute(delete(delegation_tokens).where(delegation_tokens.c.expiry_ms < now))
        seq = reserve_ids(conn, next_delegation_token_id, 1)
        if seq > MAX_INT32:
            raise DelegationTokenError("delegation token sequence numbers are exhausted")
        ident = TokenIdentifier(owner=request.owner, renewer=request.renewer,
                                real_user=request.real_user,
                                issue_date=now, max_date=now + self.max_lifetime_ms,
                                sequence_number=seq)
        token = Token(ident.to_bytes(), request.password)
        secret = digest_secret(token.sasl_username, DIGEST_REALM, token.sasl_password)
        conn.execute(delegation_tokens.insert().values(
            sequence_number=seq, identifier=token.sasl_username, owner=request.owner,
            renewer=request.renewer, real_user=request.real_user, issue_ms=now,
            max_date_ms=ident.max_date,
            expiry_ms=min(now + self.renew_interval_ms, ident.max_date),
            digest_secret=secret.hex()))
        return token

    def renew(self, conn: Connection, use: TokenUse) -> int:
        """The token's new expiry (ms since the epoch); only its renewer may renew it."""
        ident = use.ident
        row = _row(conn, use.token, ident)
        if not ident.renewer:
            raise DelegationTokenError(
                f"delegation token {ident.sequence_number} of {ident.owner} has no renewer "
                f"and cannot be renewed")
        if use.caller != ident.renewer:
            raise DelegationTokenError(
                f"user {use.caller!r} may not renew delegation token {ident.sequence_number} "
                f"of {ident.owner}: its renewer is {ident.renewer!r}")
        if row.expiry_ms < use.now_ms:
            raise InvalidToken(
                f"delegation token {ident.sequence_number} of {ident.owner} has expired")
        expiry = min(use.now_ms + self.renew_interval_ms, row.max_date_ms)
        conn.execute(update(delegation_tokens)
                     .where(delegation_tokens.c.sequence_number == ident.sequence_number)
                     .values(expiry_ms=expiry))
        return expiry

    @staticmethod
    def cancel(conn: Connection, use: TokenUse) -> None:
        """Delete the token; only its owner or renewer may."""
        ident = use.ident
        _row(conn, use.token, ident)
        if use.caller not in (ident.owner, ident.renewer):
            raise DelegationTokenError(
                f"user {use.caller!r} may not cancel delegation token {ident.sequence_number} "
                f"of {ident.owner}: only its owner or renewer may")
        conn.execute(delete(delegation_tokens)
                     .where(delegation_tokens.c.sequence_number == ident.sequence_number))

    def token_secret(self, conn: Connection, username: str) -> TokenSecret:
        """The secret of the token whose base64 identifier is ``username`` (a DIGEST-MD5 user
        name). Raises ``InvalidToken`` (with a reason for the client) when the token is not
        one of ours, was cancelled or has expired."""
        try:
            identifier = base64.b64decode(username.encode("ascii"), validate=True)
            ident = TokenIdentifier.from_bytes(identifier)
        except (ValueError, UnicodeEncodeError, binascii.Error):
            raise InvalidToken("the DIGEST-MD5 user name is not a Hive delegation token "
                               "identifier") from None
        row = conn.execute(select(delegation_tokens).where(
            delegation_tokens.c.sequence_number == ident.sequence_number)).first()
        label = f"delegation token {ident.sequence_number} of {ident.owner}"
        if row is None or not hmac.compare_digest(row.identifier, username):
            raise InvalidToken(f"{label} is not known to this metastore (cancelled, expired "
                               f"and purged, or never issued here)")
        if row.expiry_ms < self._now_ms():
            raise InvalidToken(f"{label} has expired (renew it before it expires, or obtain "
                               f"a new one)")
        return TokenSecret(owner=row.owner, secret=bytes.fromhex(row.digest_secret),
                           sequence_number=ident.sequence_number)


def _row(conn: Connection, token: Token, ident: TokenIdentifier):
    """The token's row, locked; raises InvalidToken unless ``token`` is that token."""
    row = conn.execute(select(delegation_tokens).where(
        delegation_tokens.c.sequence_number == ident.sequence_number).with_for_update()).first()
    label = f"delegation token {ident.sequence_number} of {ident.owner}"
    if row is None or not hmac.compare_digest(row.identifier, token.sasl_username):
        raise InvalidToken(f"{label} is not known to this metastore (cancelled, expired "
                           f"and purged, or never issued here)")
    secret = digest_secret(token.sasl_username, DIGEST_REALM, token.sasl_password)
    if not hmac.compare_digest(secret.hex(), row.digest_secret):
        raise InvalidToken(f"{label}: wrong token password")
    return row
