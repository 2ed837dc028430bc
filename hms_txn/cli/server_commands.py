"""``hms-txn serve`` and ``hms-txn upgrade-schema``: the commands that run on the
metastore's own database rather than talk to a running metastore."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from hms_txn.cli.errors import CommandError, database_reason, explain
from hms_txn.cli.options import add_config_args, load_config, port_number
from hms_txn.common import logs
from hms_txn.common.config import ConfigError


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


def _add_common(p: argparse.ArgumentParser) -> None:
    add_config_args(p, conf_help="hive-site.xml to read (default: embedded SQLite under "
                                 "--data-dir)")
    p.add_argument("--data-dir", default="metastore_data", metavar="DIR",
                   help="where the embedded database and default warehouse live "
                        "(default ./metastore_data)")


def register_server_commands(sub) -> None:
    serve = sub.add_parser("serve", help="run the metastore Thrift server until SIGTERM/SIGINT",
                           description="Run the metastore. Prints one line with the address it "
                                       "listens on, serves until SIGTERM or SIGINT, then stops.")
    _add_common(serve)
    serve.add_argument("--port", type=port_number,
                       help="port (default hive.metastore.port, 9083; 0: any free port)")
    serve.add_argument("--host", help="address to bind (default hive.metastore.bind.host, "
                                      "0.0.0.0: every interface, as Hive)")
    serve.set_defaults(func=cmd_serve)

    upgrade = sub.add_parser("upgrade-schema", help="create or upgrade the metastore database schema")
    _add_common(upgrade)
    upgrade.set_defaults(func=cmd_upgrade_schema)
