"""The two message formats Hive writes into NOTIFICATION_LOG.MESSAGE.

``json-0.2`` (``JSONMessageEncoder``): the message's JSON text, as Jackson writes it
(compact, non-ASCII characters as they are). ``gzip(json-2.0)``
(``GzipJSONMessageEncoder``, ``json/gzip/Serializer``): that text as UTF-8, gzipped and
base64-encoded (standard alphabet, padded, no line breaks). Which one a server writes is
``hive.metastore.event.message.factory`` (``Config.event_message_format``).

Readers: Hive 4 picks the deserializer by each row's MESSAGE_FORMAT
(``MessageFactory.getInstance(format)``: "json-0.2", "gzip(json-2.0)" and "gzip"); Hive 2.3
and Impala use the factory of their own configuration whatever the row says, so a gzip
message fails a reader configured for JSON and the other way round.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any, Mapping

from hms_txn.common.config import GZIP_MESSAGE_FORMAT, JSON_MESSAGE_FORMAT

FORMATS = (JSON_MESSAGE_FORMAT, GZIP_MESSAGE_FORMAT)
# MessageFactory's registry: the names a row's MESSAGE_FORMAT may carry, lower-cased.
_READ_FORMATS = {JSON_MESSAGE_FORMAT: JSON_MESSAGE_FORMAT, GZIP_MESSAGE_FORMAT: GZIP_MESSAGE_FORMAT,
                 "gzip": GZIP_MESSAGE_FORMAT}

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def to_json(message: Mapping[str, Any]) -> str:
    """The message's JSON text (keys in the dict's order)."""
    return _dumps(message)


def encode(message: Mapping[str, Any], message_format: str = JSON_MESSAGE_FORMAT) -> str:
    """The MESSAGE column of ``message`` in ``message_format``."""
    text = to_json(message)
    if message_format == JSON_MESSAGE_FORMAT:
        return text
    if message_format == GZIP_MESSAGE_FORMAT:
        # level 6 and mtime 0, as Java's GZIPOutputStream (Deflater's default level, no
        # time): equal messages encode equally (the header's OS byte still differs)
        data = gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)
        return base64.b64encode(data).decode("ascii")
    raise ValueError(f"unknown message format {message_format!r} (one of {', '.join(FORMATS)})")


def decode_text(message: str, message_format: str | None) -> str:
    """The JSON text of a stored MESSAGE, by its MESSAGE_FORMAT (NULL or "" read as
    json-0.2, what rows written before formats were recorded hold)."""
    fmt = _READ_FORMATS.get((message_format or JSON_MESSAGE_FORMAT).lower())
    if fmt is None:
        raise ValueError(f"unknown message format {message_format!r}")
    if fmt == JSON_MESSAGE_FORMAT:
        return message
    return gzip.decompress(base64.b64decode(message, validate=True)).decode("utf-8")


def decode(message: str, message_format: str | None) -> dict[str, Any]:
    """The message dict of a stored MESSAGE (``decode_text`` then JSON)."""
    return json.loads(decode_text(message, message_format))
