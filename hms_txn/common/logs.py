"""Log output of the server: plain text or one JSON object per line, with call context.

Every record emitted while a Thrift call is being served carries that call's context:
the method, the transaction id(s) and lock id it concerns, and the SASL-authenticated user
of the connection. In text mode the context is appended as ``key=value`` pairs; in JSON
mode each field is its own key, so a log pipeline can select every line of one
transaction (``txnid``) without parsing messages.

``hms_txn.log.format`` (``text`` or ``json``) or ``hms-txn --log-format`` chooses the form.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any

FORMATS = ("text", "json")

# The context fields, in the order text mode prints them.
CONTEXT_FIELDS = ("method", "txnid", "lockid", "user")

_local = threading.local()


def context() -> dict[str, Any]:
    """The current thread's call context (a copy)."""
    return dict(getattr(_local, "fields", {}))


class bound:
    """``with bound(**fields):`` adds ``fields`` (None values are left out) to the context of
    this thread's records. A plain class rather than ``contextlib.contextmanager``: the
    generated Thrift exceptions are immutable, and a generator-based manager re-raising one
    through ``gen.throw`` tries to set its ``__traceback__``."""

    def __init__(self, **fields: Any):
        self._fields = fields
        self._previous: dict[str, Any] = {}

    def __enter__(self) -> None:
        self._previous = getattr(_local, "fields", {})
        merged = dict(self._previous)
        merged.update((k, v) for k, v in self._fields.items() if v is not None)
        _local.fields = merged

    def __exit__(self, *exc: Any) -> bool:
        _local.fields = self._previous
        return False


def bind(**fields: Any) -> None:
    """Add fields to the context of the call in progress (e.g. a txn id learnt mid-call)."""
    merged = dict(getattr(_local, "fields", {}))
    merged.update((k, v) for k, v in fields.items() if v is not None)
    _local.fields = merged


def set_connection(**fields: Any) -> None:
    """Fields of the connection this thread serves (its authenticated user); they stay on
    every record until the next call replaces them."""
    _local.connection = {k: v for k, v in fields.items() if v is not None}


class ContextFilter(logging.Filter):
    """Copies the thread's connection and call context onto each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = dict(getattr(_local, "connection", {}))
        fields.update(getattr(_local, "fields", {}))
        record.context = fields
        return True


def _context_of(record: logging.LogRecord) -> dict[str, Any]:
    return getattr(record, "context", None) or {}


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _context_of(record)
        if not fields:
            return line
        pairs = " ".join(f"{k}={_text(fields[k])}" for k in _ordered(fields))
        # Put the context before any traceback so it stays on the record's first line.
        head, sep, tail = line.partition("\n")
        return f"{head} [{pairs}]{sep}{tail}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = _context_of(record)
        for key in _ordered(fields):
            doc[key] = fields[key]
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, separators=(",", ":"))


JsonFormatter.converter = time.gmtime  # timestamps in UTC, marked Z


def _ordered(fields: dict[str, Any]) -> list[str]:
    known = [k for k in CONTEXT_FIELDS if k in fields]
    return known + sorted(k for k in fields if k not in CONTEXT_FIELDS)


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


class _Handler(logging.StreamHandler):
    """Writes to ``stream``, or to whatever ``sys.stderr`` is at the time of each record, so a
    program that swaps stderr (a test runner capturing output) never leaves it writing to
    a closed file."""

    def __init__(self, stream: Any = None):
        super().__init__(stream)
        self._follow_stderr = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        if self._follow_stderr:
            self.stream = sys.stderr
        super().emit(record)


def configure(level: int | str = logging.INFO, fmt: str = "text", stream: Any = None) -> None:
    """Install one handler on the root logger with the chosen format and the context filter."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    handler = _Handler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    handler._hms_txn = True   # type: ignore[attr-defined]
    root = logging.getLogger()
    # Replace only a handler installed here before (``serve`` re-configures once it has
    # read hive-site.xml); handlers of an embedding program (a test runner) stay.
    for old in list(root.handlers):
        if getattr(old, "_hms_txn", False):
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
