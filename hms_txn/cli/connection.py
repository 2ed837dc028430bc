"""What every command that talks to a running metastore shares: its connection options,
the connection itself (through ``hms_txn.wire.client``, as every client of the project)
and the table rendering of its output."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from typing import Any, Sequence

from hms_txn.wire.client import ClientOptions, FailoverClient, Sasl, connect_failover

EPILOG = """\
Connection: --uri thrift://HOST:PORT, or thrift://127.0.0.1:PORT with PORT from --conf's
hive.metastore.port (9083 by default); framed transport / compact protocol follow --conf's
hive.metastore.thrift.framed.transport.enabled / .compact.protocol.enabled.
Output: an aligned table by default, --json for machine-readable output."""


def add_connection_args(p: argparse.ArgumentParser, *, json_help: str) -> None:
    """Options of every command that talks to a running metastore."""
    p.add_argument("--uri", metavar="thrift://HOST:PORT",
                   help="metastore to ask (default: 127.0.0.1 and the port from --conf)")
    p.add_argument("--conf", metavar="FILE", help="hive-site.xml giving port and transport")
    p.add_argument("--hiveconf", action="append", metavar="KEY=VALUE",
                   help="override a configuration key (repeatable)")
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="socket timeout (default 60)")


def client_for(args: argparse.Namespace, *, sasl: Sasl | None = None) -> FailoverClient:
    """A client of ``args``' metastore (exits with a one-line message when it cannot
    connect); with ``sasl`` the connection authenticates (framed, as SASL implies). It
    fails over among the URIs of ``--uri`` as Hive's client does (``connect_failover``)."""
    from hms_txn.common.config import ConfigError, load, parse_overrides

    try:
        config = load(args.conf, parse_overrides(args.hiveconf))
    except ConfigError as err:
        sys.exit(f"hms-txn: {err}")
    uri = args.uri or f"thrift://127.0.0.1:{config['hive.metastore.port']}"
    options = ClientOptions(
        sasl=sasl, timeout=args.timeout,
        framed=config["hive.metastore.thrift.framed.transport.enabled"],
        compact=config["hive.metastore.thrift.compact.protocol.enabled"])
    try:
        return connect_failover(uri, options=options)
    except ValueError as err:
        sys.exit(f"hms-txn: --uri: {err}")
    except ConnectionError as err:
        sys.exit(f"hms-txn: {err}")


def when(ms: int | None) -> str:
    if not ms:
        return ""
    return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))

    def line(vals: Sequence[str]) -> str:
        return "  ".join(v.ljust(widths[i]) for i, v in enumerate(vals)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)
