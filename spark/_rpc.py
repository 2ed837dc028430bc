"""Calls from Spark's Python workers to the driver's coordinator (``_coordinator``): one
connection per call, the ``multiprocessing.connection`` key handshake both ways, then one
``(method, args)`` request and one ``("ok", value)`` / ``("error", (type, message))``
reply. The socket helpers here serve both ends."""

from __future__ import annotations

import socket
import struct
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

from ._errors import HiveAcidError, WriteConflictError


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


# Connecting to the coordinator and proving the key must be done within this time. A task
# whose packets to the driver are dropped (a firewall) would otherwise wait for the kernel's
# TCP connect timeout, about two minutes, before failing. The call itself is not bounded:
# some wait for locks.
CONNECT_TIMEOUT_S = 30.0


def set_timeout(conn, seconds: float) -> None:
    """Receive and send timeouts on a ``multiprocessing.connection`` socket (0: none). Its
    reads then fail with an OSError instead of waiting for ever."""
    s = socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    try:
        whole = int(seconds)
        tv = struct.pack("ll", whole, int((seconds - whole) * 1e6))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    finally:
        s.close()       # the duplicate descriptor only


def connect(address, authkey: bytes) -> Connection:
    """``multiprocessing.connection.Client(address, authkey)``, with connecting and the key
    handshake bounded by ``CONNECT_TIMEOUT_S``."""
    sock = socket.create_connection(tuple(address), timeout=CONNECT_TIMEOUT_S)
    sock.settimeout(None)      # a Connection reads the descriptor itself: blocking again
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)     # see nodelay
    conn = Connection(sock.detach())
    try:
        set_timeout(conn, CONNECT_TIMEOUT_S)
        answer_challenge(conn, authkey)
        deliver_challenge(conn, authkey)
        set_timeout(conn, 0)
    except BaseException:
        conn.close()
        raise
    return conn


def rpc(address, authkey: bytes, method: str, *args):
    conn = connect(address, authkey)
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


def quiet_rpc(*args) -> None:
    """``rpc`` for a report the driver can do without: a failure is ignored."""
    try:
        rpc(*args)
    except Exception:
        pass
