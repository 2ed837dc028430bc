"""The ``hms-txn`` command line: its parser (every command module registers its own
commands, installed packages add theirs) and ``main``."""

from __future__ import annotations

import argparse
import logging
import sys

from hms_txn import __version__
from hms_txn.cli.compaction import register_compact_commands
from hms_txn.cli.errors import Parser, explain
from hms_txn.cli.options import log_level
from hms_txn.cli.server_commands import register_server_commands
from hms_txn.cli.table_view import register_table_view_commands
from hms_txn.cli.token import register_token_commands
from hms_txn.cli.txn import register_txn_commands
from hms_txn.common import logs


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="hms-txn",
        description="A Thrift-compatible Hive Metastore focused on ACID transactions.",
    )
    parser.add_argument("--version", action="version", version=f"hms-txn {__version__}")
    parser.add_argument("--log-level", default="INFO", type=log_level,
                        help="logging level: DEBUG, INFO, WARNING, ERROR (default INFO)")
    parser.add_argument("--log-format", choices=logs.FORMATS, default=None,
                        help="log lines as text or JSON (default: hms_txn.log.format, text)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    register_server_commands(sub)
    register_txn_commands(sub)
    register_compact_commands(sub)
    register_token_commands(sub)
    register_table_view_commands(sub)
    add_plugin_commands(sub)
    return parser


PLUGIN_GROUP = "hms_txn.commands"


def add_plugin_commands(sub) -> None:
    """The commands other installed packages add: each entry point of the group
    ``hms_txn.commands`` is a function that takes the subparsers and adds its command
    (``hms-txn bench`` comes from hms_bench this way, which hms_txn never imports)."""
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            add = entry.load()
        except ImportError as err:   # a plugin whose own dependencies are missing
            print(f"hms-txn: command {entry.name!r} ({entry.value}) is unavailable: {err}",
                  file=sys.stderr)
            continue
        add(sub)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (errors: see ``hms_txn.cli.errors``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.log_level_number = getattr(logging, args.log_level)
    logs.configure(args.log_level_number, args.log_format or "text")
    # A command's output is its answer or one line of error: the failover client's notes
    # on a call it retried on another server are for long-running clients' logs.
    logging.getLogger("hms_txn.wire.failover").setLevel(logging.WARNING)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        message, status = explain(err)
        logging.getLogger("hms_txn.cli").debug("%s failed", args.command, exc_info=True)
        print(f"hms-txn: {message}", file=sys.stderr)
        return status
