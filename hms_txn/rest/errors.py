"""Errors at the REST edge: every failure leaves as the spec's error body,
``{"error": {"message", "type", "code"}}``, with the status code the spec gives it.

Domain errors map by kind; where the same kind means different things on different routes
(a missing object: a namespace or a table; a refused operation: a namespace that is not
empty), the route says which (``ErrorContext``). The types are the Java exception names
Iceberg's clients know (``CommitFailedException`` on a 409 of a commit: they retry it;
``CommitStateUnknownException`` on its 500: they must not assume it failed).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from hms_txn.common import errors

log = logging.getLogger("hms_txn.rest")


class IcebergError(Exception):
    """An answer of the REST catalog other than success."""

    def __init__(self, code: int, kind: str, message: str):
        super().__init__(message)
        self.code = code
        self.kind = kind
        self.message = message

    def body(self) -> bytes:
        return error_body(self.code, self.kind, self.message)


def error_body(code: int, kind: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


@dataclass(frozen=True)
class ErrorContext:
    """What a route's failures mean: the type of a missing object, and whether a refused
    operation means a namespace is not empty."""
    missing: str = "NoSuchTableException"
    not_empty: bool = False


NAMESPACE = ErrorContext(missing="NoSuchNamespaceException")
TABLE = ErrorContext()
DROP_NAMESPACE = ErrorContext(missing="NoSuchNamespaceException", not_empty=True)


def translate(err: BaseException, context: ErrorContext) -> IcebergError:
    """The REST answer of an error a service raised."""
    if isinstance(err, IcebergError):
        return err
    message = str(err)
    if isinstance(err, errors.NoSuchNamespace):
        return IcebergError(404, "NoSuchNamespaceException", message)
    if isinstance(err, errors.NoSuchObject):
        return IcebergError(404, context.missing, message)
    if isinstance(err, errors.AlreadyExists):
        return IcebergError(409, "AlreadyExistsException", message)
    if isinstance(err, errors.ConcurrentModification):
        return IcebergError(409, "CommitFailedException", message)
    if isinstance(err, errors.InvalidOperation) and context.not_empty:
        return IcebergError(409, "NamespaceNotEmptyException", message)
    if isinstance(err, (errors.InvalidInput, errors.InvalidObject, errors.InvalidOperation,
                        errors.Refused)):
        return IcebergError(400, "BadRequestException", message)
    if isinstance(err, errors.Unsupported):
        return IcebergError(406, "UnsupportedOperationException", message)
    if isinstance(err, errors.CommitStateUnknown):
        return IcebergError(500, "CommitStateUnknownException", message)
    if isinstance(err, errors.MetastoreError):
        return IcebergError(500, "InternalServerError", message)
    log.error("REST call failed", exc_info=err)
    return IcebergError(500, "InternalServerError", f"{type(err).__name__}: {err}")
