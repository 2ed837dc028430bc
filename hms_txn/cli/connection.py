"""What every command that talks to a running metastore shares: its connection options,
the connection itself (through ``hms_txn.wire.client``, as every client of the project)
and the table rendering of its output."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from typing import Any, Sequence

from hms_txn.cli.errors import CommandError
from hms_txn.cli.options import add_config_args, load_config, metastore_uris, positive_seconds
from hms_txn.wire.failover import FailoverClient, connect_failover

EPILOG = """\
Connection: --uri thrift://HOST:PORT, else --conf's hive.metastore.uris, else
thrift://127.0.0.1:PORT with PORT from --conf's hive.metastore.port (9083 by default).
The connection follows --conf/--hiveconf as the server reads them: framed transport /
compact protocol (hive.metastore.thrift.framed.transport.enabled / .compact.protocol.enabled),
TLS (hive.metastore.use.SSL, hive.metastore.truststore.path), SASL
(hive.metastore.sasl.enabled: PLAIN with --user/--password-file, else the delegation token of
HADOOP_TOKEN_FILE_LOCATION, else Kerberos with hive.metastore.kerberos.principal: the ticket
of kinit, or --principal/--keytab).
Output: an aligned table by default, --json for machine-readable output."""


def add_connection_args(p: argparse.ArgumentParser, *, json_help: str,
                        user_required: bool = False) -> None:
    """Options of every command that talks to a running metastore."""
    p.add_argument("--uri", metavar="thrift://HOST:PORT", type=metastore_uris,
                   help="metastore to ask (default: hive.metastore.uris, else 127.0.0.1 and "
                        "the port from --conf)")
    add_config_args(p, conf_help="hive-site.xml giving the metastore's address, transport, "
                                 "TLS and SASL settings")
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument("--timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                   help="socket timeout (default 60)")
    p.add_argument("--user", required=user_required,
                   help="authenticate with SASL PLAIN as this user"
                        + ("" if user_required else " (with --password-file)"))
    p.add_argument("--password-file", required=user_required, metavar="FILE",
                   help="file whose first line is the user's password ('-': standard input)")
    p.add_argument("--principal", metavar="PRINCIPAL",
                   help="authenticate with Kerberos as this principal (with --keytab; "
                        "default: the ticket cache of kinit)")
    p.add_argument("--keytab", metavar="FILE", help="keytab holding --principal's key")


def read_password(path: str) -> str:
    try:
        if path == "-":
            text = sys.stdin.readline()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.readline()
    except OSError as err:
        raise CommandError(f"cannot read the password file {path}: "
                           f"{err.strerror or err}") from None
    return text.rstrip("\r\n")


def client_for(args: argparse.Namespace) -> FailoverClient:
    """A client of ``args``' metastore, connected as ``--conf``/``--hiveconf`` and the
    user options say (``hms_txn.clients.connection``); CommandError when it cannot."""
    from hms_txn.clients.connection import client_options, metastore_uri
    from hms_txn.common.config import ConfigError

    if bool(args.user) != bool(args.password_file):
        raise CommandError("--user and --password-file go together (SASL PLAIN)")
    if args.keytab and not args.principal:
        raise CommandError("--keytab needs --principal (the principal whose key it holds)")
    if args.user and args.principal:
        raise CommandError("--user (SASL PLAIN) and --principal (Kerberos) exclude each other")
    config = load_config(args)
    password = read_password(args.password_file) if args.password_file else None
    try:
        options = client_options(config, user=args.user, password=password,
                                 principal=args.principal, keytab=args.keytab,
                                 timeout=args.timeout)
        uri = metastore_uri(config, args.uri)
        return connect_failover(uri, options=options)
    except ConfigError as err:
        raise CommandError(str(err)) from None
    except ValueError as err:     # hive.metastore.uris of --conf (--uri is checked earlier)
        raise CommandError(f"hive.metastore.uris: {err}") from None


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
