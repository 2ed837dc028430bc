"""``hms-txn compact`` and ``hms-txn show-compactions``.

The equivalents of Hive's ``ALTER TABLE ... [PARTITION (...)] COMPACT 'major'|'minor'
[AND WAIT]`` and ``SHOW COMPACTIONS``. Like the other client commands (``cli_txn``) they talk
to a running metastore over Thrift (``compact2`` / ``show_compact``), so they work against any
metastore and never bypass the server.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time

from hms_txn.cli.connection import EPILOG, add_connection_args, client_for, render_table, when
from hms_txn.cli.errors import CommandError
from hms_txn.cli.txn import split_object

TYPES = {1: "MINOR", 2: "MAJOR", 3: "REBALANCE"}
FINAL = {"succeeded", "failed", "refused", "did not initiate", "attempted", "aborted"}
OK = {"succeeded"}


def register_compact_commands(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.RawDescriptionHelpFormatter

    def add_conn(p: argparse.ArgumentParser) -> None:
        add_connection_args(p, json_help="print JSON instead of text")

    p = sub.add_parser(
        "compact", help="request a compaction of a table or partition",
        description="Queue a compaction (ALTER TABLE ... COMPACT) of a transactional table "
                    "or partition that exists (exit 2 otherwise). A server with "
                    "hive.compactor.worker.threads > 0 runs it, one with "
                    "hive.compactor.cleaner.on removes the old files afterwards. With --wait, "
                    "follow it through initiated -> working -> ready for cleaning -> succeeded "
                    "(or failed) as far as the server's configuration takes it: to 'ready for "
                    "cleaning' when it runs no Cleaner, not at all when it runs no worker "
                    "(the command says which); exit 0 when it gets there, 1 when it fails. A "
                    "request for an object already queued follows the queued compaction.",
        epilog=EPILOG, formatter_class=fmt)
    add_conn(p)
    p.add_argument("table", metavar="db.table", help="table to compact (db defaults to 'default')")
    p.add_argument("--partition", metavar="NAME", help="partition name, e.g. ds=2024-01-01/h=3")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--major", dest="ctype", action="store_const", const=2,
                      help="rewrite base + deltas into a new base (default)")
    kind.add_argument("--minor", dest="ctype", action="store_const", const=1,
                      help="merge the deltas into one delta and one delete delta")
    p.add_argument("--wait", action="store_true",
                   help="wait until it gets as far as the server's configuration lets it, or "
                        "fails")
    p.add_argument("--wait-timeout", type=float, default=0, metavar="SECONDS",
                   help="give up waiting after this long (exit 3; default: no limit)")
    p.add_argument("--poll", type=float, default=0.5, metavar="SECONDS",
                   help="how often --wait asks for the state (default 0.5)")
    p.set_defaults(func=cmd_compact, ctype=2)

    p = sub.add_parser("show-compactions", help="list queued, running and past compactions",
                       description="List compactions (SHOW COMPACTIONS): the queue and the "
                                   "retained history (hive.compactor.history.retention.*).",
                       epilog=EPILOG, formatter_class=fmt)
    add_conn(p)
    p.add_argument("object", nargs="?", metavar="db[.table]",
                   help="only compactions of this database or table")
    p.add_argument("--partition", metavar="NAME", help="only this partition")
    p.add_argument("--state", help="only this state (initiated, working, ready for cleaning, "
                                   "succeeded, failed, refused, ...)")
    p.add_argument("--limit", type=int, help="at most this many (newest first with --desc)")
    p.add_argument("--desc", action="store_true", help="newest first")
    p.set_defaults(func=cmd_show_compactions)


def _split(name: str) -> tuple[str, str]:
    db, dot, table = name.partition(".")
    return (db, table) if dot else ("default", db)


def _element(e) -> dict:
    return {
        "id": e.id, "dbname": e.dbname, "tablename": e.tablename,
        "partitionname": e.partitionname, "type": TYPES.get(e.type, str(e.type)),
        "state": e.state, "workerid": e.workerid, "enqueueTime": e.enqueueTime,
        "start": e.start, "endTime": e.endTime, "commitTime": e.commitTime,
        "cleanerStart": e.cleanerStart, "highestWriteId": e.hightestWriteId,
        "txnId": e.txnId, "nextTxnId": e.nextTxnId, "runAs": e.runAs,
        "initiatorId": e.initiatorId, "errorMessage": e.errorMessage,
    }


def _duration(e: dict) -> str:
    if not e["start"]:
        return ""
    end = e["endTime"] or e["commitTime"]
    if not end:
        return ""
    return f"{(end - e['start']) / 1000:.1f}s"


def cmd_compact(args: argparse.Namespace) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    db, table = _split(args.table)
    client = client_for(args)
    out = sys.stdout
    try:
        what = f"{db}.{table}" + (f"/{args.partition}" if args.partition else "")
        require_compactable(client, db, table, args.partition, what)
        resp = client.compact2(ttypes.CompactionRequest(
            dbname=db, tablename=table, partitionname=args.partition, type=args.ctype))
        cid = resp.id
        if not resp.accepted:
            msg = resp.errormessage or f"already queued as id {resp.id} ({resp.state})"
            queued = queued_id(resp)
            if args.json and not args.wait:
                print(json.dumps({"id": resp.id, "state": resp.state, "accepted": False,
                                  "message": msg, "queued_id": queued}))
                return 0
            print(f"{what}: {msg}", file=out)
            if queued is None:
                return 0 if not args.wait else 1
            cid = queued
            if args.wait:
                print(f"following compaction {cid}, queued before this request", file=out)
        elif not args.json or args.wait:
            print(f"{TYPES[args.ctype]} compaction {resp.id} of {what}: {resp.state}", file=out)
        if not args.wait:
            if args.json:
                print(json.dumps({"id": resp.id, "state": resp.state,
                                  "accepted": bool(resp.accepted)}))
            return 0
        target, why = reachable_state(client)
        print(f"waiting until it is {target!r}{why}", file=out)
        if target == "initiated":
            return 0
        return _follow(client, cid, args, out, target)
    finally:
        client.close()


# Hive 4's answer to a request for an object already queued (CompactFunction.execute): id
# -1, state "refused", and the queued entry's id in the message only.
_QUEUED_ID = re.compile(r"\bid=(\d+)")


def queued_id(resp) -> int | None:
    """The id of the queued compaction a refused compact2 names, or None."""
    found = _QUEUED_ID.search(resp.errormessage or "")
    return int(found.group(1)) if found else None


def require_compactable(client, db: str, table: str, partition: str | None, what: str) -> None:
    """CommandError (exit 2) unless the table (and partition) exists and is transactional:
    HiveServer2 checks this before it calls compact2 (AlterTableCompactAnalyzer: the table
    must resolve; Compaction is not allowed on non-ACID table), the metastore does not
    (Hive 4's HMSHandler.compact2 -> TxnHandler.compact queues whatever it is given)."""
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    try:
        found = client.get_table_acid_aware(db, table)
        if partition is not None:
            client.get_partition_by_name(db, table, partition)
    except ttypes.NoSuchObjectException as err:
        raise CommandError(f"cannot compact {what}: {err.message or 'no such object'}") from None
    params = found.parameters or {}
    if str(params.get("transactional", "")).lower() != "true":
        raise CommandError(f"cannot compact {what}: not a transactional table (compaction "
                           f"rewrites the base and delta directories of ACID tables only)")


def reachable_state(client) -> tuple[str, str]:
    """The state a queued compaction reaches on the server of ``client``, as its running
    configuration says (get_config_value), and why when it is not 'succeeded': no worker
    threads -- it stays 'initiated' (unless a worker of another server process runs it);
    no Cleaner -- it stops at 'ready for cleaning'. A server that does not answer these
    keys (a Hive 2/3 metastore does not know hive.compactor.cleaner.on, which Hive 4 runs by
    default) is taken to run both."""
    from thrift.Thrift import TException

    try:
        workers = client.get_config_value("hive.compactor.worker.threads", "1").strip()
        cleaner = client.get_config_value("hive.compactor.cleaner.on", "true").strip().lower()
    except TException:
        return "succeeded", ""
    if workers == "0":
        return "initiated", (" (the metastore runs no compaction worker, "
                             "hive.compactor.worker.threads=0: it stays queued until a worker "
                             "runs it; not waiting)")
    if cleaner == "false":
        return "ready for cleaning", (" (the metastore runs no Cleaner, "
                                      "hive.compactor.cleaner.on=false: the compacted-away files "
                                      "stay until one runs)")
    return "succeeded", ""


def _follow(client, cid: int, args, out, target: str) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    t0 = time.monotonic()
    tty = hasattr(out, "isatty") and out.isatty()
    spinner = "|/-\\"
    last = None
    tick = 0
    while True:
        got = client.show_compact(ttypes.ShowCompactRequest(id=cid)).compacts or []
        e = _element(got[0]) if got else None
        state = e["state"] if e else "gone"
        elapsed = time.monotonic() - t0
        if state != last:
            if tty:
                out.write("\r\033[K")
            detail = ""
            if e and state == "working":
                detail = f" on {e['workerid']}"
            elif e and state == "ready for cleaning":
                detail = (f" (highest write id {e['highestWriteId']}, compaction "
                          f"txnid:{e['txnId']} committed; old files go once no reader needs "
                          f"them)")
            elif e and state not in OK and state in FINAL and e["errorMessage"]:
                detail = f": {e['errorMessage']}"
            out.write(f"[{elapsed:6.1f}s] {state}{detail}\n")
            out.flush()
            last = state
        elif tty:
            out.write(f"\r{spinner[tick % 4]} {state} {elapsed:.1f}s")
            out.flush()
            tick += 1
        if state in FINAL or state == "gone" or state == target:
            if tty:
                out.write("\r\033[K")
            if args.json and e:
                print(json.dumps(e))
            return 0 if state in OK or state == target else 1
        if args.wait_timeout and elapsed > args.wait_timeout:
            if tty:
                out.write("\n")
            print(f"gave up waiting after {elapsed:.0f}s; compaction {cid} is {state}",
                  file=out)
            return 3
        time.sleep(max(0.05, args.poll))


def cmd_show_compactions(args: argparse.Namespace) -> int:
    from hms_txn.wire.thrift_gen.hive_metastore import ttypes

    db, table = split_object(args.object)
    client = client_for(args)
    try:
        resp = client.show_compact(ttypes.ShowCompactRequest(
            dbName=db, tbName=table, partName=args.partition, state=args.state,
            limit=args.limit, order="id desc" if args.desc else None))
    finally:
        client.close()
    items = [_element(e) for e in resp.compacts or []]
    if args.json:
        print(json.dumps({"compactions": items}, indent=2))
        return 0
    print(render_table(
        ["ID", "DATABASE", "TABLE", "PARTITION", "TYPE", "STATE", "WORKER", "ENQUEUED",
         "STARTED", "DURATION", "HIGHEST WRITE ID", "TXNID", "ERROR"],
        [[e["id"], e["dbname"], e["tablename"], e["partitionname"] or "", e["type"],
          e["state"], e["workerid"] or "", when(e["enqueueTime"]), when(e["start"]),
          _duration(e), e["highestWriteId"] or "", e["txnId"] or "",
          (e["errorMessage"] or "")[:60]] for e in items]))
    print(f"\n{len(items)} compaction(s)")
    return 0
