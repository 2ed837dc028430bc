"""The driver's coordinator: the endpoint Spark's Python workers and executor tasks call.

Spark runs a data source's planning and commit in short-lived Python workers and its tasks
on executors; the transactions and read locks they work on live in the driver process
(``_driver``). The coordinator is a ``multiprocessing.connection`` listener with a random
auth key: each connection is handled in its own thread, proves the key (both ways, within
``HANDSHAKE_TIMEOUT_S``), then sends requests ``(method, args)`` that are answered by the
handler's ``rpc_<method>``; an exception is returned as ``("error", (type, message))``.

Where it listens, and the address tasks call, come from the SparkConf
(:func:`coordinator_hosts`), and so does its port (:func:`coordinator_ports`: any free one by
default, or a fixed port or range that a firewall between executors and the driver can
open, as ``spark.driver.port`` fixes Spark's own).
"""

from __future__ import annotations

import logging
import socket
import threading
from multiprocessing.connection import Listener, answer_challenge, deliver_challenge
from typing import Optional, Tuple

from ._errors import HiveAcidError
from ._rpc import nodelay, set_timeout

log = logging.getLogger("spark.hive_acid")

COORDINATOR_HOST = "spark.hive_acid.coordinator.host"
COORDINATOR_PORT = "spark.hive_acid.coordinator.port"

# A connection to the coordinator must prove it holds the key within this time. The
# handshake runs in the connection's own thread: a peer that connects and stays silent (a
# port scanner, once the coordinator listens on a network address) holds only that thread.
HANDSHAKE_TIMEOUT_S = 10.0


def coordinator_hosts(conf) -> Tuple[str, str]:
    """(address the driver's coordinator listens on, address its tasks call), from a
    SparkConf (anything with ``get(key, default)``; SparkContext settings, fixed for the
    process).

    Executor tasks call the coordinator (task attempts, read progress), so on a cluster it
    must listen where executors can reach the driver: ``spark.driver.bindAddress`` (else
    ``spark.driver.host``), and tasks call ``spark.driver.host``, as Spark's own executors
    do. With a ``local`` master every task runs on this host: loopback. ``COORDINATOR_HOST``
    overrides the listening address (0.0.0.0: every interface, tasks then call
    ``spark.driver.host``)."""
    def setting(key: str) -> str:
        return (conf.get(key, None) or "").strip()

    driver_host = setting("spark.driver.host")
    explicit = setting(COORDINATOR_HOST)
    if explicit:
        bind = explicit
        advertised = driver_host if explicit == "0.0.0.0" else explicit
    elif (setting("spark.master") or "local").startswith("local"):
        return "127.0.0.1", "127.0.0.1"
    else:
        bind = setting("spark.driver.bindAddress") or driver_host or "0.0.0.0"
        advertised = driver_host
    return bind, advertised or socket.getfqdn()


def coordinator_ports(conf) -> Tuple[int, int]:
    """(first, last) port the coordinator may listen on, from ``COORDINATOR_PORT`` in a
    SparkConf (as :func:`coordinator_hosts`): unset or ``0``: any free port, ``(0, 0)``;
    ``40100``: that port; ``40100-40115``: the first free one of the range (one process
    runs a coordinator per metastore it uses, so several need a range)."""
    raw = (conf.get(COORDINATOR_PORT, None) or "").strip()
    if not raw:
        return 0, 0
    first, sep, last = raw.partition("-")
    try:
        lo, hi = int(first), int(last if sep else first)
    except ValueError:
        lo = hi = -1
    if not (0 <= lo <= hi <= 65535) or (sep and lo == 0):
        raise HiveAcidError(f"{COORDINATOR_PORT}={raw!r}: expected a port (40100), a range of "
                            f"ports (40100-40115) or 0 (any free port)")
    return lo, hi


def _listen(host: str, ports: Tuple[int, int]) -> Listener:
    """A listener on ``host`` at the first free port of ``ports`` (``(0, 0)``: any)."""
    lo, hi = ports
    last_error: Optional[OSError] = None
    for port in range(lo, hi + 1):
        try:
            return Listener((host, port))
        except OSError as err:        # taken (EADDRINUSE); or the address is not ours
            last_error = err
    where = f"port {lo}" if lo == hi else f"ports {lo}-{hi}"
    raise HiveAcidError(f"the hive_acid coordinator cannot listen on {host} at {where} "
                        f"({last_error}): free one or widen {COORDINATOR_PORT}")


class Coordinator:
    """The listener thread and a thread per connection, answering with ``handler``'s
    ``rpc_<method>`` methods."""

    def __init__(self, handler, authkey: bytes, bind_host: str,
                 advertised_host: Optional[str], ports: Tuple[int, int] = (0, 0)):
        """``bind_host``: where to listen; ``advertised_host``: the address tasks are told
        to call, by default ``bind_host`` (it must be given when that is a wildcard);
        ``ports``: the range to listen in (:func:`coordinator_ports`)."""
        if not advertised_host and bind_host in ("", "0.0.0.0"):
            raise ValueError("a coordinator bound to a wildcard address needs the address "
                             "tasks should call (advertised_host)")
        self.handler = handler
        self.authkey = authkey
        self._stop = threading.Event()
        # No authkey here: Listener would run the key handshake inside accept(), in the one
        # accepting thread (see HANDSHAKE_TIMEOUT_S).
        self.listener = _listen(bind_host, ports)
        self.address = (advertised_host or bind_host, self.listener.address[1])
        threading.Thread(target=self._serve, name="hive-acid-coordinator", daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        try:
            self.listener.close()
        except Exception:
            pass

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn = self.listener.accept()
            except Exception:
                if self._stop.is_set():
                    return
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            if not self._authenticate(conn):
                return
            nodelay(conn)
            while True:
                try:
                    method, args = conn.recv()
                except EOFError:
                    return
                try:
                    result = ("ok", getattr(self.handler, "rpc_" + method)(*args))
                except Exception as e:
                    log.debug("rpc %s failed", method, exc_info=True)
                    result = ("error", (type(e).__name__, str(e)))
                conn.send(result)
        finally:
            conn.close()

    def _authenticate(self, conn) -> bool:
        """The key handshake of ``multiprocessing.connection`` (what ``Listener(authkey=)``
        runs in accept), both ways, bounded by ``HANDSHAKE_TIMEOUT_S``."""
        try:
            set_timeout(conn, HANDSHAKE_TIMEOUT_S)
            deliver_challenge(conn, self.authkey)
            answer_challenge(conn, self.authkey)
            set_timeout(conn, 0)
            return True
        except Exception as e:      # a wrong key, a silent or vanished peer
            log.warning("hive_acid coordinator: refused a connection: %s",
                        type(e).__name__ if isinstance(e, OSError) else e)
            return False
