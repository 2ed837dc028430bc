"""Thrift transports around SASL: the frames of a connection with a GSSAPI security layer
(server and client side), and the client's handshake.

After a SASL handshake every Thrift message travels in a frame: a 4-byte big-endian length
and the message, as Java's ``TSaslTransport`` writes it. With a security layer
(``auth-int`` / ``auth-conf``) the frame holds the message as ``SecurityLayer.wrap`` made
it, so a frame is exactly one message, wrapped whole.

``SaslClientTransport`` is thrift-sasl's client transport with a handshake of our own: a
failure on the client's side (no common protection, a Kerberos error after the exchange
began) is sent to the server as ``BAD`` with the reason, as Java's client does, so the
server's log says why the client left; a server's ``BAD``/``ERROR`` becomes a
TTransportException carrying the server's reason.
"""

from __future__ import annotations

import struct
from io import BytesIO
from typing import Any

from thrift.transport.TTransport import CReadableTransport, TTransportBase, TTransportException

from hms_txn.wire.sasl_gssapi import KerberosFailure, SecurityLayer

_LENGTH = struct.Struct(">I")
START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5


class SecurityLayerTransport(TTransportBase, CReadableTransport):
    """Frames of GSS-wrapped messages over ``trans`` (a TSocket). Unwrapping failures
    raise ``KerberosFailure``."""

    def __init__(self, trans: Any, layer: SecurityLayer, max_frame: int):
        self._trans = trans
        self.layer = layer
        self.max_frame = max_frame
        self._rbuf = BytesIO(b"")
        self._wbuf = BytesIO()

    def isOpen(self) -> bool:
        return self._trans.isOpen()

    def open(self) -> None:
        self._trans.open()

    def close(self) -> None:
        self._trans.close()

    def read(self, sz: int) -> bytes:
        data = self._rbuf.read(sz)
        if data:
            return data
        self._read_frame()
        return self._rbuf.read(sz)

    def _read_frame(self) -> None:
        (size,) = _LENGTH.unpack(self._trans.readAll(4))
        if size > self.max_frame:
            raise TTransportException(TTransportException.SIZE_LIMIT,
                                      f"SASL frame of {size} bytes is larger than the maximum "
                                      f"({self.max_frame})")
        self._rbuf = BytesIO(self.layer.unwrap(self._trans.readAll(size)))

    def write(self, buf: bytes) -> None:
        self._wbuf.write(buf)

    def flush(self) -> None:
        data = self._wbuf.getvalue()
        self._wbuf = BytesIO()
        wrapped = self.layer.wrap(data)
        self._trans.write(_LENGTH.pack(len(wrapped)) + wrapped)
        self._trans.flush()

    @property
    def cstringio_buf(self) -> BytesIO:
        return self._rbuf

    def cstringio_refill(self, partial: bytes, reqlen: int) -> BytesIO:
        while len(partial) < reqlen:
            self._read_frame()
            partial += self._rbuf.getvalue()
        self._rbuf = BytesIO(partial)
        return self._rbuf


def client_transport(mechanism_factory: Any, mechanism: str, sock: Any) -> Any:
    """The client transport of a SASL connection (``mechanism_factory()`` makes the
    mechanism object thrift-sasl expects)."""
    from thrift_sasl import TSaslClientTransport

    class SaslClientTransport(TSaslClientTransport):
        def open(self) -> None:
            if not self.isOpen():
                self._trans.open()
            self.sasl = mechanism_factory()
            ok, chosen, initial = self.sasl.start(self.mechanism)
            if not ok:
                raise TTransportException(TTransportException.NOT_OPEN,
                                          f"Could not start SASL: {self.sasl.getError()}")
            self._send_message(START, chosen)
            self._send_message(OK, initial)
            while True:
                status, payload = self._recv_sasl_message()
                payload = payload or b""
                if status not in (OK, COMPLETE):
                    reason = payload.decode("utf-8", "replace") if payload else ""
                    raise TTransportException(TTransportException.NOT_OPEN,
                                              f"Bad status: {status} ({reason})")
                if status == COMPLETE:
                    return
                ok, response = self.sasl.step(payload)
                if not ok:
                    reason = self.sasl.getError()
                    try:
                        self._send_message(BAD, reason.encode("utf-8"))
                    except (OSError, TTransportException):
                        pass
                    raise TTransportException(TTransportException.NOT_OPEN, reason)
                self._send_message(OK, response)

    return SaslClientTransport(mechanism_factory, mechanism, sock)


class GssapiMechanism:
    """A ``wire.sasl_gssapi.ClientNegotiation`` behind the API thrift-sasl's transport
    calls (that of the old ``sasl`` package). thrift-sasl frames what ``encode`` returns
    as it is and hands ``decode`` whole frames, length included."""

    def __init__(self, negotiation: Any):
        self.negotiation = negotiation
        self.error = ""

    def start(self, mechanism: str):
        try:
            return True, mechanism, self.negotiation.initial()
        except KerberosFailure as err:
            self.error = str(err)
            return False, mechanism, b""

    def step(self, challenge: bytes):
        try:
            return True, self.negotiation.step(challenge)
        except KerberosFailure as err:
            self.error = str(err)
            return False, b""

    def encode(self, data: bytes):
        layer = self.negotiation.layer
        if layer is None:
            return True, data
        try:
            wrapped = layer.wrap(data)
        except KerberosFailure as err:
            self.error = str(err)
            return False, b""
        return True, _LENGTH.pack(len(wrapped)) + wrapped

    def decode(self, data: bytes):
        layer = self.negotiation.layer
        if layer is None:
            return True, data
        try:
            return True, layer.unwrap(data[4:])
        except KerberosFailure as err:
            self.error = str(err)
            return False, b""

    def getError(self) -> str:
        return self.error or "SASL GSSAPI failed"
