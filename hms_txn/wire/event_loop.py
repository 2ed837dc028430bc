"""The event-loop server: one thread serving every client connection's transaction calls.

With a thread per connection, a busy server spends much of its time switching threads:
each SQLite statement releases the interpreter lock, another connection thread takes it,
and the thread committing the group waits to get it back (docs/benchmarks-history.md: half
of the CPU at 16 clients going to context switches). Here one thread waits on every
connection at once, reads the calls that have arrived, runs all the transaction calls
among them in one database transaction (a SAVEPOINT per call, one fsync for all), and only then writes their answers, so an answer still means "committed and
durable". Which calls are transaction calls is the service layer's word
(``CallRouter.route``: ``Route.BATCH``), as is the unit of work around them
(``CallRouter.batch``). The cheap reads it routes ``Route.INLINE`` (a table or database,
mostly answered from the metadata cache) run in the loop too, outside any batch. Other calls (catalog calls,
which can run long) are handed, with their connection, to a pool thread that serves that
one call the classic way and gives the connection back: the hand-over costs ~0.1 ms, too
much for a cached get_table but nothing for a listing of partitions. The loop never waits
for SQLite's writer: when a pool thread holds it (a catalog write of a thousand partitions
takes a while), the batch goes to a pool thread that waits for it, and the loop goes on
serving everything else.

Used for the embedded default (SQLite, unframed binary protocol, no SASL); other set-ups
keep a thread per connection (``hms_txn.server.txn.loop`` turns it off).
"""

from __future__ import annotations

import enum
import logging
import os
import selectors
import socket
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, ContextManager, Protocol, Sequence

from thrift.Thrift import TMessageType
from thrift.transport import TTransport

from hms_txn.wire.dispatch import Dispatcher
from hms_txn.wire.framing import (CallRunner, Framer, Header, Incomplete, PrefixedSocket,
                                  error_answer)
from hms_txn.wire.sasl import begins_handshake
from hms_txn.wire.session import set_authenticated_user

log = logging.getLogger(__name__)

_RECV = 65536


class Route(enum.Enum):
    """How the loop runs a call (the service layer declares each method's route)."""
    BATCH = "batch"      # a short transaction call: those ready together share a transaction
    INLINE = "inline"    # a read bounded by one object, mostly cached: answered in the loop
    POOL = "pool"        # anything else: a pool thread serves it


class BatchBusy(Exception):
    """``CallRouter.batch(wait=False)``: another thread holds the database's writer; the
    batch did not start."""


class CallRouter(Protocol):
    """What the loop asks the service layer (``hms_txn.service.handler.ServiceRouter``)."""

    def route(self, method: str) -> Route: ...

    def batch(self, methods: Sequence[str], *, wait: bool) -> ContextManager[None]:
        """One unit of work around the calls of ``methods`` run inside the block: their
        answers may go out only once it has exited without an error."""


class _Conn:
    __slots__ = ("sock", "peer", "inbuf", "outbuf", "last_active", "away", "writing", "closed")

    def __init__(self, sock: socket.socket, peer: Any):
        self.sock = sock
        self.peer = peer
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.last_active = time.monotonic()
        self.away = False        # a pool thread is serving a call of this connection
        self.writing = False     # registered for EVENT_WRITE (an answer did not fit)
        self.closed = False


class CallLoop:
    def __init__(self, dispatcher: Dispatcher, router: CallRouter, protocol_factory: Any, *,
                 max_message: int, idle_timeout: float | None, pool_size: int,
                 on_close: Callable[[socket.socket], None], spin: float = 0.0,
                 refuse_sasl: Callable[[socket.socket, Any], None] | None = None):
        self.dispatcher = dispatcher
        self.router = router
        self.spin = spin
        self.protocol_factory = protocol_factory
        self.max_message = max_message
        self.idle_timeout = idle_timeout
        self.on_close = on_close
        # answers a SASL handshake (this server has no SASL) and closes the socket
        self.refuse_sasl = refuse_sasl
        self._framer = Framer(max_message)
        self._calls = CallRunner(dispatcher, max_message)
        self._sel = selectors.DefaultSelector()
        self._wake_lock = threading.Lock()      # the pipe is closed under it at stop
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._incoming: deque[tuple[_Conn, bytes | None]] = deque()
        self._conns: set[_Conn] = set()
        self._unread: set[_Conn] = set()     # data in inbuf not looked at since it arrived
        self._pool = ThreadPoolExecutor(max_workers=pool_size, thread_name_prefix="hms-call")
        self._away: dict[_Conn, Any] = {}            # connection -> its pool future
        self._away_done = threading.Condition()
        self._stopping = False
        self._served = False       # the last turn had something to do (see _wait)
        self._thread: threading.Thread | None = None
        self.batches = 0           # batches run, and the calls in them
        self.batched_calls = 0

    # -- life cycle ---------------------------------------------------------------------

    def start(self) -> "CallLoop":
        self._thread = threading.Thread(target=self._run, name="hms-txn-loop", daemon=True)
        self._thread.start()
        return self

    def counters(self) -> dict[str, int]:
        """For fb303 getCounters: batches run, and the calls in them (their ratio is the
        mean number of calls sharing one COMMIT)."""
        return {"hms_txn.loop.batches": self.batches,
                "hms_txn.loop.batched.calls": self.batched_calls,
                "hms_txn.loop.connections": len(self._conns)}

    def add(self, sock: socket.socket, peer: Any) -> None:
        """A new client connection (from the accept thread)."""
        self._incoming.append((_Conn(sock, peer), None))
        self._wake()

    def stop(self, timeout: float) -> None:
        self._stopping = True
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout)
        # Calls already running finish (the server shut the sockets' reads, so none waits
        # for a client), within the timeout; queued ones never start.
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        with self._away_done:
            for conn, future in list(self._away.items()):
                if future.cancelled():
                    del self._away[conn]
                    self._close_away(conn)
            while self._away and time.monotonic() < deadline:
                self._away_done.wait(deadline - time.monotonic())
        with self._wake_lock:
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_w = -1

    def _wake(self) -> None:
        with self._wake_lock:
            if self._wake_w < 0:
                return
            try:
                os.write(self._wake_w, b"x")
            except BlockingIOError:
                pass        # the pipe is full: the loop wakes anyway

    # -- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        set_authenticated_user(None)
        next_sweep = time.monotonic() + 1.0
        try:
            while not self._stopping:
                try:
                    self._turn()
                except Exception:   # a bug, not a client's doing: keep serving the others
                    log.exception("transaction loop: unexpected error")
                    time.sleep(0.01)
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + 1.0
                    self._close_idle(now)
        finally:
            for conn in list(self._conns):
                if not conn.away:
                    self._close(conn)
            self._sel.close()

    def _turn(self) -> None:
        events = self._sel.select(0) if self._unread else self._wait()
        self._served = bool(events)
        for key, mask in events:
            conn = key.data
            if conn is None:
                self._drain_wake()
                continue
            if mask & selectors.EVENT_WRITE and not conn.closed:
                self._send(conn)
            if mask & selectors.EVENT_READ and conn in self._conns:
                self._recv(conn)
        self._adopt()
        if self._unread:
            self._serve_ready()

    def _wait(self) -> list:
        """The next events. Right after serving, look for them without sleeping for up to
        ``spin`` seconds first: a client's next call often follows within a fraction of a
        millisecond, and a thread that went to sleep in epoll is woken by the kernel (an
        inter-processor interrupt, costly in a VM) ~0.05-0.1 ms later than one that kept
        looking. Not while a pool thread runs a call: it needs the interpreter lock."""
        if self.spin and self._served and not self._away:
            deadline = time.perf_counter() + self.spin
            while True:
                events = self._sel.select(0)
                if events or time.perf_counter() >= deadline:
                    break
            if events:
                return events
        return self._sel.select(1.0)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _adopt(self) -> None:
        """New connections, and connections back from a pool thread (with any bytes it read
        past its call)."""
        while self._incoming:
            conn, leftover = self._incoming.popleft()
            if conn.closed or conn.sock.fileno() < 0:
                continue
            conn.away = False
            conn.writing = False
            conn.sock.setblocking(False)
            if leftover:
                conn.inbuf += leftover
            if conn.inbuf:
                self._unread.add(conn)
            self._conns.add(conn)
            self._sel.register(conn.sock, selectors.EVENT_READ, conn)

    def _recv(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_RECV)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.inbuf += data
        conn.last_active = time.monotonic()
        self._unread.add(conn)

    def _serve_ready(self) -> None:
        """Frame what has arrived: transaction calls run now, as one batch; any other call
        goes to a pool thread with its connection."""
        ready: list[tuple[_Conn, Header, int]] = []
        for conn in list(self._unread):
            self._unread.discard(conn)
            # With an answer still going out, its next call waits (_send looks again).
            if conn.outbuf or conn not in self._conns or not conn.inbuf:
                continue
            try:
                header, route, size = self._frame(conn.inbuf)
            except Exception as err:
                if self.refuse_sasl is not None and begins_handshake(conn.inbuf):
                    self._send_away([conn], self._refuse_away, conn)
                    continue
                if not isinstance(err, Incomplete):
                    log.warning("closing connection from %s after a protocol error: %s",
                                conn.peer, err)
                    self._close(conn)
                elif len(conn.inbuf) > self.max_message:
                    log.warning("closing connection from %s: message over %d bytes",
                                conn.peer, self.max_message)
                    self._close(conn)
                continue
            if route is Route.POOL:
                self._hand_off(conn)
            elif route is Route.BATCH:
                ready.append((conn, header, size))
            else:
                self._answer(conn, self._process(conn, header, size, self._calls))
        if ready:
            self._run_batch(ready)

    def _frame(self, data: bytearray) -> tuple[Header, Route, int]:
        """(the message header, the call's route, the size of the whole message); size -1
        for a call a pool thread serves (it need not have arrived whole)."""
        header = self._framer.header(data)
        route = self.router.route(header[0]) if header[1] == TMessageType.CALL else Route.POOL
        if route is Route.POOL:
            return header, route, -1
        return header, route, self._framer.size(data, header)

    def _run_batch(self, ready: list[tuple[_Conn, Header, int]]) -> None:
        self.batches += 1
        self.batched_calls += len(ready)
        try:
            answers = self._batch_answers(ready, self._calls, wait=False)
        except BatchBusy:
            # A pool thread holds SQLite's writer (a catalog write, which can take
            # seconds): a pool thread waits for it with these calls, so that the loop
            # goes on serving reads and the other connections meanwhile.
            self._hand_off_batch(ready)
            return
        for conn, answer in answers:
            self._answer(conn, answer)

    def _batch_answers(self, ready: list[tuple[_Conn, Header, int]],
                       calls: CallRunner, *, wait: bool) -> list[tuple[_Conn, bytes | None]]:
        """Run ``ready`` as one unit of work (``CallRouter.batch``): each call's answer once
        the COMMIT is durable, or, when the COMMIT fails, an error for each. Raises
        ``BatchBusy`` (having run nothing) when not to ``wait`` for another thread's write."""
        answers: list[tuple[_Conn, bytes | None]] = []
        try:
            with self.router.batch([header[0] for _, header, _ in ready], wait=wait):
                for conn, header, size in ready:
                    answers.append((conn, self._process(conn, header, size, calls)))
        except BatchBusy:
            raise
        except Exception as err:
            # The COMMIT failed (or the batch could not start): none of these calls
            # happened. Each caller gets an error instead of its answer.
            log.error("a batch of %d call(s) failed to commit: %s", len(ready), err)
            dropped = {id(conn) for conn, answer in answers if answer is None}
            answers = [(conn, None if id(conn) in dropped else
                        error_answer(header[0], header[2], err))
                       for conn, header, _ in ready]
        return answers

    @staticmethod
    def _process(conn: _Conn, header: Header, size: int,
                 calls: CallRunner) -> bytes | None:
        """Run the call at the head of ``conn.inbuf`` (``header`` from ``_frame``, ``size``
        bytes); its answer, or None when the connection must be closed."""
        message = bytes(conn.inbuf[:size])
        del conn.inbuf[:size]
        try:
            return calls.run(message, header)
        except Exception:
            # As the threaded server does: drop this connection, serve the others.
            log.warning("closing connection from %s after a protocol error", conn.peer,
                        exc_info=True)
            return None

    def _answer(self, conn: _Conn, answer: bytes | None) -> None:
        if answer is None:
            self._close(conn)
        elif conn in self._conns:
            conn.outbuf += answer
            self._send(conn)

    def _send(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close(conn)
            return
        del conn.outbuf[:sent]
        conn.last_active = time.monotonic()
        if conn.writing != bool(conn.outbuf):
            conn.writing = bool(conn.outbuf)
            events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.writing else 0)
            self._sel.modify(conn.sock, events, conn)
        if not conn.outbuf and conn.inbuf:
            self._unread.add(conn)

    def _close_idle(self, now: float) -> None:
        if not self.idle_timeout:
            return
        for conn in list(self._conns):
            if not conn.away and now - conn.last_active > self.idle_timeout:
                self._close(conn)

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.discard(conn)
        self._unread.discard(conn)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        try:
            conn.sock.close()
        finally:
            self.on_close(conn.sock)

    # -- calls served by a pool thread ----------------------------------------------------

    def _hand_off(self, conn: _Conn) -> None:
        self._send_away([conn], self._serve_one, conn)

    def _hand_off_batch(self, ready: list[tuple[_Conn, Header, int]]
                        ) -> None:
        self._send_away([conn for conn, _, _ in ready], self._serve_batch, ready)

    def _send_away(self, conns: list[_Conn], serve: Callable[[Any], None], arg: Any) -> None:
        """Give ``conns`` to a pool thread running ``serve(arg)``, which gives them back."""
        for conn in conns:
            self._conns.discard(conn)
            self._sel.unregister(conn.sock)
            conn.away = True
        with self._away_done:
            try:
                future = self._pool.submit(serve, arg)
            except RuntimeError:        # the pool is shut down: we are stopping
                for conn in conns:
                    conn.away = False
                    self._close(conn)
                return
            for conn in conns:
                self._away[conn] = future

    def _serve_batch(self, ready: list[tuple[_Conn, Header, int]]
                     ) -> None:
        """Run a batch that found the writer busy, waiting for it, then answer each call
        and give its connection back to the loop (with what it sent after the call)."""
        try:
            set_authenticated_user(None)
            calls = CallRunner(self.dispatcher, self.max_message)
            for conn, answer in self._batch_answers(ready, calls, wait=True):
                if answer is None or self._stopping:
                    self._close_away(conn)
                    continue
                try:
                    conn.sock.setblocking(True)
                    conn.sock.sendall(answer)
                except OSError:
                    self._close_away(conn)
                    continue
                conn.last_active = time.monotonic()
                self._incoming.append((conn, None))
            self._wake()
        finally:
            with self._away_done:
                for conn, _, _ in ready:
                    self._away.pop(conn, None)
                self._away_done.notify_all()

    def _serve_one(self, conn: _Conn) -> None:
        """Serve one call of ``conn`` (its first bytes are in ``inbuf``) with blocking I/O,
        then give the connection back to the loop."""
        try:
            self._serve_one_call(conn)
        finally:
            with self._away_done:
                self._away.pop(conn, None)
                self._away_done.notify_all()

    def _serve_one_call(self, conn: _Conn) -> None:
        set_authenticated_user(None)
        sock = conn.sock
        try:
            sock.setblocking(True)
            source = PrefixedSocket(sock, bytes(conn.inbuf))
            conn.inbuf.clear()
            itrans = TTransport.TBufferedTransport(source)
            otrans = TTransport.TBufferedTransport(source)
            self.dispatcher.process(self.protocol_factory.getProtocol(itrans),
                                   self.protocol_factory.getProtocol(otrans))
            # read ahead by the buffered transport first, then what it never asked for
            leftover = itrans.cstringio_buf.read() + source.take_prefix()
        except (TTransport.TTransportException, EOFError, OSError):
            self._close_away(conn)      # the client hung up, or was idle past the timeout
            return
        except Exception:
            log.warning("closing connection from %s after a protocol error", conn.peer,
                        exc_info=True)
            self._close_away(conn)
            return
        conn.last_active = time.monotonic()
        if self._stopping:
            self._close_away(conn)
            return
        self._incoming.append((conn, leftover))
        self._wake()

    def _refuse_away(self, conn: _Conn) -> None:
        """A pool thread's answer to a SASL handshake (``refuse_sasl``)."""
        try:
            conn.closed = True
            conn.sock.setblocking(True)
            self.refuse_sasl(conn.sock, conn.peer)
        finally:
            self.on_close(conn.sock)
            with self._away_done:
                self._away.pop(conn, None)
                self._away_done.notify_all()

    def _close_away(self, conn: _Conn) -> None:
        conn.closed = True
        try:
            conn.sock.close()
        finally:
            self.on_close(conn.sock)


