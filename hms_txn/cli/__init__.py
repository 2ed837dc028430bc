"""The ``hms-txn`` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from hms_txn import __version__
from hms_txn.cli.errors import CommandError, Parser, explain
from hms_txn.cli.options import add_config_args, log_level, port_number
from hms_txn.common import logs


def load_config(args: argparse.Namespace):
    """The configuration of ``--conf`` and ``--hiveconf`` (CommandError when unusable)."""
    from hms_txn.common.config import ConfigError, load
    try:
        return load(args.conf, dict(args.hiveconf or ()))
    except ConfigError as err:
        raise CommandError(str(err)) from None


def cmd_serve(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError
    from hms_txn.server import create_server

    config = load_config(args)
    if args.log_format is None:
        logs.configure(args.log_level_number, config["hms_txn.log.format"])
    try:
        server = create_server(config, data_dir=args.data_dir, host=args.host, port=args.port)
    except SQLAlchemyError as err:
        raise CommandError(database_failure(config, args.data_dir, err)) from None
    except OSError as err:
        raise CommandError(f"cannot start: {explain(err)[0]}") from None
    try:
        server.start()
    except ConfigError as err:     # the Iceberg REST catalog's port
        server.stop()
        raise CommandError(str(err)) from None
    except OSError as err:
        server.stop()
        where = f"{server.transport.host or '0.0.0.0'}:{server.transport.options.port}"
        raise CommandError(f"cannot listen on {where}: {err.strerror or err}") from None
    done = threading.Event()

    def on_signal(signum, _frame):
        logging.getLogger("hms_txn").info("received %s, stopping", signal.Signals(signum).name)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # The address as bound: thrift://0.0.0.0:9083 is every interface (Hive's default).
    print(f"hms-txn listening on {server.transport.listen_address}", flush=True)
    if server.rest_address:
        print(f"hms-txn Iceberg REST catalog on {server.rest_address}", flush=True)
    done.wait()
    server.stop()
    return 0


def database_failure(config, data_dir: str, err: BaseException) -> str:
    """``cannot use the database <url without password>: <the driver's reason>``."""
    import os
    from sqlalchemy.engine import make_url
    from hms_txn.cli.errors import database_reason

    url = config.database_url(os.path.abspath(data_dir))
    try:
        url = make_url(url).render_as_string(hide_password=True)
    except Exception:       # not even a URL: the reason says so
        pass
    return f"cannot use the database {url}: {database_reason(err)}"


def cmd_upgrade_schema(args: argparse.Namespace) -> int:
    import os
    from sqlalchemy.exc import SQLAlchemyError
    from hms_txn.store import Store, ensure_schema
    from hms_txn.store.schema import SCHEMA_VERSION

    config = load_config(args)
    try:
        store = Store(config.database_url(os.path.abspath(args.data_dir)))
        try:
            found = ensure_schema(store, auto_upgrade=True)
        finally:
            store.dispose()
    except SQLAlchemyError as err:
        raise CommandError(database_failure(config, args.data_dir, err)) from None
    print(f"schema version {found or 'none'} -> {SCHEMA_VERSION}")
    return 0


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

    def add_common(p: argparse.ArgumentParser) -> None:
        add_config_args(p, conf_help="hive-site.xml to read (default: embedded SQLite under "
                                     "--data-dir)")
        p.add_argument("--data-dir", default="metastore_data", metavar="DIR",
                       help="where the embedded database and default warehouse live "
                            "(default ./metastore_data)")

    serve = sub.add_parser("serve", help="run the metastore Thrift server until SIGTERM/SIGINT",
                           description="Run the metastore. Prints one line with the address it "
                                       "listens on, serves until SIGTERM or SIGINT, then stops.")
    add_common(serve)
    serve.add_argument("--port", type=port_number,
                       help="port (default hive.metastore.port, 9083; 0: any free port)")
    serve.add_argument("--host", help="address to bind (default hive.metastore.bind.host, "
                                      "0.0.0.0: every interface, as Hive)")
    serve.set_defaults(func=cmd_serve)

    upgrade = sub.add_parser("upgrade-schema", help="create or upgrade the metastore database schema")
    add_common(upgrade)
    upgrade.set_defaults(func=cmd_upgrade_schema)

    from hms_txn.cli.txn import register_txn_commands
    register_txn_commands(sub)
    from hms_txn.cli.compaction import register_compact_commands
    register_compact_commands(sub)
    from hms_txn.cli.token import register_token_commands
    register_token_commands(sub)
    from hms_txn.cli.table_view import register_table_view_commands
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


if __name__ == "__main__":
    sys.exit(main())
