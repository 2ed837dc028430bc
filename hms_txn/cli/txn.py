"""``hms-txn show-transactions``, ``show-locks`` and ``abort-txns``.

The equivalents of Hive's SHOW TRANSACTIONS, SHOW LOCKS and ABORT TRANSACTIONS. They talk
to a running metastore over Thrift (any metastore: hms-txn or the Java one), so they see
exactly what clients see and never bypass the server's locking. The address is ``--uri``,
or else ``thrift://127.0.0.1:<hive.metastore.port>`` from ``--conf`` (default port 9083),
with the transport and protocol that configuration selects.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from typing import Any, Sequence
from urllib.parse import urlsplit

TXN_STATES = {1: "COMMITTED", 2: "ABORTED", 3: "OPEN"}
LOCK_STATES = {1: "ACQUIRED", 2: "WAITING", 3: "ABORT", 4: "NOT_ACQUIRED"}
LOCK_TYPES = {1: "SHARED_READ", 2: "SHARED_WRITE", 3: "EXCLUSIVE", 4: "EXCL_WRITE"}

_EPILOG = """\
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


def register_txn_commands(sub: argparse._SubParsersAction) -> None:
    def add_conn(p: argparse.ArgumentParser) -> None:
        add_connection_args(p, json_help="print JSON instead of a table")

    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("show-transactions", help="list open and aborted transactions",
                       description="List open and aborted transactions (SHOW TRANSACTIONS).",
                       epilog=_EPILOG, formatter_class=fmt)
    add_conn(p)
    p.set_defaults(func=cmd_show_transactions)

    p = sub.add_parser("show-locks", help="list locks, optionally of one database or table",
                       description="List acquired and waiting locks (SHOW LOCKS [db[.table]]).",
                       epilog=_EPILOG, formatter_class=fmt)
    add_conn(p)
    p.add_argument("object", nargs="?", metavar="db[.table]",
                   help="only locks on this database or table")
    p.add_argument("--partition", metavar="NAME", help="only locks on this partition (k=v/k2=v2)")
    p.add_argument("--txn", type=int, metavar="ID", help="only locks of this transaction")
    p.set_defaults(func=cmd_show_locks)

    p = sub.add_parser("abort-txns", help="abort transactions by id",
                       description="Abort the given transactions (ABORT TRANSACTIONS id ...). "
                                   "Ids that are not open are reported and left alone.",
                       epilog=_EPILOG, formatter_class=fmt)
    add_conn(p)
    p.add_argument("ids", nargs="+", type=int, metavar="ID", help="transaction id")
    p.set_defaults(func=cmd_abort_txns)


# ----------------------------------------------------------------------------- connection

def _connect(args: argparse.Namespace, *, sasl_plain: tuple[str, str] | None = None):
    """Client and transport for ``args``' metastore; with ``sasl_plain=(user, password)``
    the connection authenticates with SASL PLAIN (framed, as SASL implies)."""
    from thrift.protocol import TBinaryProtocol, TCompactProtocol
    from thrift.transport import TSocket, TTransport

    from hms_txn.common.config import ConfigError, load
    from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore

    overrides = dict(kv.split("=", 1) for kv in args.hiveconf or [])
    try:
        config = load(args.conf, overrides)
    except ConfigError as err:
        sys.exit(f"hms-txn: {err}")
    if args.uri:
        parts = urlsplit(args.uri)
        if parts.scheme != "thrift" or not parts.hostname:
            sys.exit(f"hms-txn: --uri must look like thrift://HOST:PORT, got {args.uri!r}")
        host, port = parts.hostname, parts.port or 9083
    else:
        host, port = "127.0.0.1", config["hive.metastore.port"]
    sock = TSocket.TSocket(host, port)
    sock.setTimeout(int(args.timeout * 1000))
    if sasl_plain is not None:
        from thrift_sasl import TSaslClientTransport

        from hms_txn.clients.upstream import PlainSaslClient
        user, password = sasl_plain
        transport = TSaslClientTransport(lambda: PlainSaslClient(host, user, password), "PLAIN",
                                         sock)
    elif config["hive.metastore.thrift.framed.transport.enabled"]:
        transport = TTransport.TFramedTransport(sock)
    else:
        transport = TTransport.TBufferedTransport(sock)
    protocol = (TCompactProtocol.TCompactProtocol(transport)
                if config["hive.metastore.thrift.compact.protocol.enabled"]
                else TBinaryProtocol.TBinaryProtocol(transport))
    try:
        transport.open()
    except Exception as err:
        sys.exit(f"hms-txn: cannot connect to thrift://{host}:{port}: {err}")
    client = ThriftHiveMetastore.Client(protocol)
    return client, transport


def _when(ms: int | None) -> str:
    if not ms:
        return ""
    return _dt.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], len(v))
    line = lambda vals: "  ".join(v.ljust(widths[i]) for i, v in enumerate(vals)).rstrip()  # noqa
    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


# -------------------------------------------------------------------------------- commands

def cmd_show_transactions(args: argparse.Namespace) -> int:
    client, transport = _connect(args)
    try:
        info = client.get_open_txns_info()
    finally:
        transport.close()
    txns = [{
        "txnid": t.id, "state": TXN_STATES.get(t.state, str(t.state)), "user": t.user,
        "hostname": t.hostname, "agentInfo": t.agentInfo, "heartbeatCount": t.heartbeatCount,
        "startedTime": t.startedTime, "lastHeartbeatTime": t.lastHeartbeatTime,
        "metaInfo": t.metaInfo,
    } for t in info.open_txns or []]
    if args.json:
        print(json.dumps({"txn_high_water_mark": info.txn_high_water_mark,
                          "transactions": txns}, indent=2))
        return 0
    print(render_table(
        ["TXNID", "STATE", "STARTED", "LAST HEARTBEAT", "USER", "HOST", "AGENT"],
        [[t["txnid"], t["state"], _when(t["startedTime"]), _when(t["lastHeartbeatTime"]),
          t["user"], t["hostname"], t["agentInfo"]] for t in txns]))
    print(f"\n{len(txns)} transaction(s); high water mark {info.txn_high_water_mark}")
    return 0


def split_object(text: str | None) -> tuple[str | None, str | None]:
    """``db`` or ``db.table`` (either may be absent) as given on the command line."""
    if not text:
        return None, None
    db, _, table = text.partition(".")
    return db, table or None


def cmd_show_locks(args: argparse.Namespace) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    db, table = split_object(args.object)
    client, transport = _connect(args)
    try:
        resp = client.show_locks(ttypes.ShowLocksRequest(
            dbname=db, tablename=table, partname=args.partition, txnid=args.txn))
    finally:
        transport.close()
    locks = [{
        "lockid": e.lockid, "lockIdInternal": e.lockIdInternal, "dbname": e.dbname,
        "tablename": e.tablename, "partname": e.partname,
        "state": LOCK_STATES.get(e.state, str(e.state)),
        "type": LOCK_TYPES.get(e.type, str(e.type)), "txnid": e.txnid,
        "lastheartbeat": e.lastheartbeat, "acquiredat": e.acquiredat, "user": e.user,
        "hostname": e.hostname, "agentInfo": e.agentInfo, "blockedByExtId": e.blockedByExtId,
        "blockedByIntId": e.blockedByIntId,
    } for e in resp.locks or []]
    if args.json:
        print(json.dumps({"locks": locks}, indent=2))
        return 0
    rows = []
    for e in locks:
        lock_id = f"{e['lockid']}.{e['lockIdInternal']}" if e["lockIdInternal"] else e["lockid"]
        blocked = (f"{e['blockedByExtId']}.{e['blockedByIntId']}" if e["blockedByExtId"]
                   else "")
        rows.append([lock_id, e["dbname"], e["tablename"] or "", e["partname"] or "",
                     e["state"], blocked, e["type"], e["txnid"] or "",
                     _when(e["lastheartbeat"]), _when(e["acquiredat"]), e["user"],
                     e["hostname"], e["agentInfo"] or ""])
    print(render_table(["LOCKID", "DATABASE", "TABLE", "PARTITION", "STATE", "BLOCKEDBY",
                        "TYPE", "TXNID", "LAST HEARTBEAT", "ACQUIRED AT", "USER", "HOST",
                        "AGENT"], rows))
    print(f"\n{len(locks)} lock(s)")
    return 0


def cmd_abort_txns(args: argparse.Namespace) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    ids = sorted(set(args.ids))
    client, transport = _connect(args)
    try:
        before = {t.id: t.state for t in client.get_open_txns_info().open_txns or []}
        client.abort_txns(ttypes.AbortTxnsRequest(txn_ids=ids))
        after = {t.id: t.state for t in client.get_open_txns_info().open_txns or []}
    finally:
        transport.close()
    result = []
    for t in ids:
        was, now = before.get(t), after.get(t)
        if was == 3 and now == 2:
            outcome = "aborted"
        elif was == 2:
            outcome = "already aborted"
        else:
            outcome = "not open (committed or unknown)"
        result.append({"txnid": t, "result": outcome})
    if args.json:
        print(json.dumps({"results": result}, indent=2))
    else:
        print(render_table(["TXNID", "RESULT"], [[r["txnid"], r["result"]] for r in result]))
    return 0
