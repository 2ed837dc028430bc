"""Per-connection state visible to handler code (one thread serves one connection)."""

from __future__ import annotations

import threading

_local = threading.local()


def set_authenticated_user(user: str | None) -> None:
    _local.user = user


def authenticated_user() -> str | None:
    """The SASL-authenticated user of the current connection, or None without SASL."""
    return getattr(_local, "user", None)
