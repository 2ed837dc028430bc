"""Replies assembled from structs encoded once, for the large answers of cached objects.

Serializing is most of the server's work for a big answer: ``get_partitions_by_names`` of
1,000 cached partitions spends about 70% of its time encoding them, every call, although
the partitions have not changed. A cached partition's binary-protocol bytes are the same
every time (and the same inside a list as alone), so the handler keeps them with the
converted struct and returns an ``EncodedStructs`` list: the real structs (any other
protocol, e.g. compact, encodes them as usual) plus their bytes. ``BinaryProtocolFactory``
builds the accelerated binary protocol whose encoder recognizes a call result whose
``success`` is such a list and writes the result from the stored bytes.
"""

from __future__ import annotations

import struct
from typing import Any, Sequence

from thrift.protocol import fastbinary
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated, TBinaryProtocolFactory
from thrift.Thrift import TType

_LIST_OF_STRUCTS = struct.Struct("!bhbi")   # field header (type, id 0) + list header
_STOP = b"\x00"


class EncodedStructs(list):
    """A list of Thrift structs, with each one's binary-protocol encoding in ``encoded``."""

    __slots__ = ("encoded",)

    def __init__(self, items: Sequence[Any], encoded: Sequence[bytes]):
        super().__init__(items)
        self.encoded = encoded


def encode(obj: Any) -> bytes:
    """The binary-protocol bytes of one struct (its fields and the closing STOP)."""
    return fastbinary.encode_binary(obj, [obj.__class__, obj.thrift_spec])


def _encode(obj: Any, spec: Any) -> bytes:
    success = getattr(obj, "success", None)
    if type(success) is EncodedStructs and _only_success(obj):
        return b"".join((_LIST_OF_STRUCTS.pack(TType.LIST, 0, TType.STRUCT, len(success)),
                         *success.encoded, _STOP))
    return fastbinary.encode_binary(obj, spec)


def _only_success(result: Any) -> bool:
    # A result struct holds the success value or one declared exception, never both; check
    # anyway, so a result with another field set is encoded the general way.
    return all(getattr(result, spec[2], None) is None
               for spec in result.thrift_spec if spec is not None and spec[0] != 0)


class EncodedBinaryProtocol(TBinaryProtocolAccelerated):
    """The accelerated binary protocol, writing ``EncodedStructs`` results as is."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if self._fast_encode is not None:
            self._fast_encode = _encode


class BinaryProtocolFactory(TBinaryProtocolFactory):
    """``TBinaryProtocolAcceleratedFactory`` that writes ``EncodedStructs`` results as is."""

    def getProtocol(self, trans):
        return EncodedBinaryProtocol(trans, self.strictRead, self.strictWrite,
                                     string_length_limit=self.string_length_limit,
                                     container_length_limit=self.container_length_limit)
