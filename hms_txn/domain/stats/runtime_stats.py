"""Runtime statistics: the operator statistics HiveServer2 keeps in the metastore for query
re-execution (``hive.query.reexecution.stats.persist.scope=metastore``): ``add_runtime_stats``
and ``get_runtime_stats``, as Hive's ``ObjectStore`` answers them.

A stat is an opaque payload with a weight (how many operator entries it holds). Its create
time is set by the metastore (the one sent is ignored, as Hive's ``MRuntimeStat.fromThrift``
does). A read returns the newest first, older than ``max_create_time`` when that is positive,
until their weights reach ``max_weight`` (negative: no limit; the entry that reaches it is
included). Stats older than Hive's default ``metastore.runtime.stats.max.age`` (3 days) are
dropped as new ones arrive (Hive's ``RuntimeStatsCleanerTask``).
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.model.catalog import now_s
from hms_txn.store.schema import runtime_stats

MAX_AGE_S = 3 * 24 * 3600
_c = runtime_stats.c


def add(conn: Connection, weight: int | None, payload: bytes | None) -> None:
    if weight is None:
        raise MetastoreError("a runtime stat needs a weight")
    now = now_s()
    conn.execute(delete(runtime_stats).where(_c.create_time < now - MAX_AGE_S))
    conn.execute(insert(runtime_stats).values(create_time=now, weight=weight, payload=payload))


def read(conn: Connection, max_weight: int, max_create_time: int) -> list[tuple[int, int, bytes]]:
    """(create time, weight, payload) of the stats to answer, newest first."""
    query = select(_c.create_time, _c.weight, _c.payload).order_by(_c.create_time.desc(),
                                                                   _c.id.desc())
    if max_create_time > 0:
        query = query.where(_c.create_time < max_create_time)
    out: list[tuple[int, int, bytes]] = []
    total = 0
    for row in conn.execute(query):
        out.append((row.create_time, row.weight, row.payload))
        total += row.weight
        if max_weight >= 0 and total >= max_weight:
            break
    return out
