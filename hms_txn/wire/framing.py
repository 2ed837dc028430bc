"""Framing calls of the binary protocol for the event-loop server (``event_loop``).

The binary protocol has no length prefix, so the loop finds where a call ends by parsing
its header (``message_header``) and decoding its arguments with the generated struct of the
method (``Framer``); ``CallRunner`` then answers the whole call from memory through the
``Dispatcher``, with protocol objects reused call after call. ``PrefixedSocket`` hands a
pool thread the bytes the loop already read, followed by the socket.
"""

from __future__ import annotations

import socket
import struct

from thrift.protocol.TBinaryProtocol import TBinaryProtocol, TBinaryProtocolAccelerated
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport import TTransport

from hms_txn.wire.dispatch import Dispatcher
from hms_txn.wire.encoded import EncodedBinaryProtocol
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore

_I32 = struct.Struct("!i")
_I32_I32 = struct.Struct("!ii")

Header = tuple[str, int, int, int]     # name, message type, seqid, offset of the arguments


def message_header(data: bytes, max_name: int) -> tuple[str, int, int, int]:
    """(name, type, seqid, offset of the arguments) of a binary-protocol message, strict
    (versioned, what every current client sends) or old-style. thrift's own
    readMessageBegin reads it field by field in Python, ~14 µs a message: a sixth of a
    small call's work in the loop."""
    if len(data) < 4:
        raise Incomplete()
    (first,) = _I32.unpack_from(data, 0)
    if first < 0:
        if first & TBinaryProtocol.VERSION_MASK != TBinaryProtocol.VERSION_1:
            raise TProtocolException(TProtocolException.BAD_VERSION,
                                     f"bad version in message header: {first}")
        mtype = first & TBinaryProtocol.TYPE_MASK
        if len(data) < 8:
            raise Incomplete()
        (size,) = _I32.unpack_from(data, 4)
        start = 8
    else:
        mtype, size, start = None, first, 4
    if size < 0 or size > max_name:
        raise TProtocolException(TProtocolException.SIZE_LIMIT if size > 0 else
                                 TProtocolException.NEGATIVE_SIZE,
                                 f"bad method name length {size}")
    end = start + size
    if mtype is None:           # old-style: name, i8 type, i32 seqid
        if len(data) < end + 5:
            raise Incomplete()
        mtype = data[end]
        (seqid,) = _I32.unpack_from(data, end + 1)
        offset = end + 5
    else:
        if len(data) < end + 4:
            raise Incomplete()
        (seqid,) = _I32.unpack_from(data, end)
        offset = end + 4
    return bytes(data[start:end]).decode("utf-8"), mtype, seqid, offset


class Incomplete(Exception):
    """The bytes so far are not a whole message yet."""


class Framer:
    """Finds where a call of the binary protocol ends."""

    def __init__(self, max_message: int):
        self.max_message = max_message
        # Reused with a new memory buffer per message, as CallRunner's protocols are.
        self._prot = TBinaryProtocolAccelerated(TTransport.TMemoryBuffer(),
                                                string_length_limit=max_message,
                                                container_length_limit=max_message)
        self._args: dict[str, type] = {}

    def header(self, data: bytearray) -> Header:
        return message_header(data, self.max_message)

    def size(self, data: bytearray, header: Header) -> int:
        """Bytes of the whole call whose ``header`` starts ``data``; ``Incomplete`` when
        it has not arrived whole."""
        name, _mtype, _seqid, offset = header
        args = self._args.get(name)
        if args is None:
            args = self._args[name] = getattr(ThriftHiveMetastore, f"{name}_args")
        # The binary protocol has no length prefix: decoding the arguments (C codec, ~2 µs
        # for a small call; the processor decodes them again) is how to find the end.
        buf = TTransport.TMemoryBuffer(bytes(data))
        buf.cstringio_buf.seek(offset)
        prot = self._prot
        prot.trans = buf
        try:
            args().read(prot)
        except (EOFError, TTransport.TTransportException) as err:
            if isinstance(err, TTransport.TTransportException) and \
                    err.type != TTransport.TTransportException.END_OF_FILE:
                raise
            raise Incomplete() from None
        return buf.cstringio_buf.tell()


class _CallProtocol(EncodedBinaryProtocol):
    """The binary protocol of ``CallRunner``: writes a message header in one go (thrift's
    own ``writeMessageBegin`` writes it field by field in Python)."""

    def writeMessageBegin(self, name: str, mtype: int, seqid: int) -> None:
        encoded = name.encode("utf-8")
        self.trans.write(_I32_I32.pack(TBinaryProtocol.VERSION_1 | mtype, len(encoded))
                         + encoded + _I32.pack(seqid))


class CallRunner:
    """Runs framed calls through the dispatcher, reusing its protocol objects call after
    call (making them costs more than a small call's decoding); one per thread that runs
    calls. The message header has been parsed by ``message_header``."""

    def __init__(self, dispatcher: Dispatcher, max_message: int):
        self.dispatcher = dispatcher
        limits = {"string_length_limit": max_message, "container_length_limit": max_message}
        self._in = TBinaryProtocolAccelerated(TTransport.TMemoryBuffer(), **limits)
        self._out = _CallProtocol(TTransport.TMemoryBuffer(), **limits)

    def run(self, message: bytes, header: Header) -> bytes:
        """The answer to ``message`` (a whole call, ``header`` its parse)."""
        name, _mtype, seqid, offset = header
        inbuf = TTransport.TMemoryBuffer(message)
        inbuf.cstringio_buf.seek(offset)
        out = TTransport.TMemoryBuffer()
        self._in.trans = inbuf
        self._out.trans = out
        self.dispatcher.process_call(name, seqid, self._in, self._out)
        return out.getvalue()


class PrefixedSocket(TTransport.TTransportBase):
    """Bytes the loop already read, then the socket."""

    def __init__(self, sock: socket.socket, prefix: bytes):
        self.sock = sock
        self.prefix = prefix

    def isOpen(self) -> bool:
        return True

    def take_prefix(self) -> bytes:
        rest, self.prefix = self.prefix, b""
        return rest

    def read(self, sz: int) -> bytes:
        if self.prefix:
            chunk, self.prefix = self.prefix[:sz], self.prefix[sz:]
            return chunk
        return self.sock.recv(sz)

    def write(self, buf: bytes) -> None:
        self.sock.sendall(buf)

    def flush(self) -> None:
        pass


def error_answer(name: str, seqid: int, err: BaseException) -> bytes:
    out = TTransport.TMemoryBuffer()
    prot = TBinaryProtocolAccelerated(out)
    prot.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
    TApplicationException(TApplicationException.INTERNAL_ERROR,
                          f"hms-txn: the database commit failed, nothing was changed: "
                          f"{err}").write(prot)
    prot.writeMessageEnd()
    return out.getvalue()
