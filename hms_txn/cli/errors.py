"""How a command ends when something goes wrong: one line ``hms-txn: <what went wrong>`` on
standard error and exit status 2 (a bad argument or configuration, an unreachable server
or database, an error the server answered); 1 is for a command that ran and whose answer
is a failure (a compaction that failed, a token the server refused). Never a traceback:
``--log-level DEBUG`` logs it for a bug report.

``Parser`` makes argparse's own errors (an unknown option, a value of the wrong type) one
such line too, and ``explain`` turns every other exception into one.
"""

from __future__ import annotations

import argparse
import logging

from sqlalchemy.exc import SQLAlchemyError
from thrift.Thrift import TApplicationException, TException
from thrift.transport.TTransport import TTransportException

from hms_txn.common.config import ConfigError
from hms_txn.store import SchemaError
from hms_txn.wire.client import describe

PROG = "hms-txn"
USAGE_ERROR = 2
log = logging.getLogger("hms_txn.cli")


class CommandError(Exception):
    """Ends a command with ``hms-txn: <message>`` and ``status``."""

    def __init__(self, message: str, status: int = USAGE_ERROR):
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (usage is one ``--help`` away)."""

    def error(self, message: str):
        self.exit(USAGE_ERROR, f"{PROG}: {message} (see {self.prog} --help)\n")


def first_line(text: str) -> str:
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def explain(err: BaseException) -> tuple[str, int]:
    """The one line and the exit status of a command that raised ``err``."""
    if isinstance(err, CommandError):
        return str(err), err.status
    if isinstance(err, (ConfigError, SchemaError)):
        return first_line(err), USAGE_ERROR
    if isinstance(err, ConnectionError):       # wire.client.MetastoreUnreachable included
        return first_line(err), USAGE_ERROR
    if isinstance(err, TTransportException):
        return f"lost the connection to the metastore: {describe(err)}", USAGE_ERROR
    if isinstance(err, TApplicationException):
        return f"the metastore failed the call: {first_line(err.message or err)}", USAGE_ERROR
    if isinstance(err, TException):            # an exception the method declares
        message = getattr(err, "message", None) or str(err)
        return f"the metastore answered {type(err).__name__}: {first_line(message)}", \
            USAGE_ERROR
    if isinstance(err, SQLAlchemyError):
        return f"database error: {database_reason(err)}", USAGE_ERROR
    if isinstance(err, OSError):
        where = f": {err.filename}" if err.filename else ""
        return f"{err.strerror or first_line(err)}{where}", USAGE_ERROR
    return f"{type(err).__name__}: {first_line(err)} (run with --log-level DEBUG for " \
           f"details)", USAGE_ERROR


def database_reason(err: BaseException) -> str:
    """The driver's own first line (``connection refused``) without SQLAlchemy's text."""
    orig = getattr(err, "orig", None)
    return first_line(orig if orig is not None else err)
