"""Per-connection state visible to handler code (one thread serves one connection)."""

from __future__ import annotations

import threading

from hms_txn.common import logs

_local = threading.local()


def set_authenticated_user(user: str | None, mechanism: str | None = None) -> None:
    _local.user = user
    _local.mechanism = mechanism if user is not None else None
    logs.set_connection(user=user)


def authenticated_user() -> str | None:
    """The SASL-authenticated user of the current connection, or None without SASL.

    With DIGEST-MD5 this is the owner of the delegation token the client presented."""
    return getattr(_local, "user", None)


def authentication_mechanism() -> str | None:
    """``"PLAIN"`` or ``"DIGEST-MD5"`` for an authenticated connection, else None."""
    return getattr(_local, "mechanism", None)


def identity(claimed: str | None) -> str | None:
    """The user to record on a transaction or lock: with SASL on, the authenticated user,
    whatever the client claims (a client must not act as somebody else); without SASL the
    client's own word is all there is."""
    user = authenticated_user()
    return user if user is not None else claimed
