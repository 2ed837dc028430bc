"""The ``hms-txn`` command line."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from hms_txn import __version__
from hms_txn.common import logs


def _load_config(args: argparse.Namespace):
    from hms_txn.common.config import ConfigError, load, parse_overrides
    try:
        return load(args.conf, parse_overrides(getattr(args, "hiveconf", None)))
    except ConfigError as err:
        sys.exit(f"hms-txn: {err}")


def cmd_serve(args: argparse.Namespace) -> int:
    from hms_txn.common.config import ConfigError
    from hms_txn.server import create_server
    from hms_txn.store import SchemaError

    config = _load_config(args)
    if args.log_format is None:
        logs.configure(args.log_level_number, config["hms_txn.log.format"])
    try:
        server = create_server(config, data_dir=args.data_dir, host=args.host, port=args.port)
        server.start()
    except (ConfigError, SchemaError) as err:
        print(f"hms-txn: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"hms-txn: cannot listen: {err}", file=sys.stderr)
        return 2
    done = threading.Event()

    def on_signal(signum, _frame):
        logging.getLogger("hms_txn").info("received %s, stopping", signal.Signals(signum).name)
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"hms-txn listening on {server.address}", flush=True)
    done.wait()
    server.stop()
    return 0


def cmd_upgrade_schema(args: argparse.Namespace) -> int:
    from hms_txn.store import SchemaError, Store, ensure_schema
    from hms_txn.store.schema import SCHEMA_VERSION
    import os

    config = _load_config(args)
    store = Store(config.database_url(os.path.abspath(args.data_dir)))
    try:
        found = ensure_schema(store, auto_upgrade=True)
    except SchemaError as err:
        print(f"hms-txn: {err}", file=sys.stderr)
        return 2
    finally:
        store.dispose()
    print(f"schema version {found or 'none'} -> {SCHEMA_VERSION}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hms-txn",
        description="A Thrift-compatible Hive Metastore focused on ACID transactions.",
    )
    parser.add_argument("--version", action="version", version=f"hms-txn {__version__}")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--log-format", choices=logs.FORMATS, default=None,
                        help="log lines as text or JSON (default: hms_txn.log.format, text)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add_common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--conf", metavar="FILE",
                       help="hive-site.xml to read (default: embedded SQLite under --data-dir)")
        p.add_argument("--data-dir", default="metastore_data", metavar="DIR",
                       help="where the embedded database and default warehouse live "
                            "(default ./metastore_data)")
        p.add_argument("--hiveconf", action="append", metavar="KEY=VALUE",
                       help="override a configuration key (repeatable)")

    serve = sub.add_parser("serve", help="run the metastore Thrift server until SIGTERM/SIGINT",
                           description="Run the metastore. Prints one line with the address it "
                                       "listens on, serves until SIGTERM or SIGINT, then stops.")
    add_common(serve)
    serve.add_argument("--port", type=int, help="port (default hive.metastore.port, 9083)")
    serve.add_argument("--host", help="address to bind (default hive.metastore.bind.host, 0.0.0.0)")
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
    parser = build_parser()
    args = parser.parse_args(argv)
    args.log_level_number = getattr(logging, str(args.log_level).upper(), logging.INFO)
    logs.configure(args.log_level_number, args.log_format or "text")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
