"""Per-connection state visible to handler code (one thread serves one connection)."""

from __future__ import annotations

import threading

from hms_txn.common import logs

_local = threading.local()


def set_authenticated_user(user: str | None, mechanism: str | None = None, *,
                           principal: str | None = None, address: str | None = None) -> None:
    _local.user = user
    _local.mechanism = mechanism if user is not None else None
    _local.principal = principal if user is not None else None
    _local.address = address if user is not None else None
    logs.set_connection(user=user)


def authenticated_user() -> str | None:
    """The SASL-authenticated user of the current connection, or None without SASL: the
    short name (``hadoop.security.auth_to_local``) of a Kerberos principal.

    With DIGEST-MD5 this is the owner of the delegation token the client presented."""
    return getattr(_local, "user", None)


def authentication_mechanism() -> str | None:
    """``"PLAIN"``, ``"DIGEST-MD5"`` or ``"GSSAPI"`` for an authenticated connection, else
    None."""
    return getattr(_local, "mechanism", None)


def authenticated_principal() -> str | None:
    """The full Kerberos principal of a GSSAPI connection (``alice@EXAMPLE.COM``), else None."""
    return getattr(_local, "principal", None)


def remote_address() -> str | None:
    """The client's IP address, on an authenticated connection (what Hadoop's proxy-user
    ``hosts`` lists are checked against)."""
    return getattr(_local, "address", None)


def identity(claimed: str | None) -> str | None:
    """The user to record on a transaction or lock: with SASL on, the authenticated user,
    whatever the client claims (a client must not act as somebody else); without SASL the
    client's own word is all there is."""
    user = authenticated_user()
    return user if user is not None else claimed
