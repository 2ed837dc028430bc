"""A TCP relay in front of a server, for tests that look at or break what crosses the wire:
it keeps every byte the clients sent (``sent``), and with ``drop_next_answer`` set it
discards the server's next answer and closes that connection's both ends (a connection that
breaks between a request and its answer)."""

from __future__ import annotations

import socket
import threading


class Relay:
    """Forwards every connection made to ``port`` to ``target_port`` on ``host``."""

    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent = bytearray()
        self.drop_next_answer = threading.Event()
        self.dropped = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:          # closed
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while data := src.recv(65536):
                if answers and self.drop_next_answer.is_set():
                    self.drop_next_answer.clear()
                    self.dropped += 1
                    break
                if not answers:
                    self.sent.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
