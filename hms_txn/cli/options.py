"""Options several commands share, each checked when the command line is parsed so a bad
value ends as one line naming the option (``errors.Parser``)."""

from __future__ import annotations

import argparse
import logging

from hms_txn.cli.errors import CommandError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def log_level(text: str) -> str:
    name = text.strip().upper()
    if name not in LOG_LEVELS or not isinstance(getattr(logging, name, None), int):
        raise argparse.ArgumentTypeError(f"not a log level: {text!r} (use one of "
                                         f"{', '.join(LOG_LEVELS)})")
    return name


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {text!r} (0-65535)")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"takes KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def metastore_uris(text: str) -> str:
    from hms_txn.wire.client import parse_uris
    try:
        parse_uris(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def add_config_args(p: argparse.ArgumentParser, *, conf_help: str) -> None:
    p.add_argument("--conf", metavar="FILE", help=conf_help)
    p.add_argument("--hiveconf", action="append", type=key_value, metavar="KEY=VALUE",
                   help="override a configuration key (repeatable)")


def load_config(args: argparse.Namespace):
    """The configuration of ``--conf`` and ``--hiveconf`` (CommandError when unusable)."""
    from hms_txn.common.config import ConfigError, load
    try:
        return load(args.conf, dict(args.hiveconf or ()))
    except ConfigError as err:
        raise CommandError(str(err)) from None
