"""Calls from Spark's Python workers to the driver's coordinator (see ``_driver``)."""

from __future__ import annotations

import socket
from multiprocessing.connection import Client

from ._metastore import HiveAcidError, WriteConflictError


class RemoteError(HiveAcidError):
    """The driver's coordinator failed a request (its exception type and message)."""


def nodelay(conn) -> None:
    """TCP_NODELAY on a ``multiprocessing.connection`` socket. Without it every call waited
    about 40 ms: the client's last handshake message and its request are two small writes
    in a row, so Nagle's algorithm held the request back until the driver's delayed ACK of
    the first one."""
    try:
        s = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, ValueError):
        return
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        pass
    finally:
        s.close()         # the duplicate descriptor only


def rpc(address, authkey: bytes, method: str, *args):
    conn = Client(tuple(address), authkey=authkey)
    try:
        nodelay(conn)
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
