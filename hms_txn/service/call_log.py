"""One structured log record per transaction call, carrying the txn and lock ids it concerns.

Which id a call concerns is read from its request struct (or, for ``open_txns`` and
``lock``, from the response), so the record can be found by ``txnid`` in JSON logs. Calls
that change state log at INFO; the polling calls (``check_lock``, heartbeats, snapshot
reads) at DEBUG, because clients repeat them every few seconds for every open txn.
"""

from __future__ import annotations

import logging
from typing import Any

from hms_txn.common import logs

log = logging.getLogger("hms_txn.txn_calls")

# method -> level of its record
TXN_CALLS: dict[str, int] = {
    **dict.fromkeys(("open_txns", "commit_txn", "abort_txn", "abort_txns",
                     "allocate_table_write_ids", "lock", "unlock", "add_dynamic_partitions",
                     "compact", "compact2"), logging.INFO),
    **dict.fromkeys(("check_lock", "heartbeat", "heartbeat_txn_range", "get_open_txns",
                     "get_open_txns_info", "get_open_txns_req", "get_valid_write_ids",
                     "show_locks", "get_latest_txnid_in_conflict"), logging.DEBUG),
}

_TXN_FIELDS = ("txnid", "txn_id", "txnId", "txnIds", "txn_ids", "txnids")


def _first(args: tuple) -> Any:
    return args[0] if args else None


def request_ids(method: str, args: tuple) -> dict[str, Any]:
    """txnid / lockid named by a call's arguments (None when it names none)."""
    rqst = _first(args)
    if isinstance(rqst, int):  # commit/abort of Hive 1 style, get_latest_txnid_in_conflict
        return {"txnid": rqst}
    found: dict[str, Any] = {}
    for name in _TXN_FIELDS:
        value = getattr(rqst, name, None)
        if value:
            found["txnid"] = list(value) if isinstance(value, (list, tuple)) else value
            break
    if method == "heartbeat_txn_range" and getattr(rqst, "min", None) is not None:
        found["txnid"] = f"{rqst.min}-{rqst.max}"
    lockid = getattr(rqst, "lockid", None)
    if lockid:
        found["lockid"] = lockid
    return found


def response_ids(method: str, result: Any) -> dict[str, Any]:
    if method == "open_txns":
        ids = getattr(result, "txn_ids", None) or []
        return {"txnid": ids[0] if len(ids) == 1 else list(ids)}
    if method == "lock" and getattr(result, "lockid", None):
        return {"lockid": result.lockid}
    return {}


def record(method: str, level: int, seconds: float, failure: BaseException | None) -> None:
    """Log the call that just ended (its ids are in the log context)."""
    if not log.isEnabledFor(level):
        return
    outcome = "ok" if failure is None else f"{type(failure).__name__}: {getattr(failure, 'message', None) or failure}"
    log.log(level, "%s %s (%.1f ms)", method, outcome, seconds * 1000.0)


def bind_response(method: str, result: Any) -> None:
    ids = response_ids(method, result)
    if ids:
        logs.bind(**ids)
