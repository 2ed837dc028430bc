"""Conversion between Thrift structs and the plain documents the domain stores.

A document is a dict keyed by the struct's field names, holding only the fields that are
set; nested structs are nested dicts, lists and maps stay lists and dicts, binary fields
become base64 text (documents are stored as JSON). The conversion is driven by each
generated class's ``thrift_spec``, so it covers every field of our IDL, and fields the
domain does not interpret still round-trip unchanged.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any, Callable


from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.Thrift import TType
from thrift.TSerialization import serialize

from hms_txn.wire.thrift_gen.hive_metastore import ttypes

Encoder = Callable[[Any], Any]

_LEAF = {TType.BOOL, TType.BYTE, TType.I16, TType.I32, TType.I64, TType.DOUBLE}


def _encoder(ttype: int, targs: Any) -> Encoder | None:
    """A function turning a Thrift value into its document form; None for identity."""
    if ttype in _LEAF:
        return None
    if ttype == TType.STRING:
        if targs == "BINARY":
            return lambda v: base64.b64encode(v).decode("ascii") if isinstance(v, bytes) else v
        return None
    if ttype == TType.STRUCT:
        return to_doc
    if ttype in (TType.LIST, TType.SET):
        inner = _encoder(targs[0], targs[1])
        if inner is None:
            return list
        return lambda v: [inner(x) for x in v]
    if ttype == TType.MAP:
        kenc, venc = _encoder(targs[0], targs[1]), _encoder(targs[2], targs[3])
        if kenc is None and venc is None:
            return dict
        kenc = kenc or (lambda x: x)
        venc = venc or (lambda x: x)
        return lambda v: {kenc(k): venc(x) for k, x in v.items()}
    raise TypeError(f"unsupported thrift type {ttype}")


def _decoder(ttype: int, targs: Any) -> Encoder | None:
    if ttype in _LEAF:
        if ttype == TType.BOOL:
            return bool
        return None
    if ttype == TType.STRING:
        if targs == "BINARY":
            return lambda v: base64.b64decode(v) if isinstance(v, str) else v
        return None
    if ttype == TType.STRUCT:
        cls = targs[0]
        return lambda v: from_doc(cls, v)
    if ttype == TType.LIST:
        inner = _decoder(targs[0], targs[1])
        return list if inner is None else (lambda v: [inner(x) for x in v])
    if ttype == TType.SET:
        inner = _decoder(targs[0], targs[1])
        return set if inner is None else (lambda v: {inner(x) for x in v})
    if ttype == TType.MAP:
        kdec, vdec = _decoder(targs[0], targs[1]), _decoder(targs[2], targs[3])
        if targs[0] in (TType.I16, TType.I32, TType.I64, TType.BYTE):
            kdec = int  # JSON turned integer keys into strings
        if kdec is None and vdec is None:
            return dict
        kdec = kdec or (lambda x: x)
        vdec = vdec or (lambda x: x)
        return lambda v: {kdec(k): vdec(x) for k, x in v.items()}
    raise TypeError(f"unsupported thrift type {ttype}")


@lru_cache(maxsize=None)
def _plan(cls: type, decode: bool) -> tuple[tuple[str, Encoder | None], ...]:
    make = _decoder if decode else _encoder
    return tuple((spec[2], make(spec[1], spec[3])) for spec in cls.thrift_spec if spec is not None)


def to_doc(obj: Any) -> dict[str, Any]:
    """Thrift struct → document (unset fields left out)."""
    out: dict[str, Any] = {}
    for name, enc in _plan(type(obj), False):
        value = getattr(obj, name)
        if value is not None:
            out[name] = value if enc is None else enc(value)
    return out


def from_doc(cls: type, doc: dict[str, Any] | None) -> Any:
    """Document → Thrift struct of class ``cls`` (unknown keys ignored)."""
    if doc is None:
        return None
    obj = cls()
    for name, dec in _plan(cls, True):
        value = doc.get(name)
        if value is not None:
            setattr(obj, name, value if dec is None else dec(value))
    return obj


_JSON = TJSONProtocolFactory()


def object_json(kind: str, doc: dict[str, Any]) -> str:
    """Thrift-JSON text of a document, as notification messages carry (``tableObjJson``)."""
    return serialize(from_doc(getattr(ttypes, kind), doc), _JSON).decode("utf-8")
