"""``hms-txn show-transactions``, ``show-locks`` and ``abort-txns``.

The equivalents of Hive's SHOW TRANSACTIONS, SHOW LOCKS and ABORT TRANSACTIONS. They talk
to a running metastore over Thrift (any metastore: hms-txn or the Java one), so they see
exactly what clients see and never bypass the server's locking. The address is ``--uri``,
or else ``thrift://127.0.0.1:<hive.metastore.port>`` from ``--conf`` (default port 9083),
with the transport and protocol that configuration selects.
"""

from __future__ import annotations

import argparse
import json

from hms_txn.cli.connection import EPILOG, add_connection_args, client_for, render_table, when
from hms_txn.cli.errors import CommandError

TXN_STATES = {1: "COMMITTED", 2: "ABORTED", 3: "OPEN"}
ABORTED, OPEN = 2, 3
LOCK_STATES = {1: "ACQUIRED", 2: "WAITING", 3: "ABORT", 4: "NOT_ACQUIRED"}
LOCK_TYPES = {1: "SHARED_READ", 2: "SHARED_WRITE", 3: "EXCLUSIVE", 4: "EXCL_WRITE"}

def register_txn_commands(sub: argparse._SubParsersAction) -> None:
    def add_conn(p: argparse.ArgumentParser) -> None:
        add_connection_args(p, json_help="print JSON instead of a table")

    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("show-transactions", help="list open and aborted transactions",
                       description="List open and aborted transactions (SHOW TRANSACTIONS).",
                       epilog=EPILOG, formatter_class=fmt)
    add_conn(p)
    p.set_defaults(func=cmd_show_transactions)

    p = sub.add_parser("show-locks", help="list locks, optionally of one database or table",
                       description="List acquired and waiting locks (SHOW LOCKS [db[.table]]).",
                       epilog=EPILOG, formatter_class=fmt)
    add_conn(p)
    p.add_argument("object", nargs="?", metavar="db[.table]",
                   help="only locks on this database or table")
    p.add_argument("--partition", metavar="NAME", help="only locks on this partition (k=v/k2=v2)")
    p.add_argument("--txn", type=int, metavar="ID", help="only locks of this transaction")
    p.set_defaults(func=cmd_show_locks)

    p = sub.add_parser("abort-txns", help="abort transactions by id",
                       description="Abort the given transactions (ABORT TRANSACTIONS id ...). "
                                   "Ids that are not open are left alone and reported with "
                                   "why (already aborted, committed, unknown); exit 1 then.",
                       epilog=EPILOG, formatter_class=fmt)
    add_conn(p)
    p.add_argument("ids", nargs="+", type=int, metavar="ID", help="transaction id")
    p.set_defaults(func=cmd_abort_txns)


# -------------------------------------------------------------------------------- commands

def cmd_show_transactions(args: argparse.Namespace) -> int:
    client = client_for(args)
    try:
        info = client.get_open_txns_info()
    finally:
        client.close()
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
        [[t["txnid"], t["state"], when(t["startedTime"]), when(t["lastHeartbeatTime"]),
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
    client = client_for(args)
    try:
        resp = client.show_locks(ttypes.ShowLocksRequest(
            dbname=db, tablename=table, partname=args.partition, txnid=args.txn))
    finally:
        client.close()
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
                     when(e["lastheartbeat"]), when(e["acquiredat"]), e["user"],
                     e["hostname"], e["agentInfo"] or ""])
    print(render_table(["LOCKID", "DATABASE", "TABLE", "PARTITION", "STATE", "BLOCKEDBY",
                        "TYPE", "TXNID", "LAST HEARTBEAT", "ACQUIRED AT", "USER", "HOST",
                        "AGENT"], rows))
    print(f"\n{len(locks)} lock(s)")
    return 0


def cmd_abort_txns(args: argparse.Namespace) -> int:
    """Hive's ABORT TRANSACTIONS calls abort_txns, which aborts the open ones and answers
    nothing about the others (Hive 4 TxnHandler.abortTxns: a warning that it "only aborted
    N out of M transactions"). So the open ones are aborted that way, and each other id gets
    abort_txn, whose answer says why it is not open (TxnUtils.raiseTxnUnexpectedState:
    NoSuchTxnException "... is already committed." or "No such transaction ...";
    AbortTxnFunction takes an already aborted one silently, which the listing before tells).
    Exit 1 when any id was not aborted."""
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    ids = sorted(set(args.ids))
    client = client_for(args)
    try:
        before = {t.id: t.state for t in client.get_open_txns_info().open_txns or []}
        open_ids = [t for t in ids if before.get(t) == OPEN]
        if open_ids:
            client.abort_txns(ttypes.AbortTxnsRequest(txn_ids=open_ids))
        after = {t.id: t.state for t in client.get_open_txns_info().open_txns or []}
        result = []
        for t in ids:
            if before.get(t) == ABORTED:
                outcome, why = "already aborted", None
            elif before.get(t) == OPEN and after.get(t) == ABORTED:
                outcome, why = "aborted", None
            else:
                outcome, why = _abort_one(client, t)
            result.append({"txnid": t, "result": outcome, **({"reason": why} if why else {})})
    finally:
        client.close()
    if args.json:
        print(json.dumps({"results": result}, indent=2))
    else:
        print(render_table(["TXNID", "RESULT"], [
            [r["txnid"], r["result"] + (f" ({r['reason']})" if "reason" in r else "")]
            for r in result]))
    failed = [r for r in result if r["result"] != "aborted"]
    if failed:
        raise CommandError(f"{len(failed)} of {len(result)} transaction(s) not aborted: " +
                           ", ".join(f"{r['txnid']} {r['result']}" for r in failed), status=1)
    return 0


def _abort_one(client, txn_id: int) -> tuple[str, str | None]:
    """abort_txn of one id the listing did not show open: (outcome, the server's reason)."""
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    try:
        client.abort_txn(ttypes.AbortTxnRequest(txnid=txn_id))
    except ttypes.TxnAbortedException as err:
        return "already aborted", err.message
    except ttypes.NoSuchTxnException as err:
        message = err.message or ""
        return ("committed" if "committed" in message else "unknown"), message
    return "aborted", None      # opened since the listing
