"""Calls from Spark's Python workers to the driver's coordinator (see ``_driver``)."""

from __future__ import annotations

from multiprocessing.connection import Client

from ._metastore import HiveAcidError, WriteConflictError


class RemoteError(HiveAcidError):
    """The driver's coordinator failed a request (its exception type and message)."""


def rpc(address, authkey: bytes, method: str, *args):
    conn = Client(tuple(address), authkey=authkey)
    try:
        conn.send((method, args))
        status, value = conn.recv()
    finally:
        conn.close()
    if status == "error":
        kind, msg = value
        if kind == "WriteConflictError":
            raise WriteConflictError(msg)
        if kind == "HiveAcidError":
            raise HiveAcidError(msg)
        raise RemoteError(f"{kind}: {msg}")
    return value
