"""Builders shared by the column statistics tests: statistics objects, transactions as Hive's
clients run them, and reading the notification log."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest

from hms_txn.clients.snapshots import valid_txn_list, valid_write_id_list
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T


def longs(low, high, nulls, ndv, **kw) -> T.ColumnStatisticsData:
    return T.ColumnStatisticsData(longStats=T.LongColumnStatsData(
        lowValue=low, highValue=high, numNulls=nulls, numDVs=ndv, **kw))


def strings(maxlen, avglen, nulls, ndv) -> T.ColumnStatisticsData:
    return T.ColumnStatisticsData(stringStats=T.StringColumnStatsData(
        maxColLen=maxlen, avgColLen=avglen, numNulls=nulls, numDVs=ndv))


def booleans(trues, falses, nulls) -> T.ColumnStatisticsData:
    return T.ColumnStatisticsData(booleanStats=T.BooleanColumnStatsData(
        numTrues=trues, numFalses=falses, numNulls=nulls))


def doubles(low, high, nulls, ndv) -> T.ColumnStatisticsData:
    return T.ColumnStatisticsData(doubleStats=T.DoubleColumnStatsData(
        lowValue=low, highValue=high, numNulls=nulls, numDVs=ndv))


def col_stats(db, table, objs, part=None, engine=None) -> T.ColumnStatistics:
    """ColumnStatistics of (name, type, data) triples, table-level unless ``part``."""
    return T.ColumnStatistics(
        statsDesc=T.ColumnStatisticsDesc(isTblLevel=part is None, dbName=db, tableName=table,
                                         partName=part),
        statsObj=[T.ColumnStatisticsObj(n, ty, d) for n, ty, d in objs], engine=engine)


def by_name(objs) -> dict:
    """{column: the set member of its ColumnStatisticsData}."""
    out = {}
    for o in objs or []:
        d = o.statsData
        out[o.colName] = next(getattr(d, k) for k in d.__dict__ if getattr(d, k) is not None)
    return out


def accurate(params) -> dict | None:
    value = (params or {}).get("COLUMN_STATS_ACCURATE")
    return None if value is None else json.loads(value)


class Writer:
    """One transaction writing a table as HiveServer2 does (hs2.md, transaction skeleton):
    open_txns, allocate_table_write_ids, the writer's ValidWriteIdList from get_open_txns
    and get_valid_write_ids (DbTxnManager.getValidWriteIds)."""

    def __init__(self, client, db: str, table: str):
        self.client, self.db, self.table = client, db, table
        self.txn = client.open_txns(T.OpenTxnRequest(num_txns=1, user="hive",
                                                     hostname="hs2")).txn_ids[0]
        self.write_id = client.allocate_table_write_ids(T.AllocateTableWriteIdsRequest(
            dbName=db, tableName=table, txnIds=[self.txn])).txnToWriteIds[0].writeId
        self.valid_write_ids = snapshot(client, db, table, self.txn)

    def commit(self) -> None:
        self.client.commit_txn(T.CommitTxnRequest(txnid=self.txn))

    def abort(self) -> None:
        self.client.abort_txn(T.AbortTxnRequest(txnid=self.txn))


def snapshot(client, db: str, table: str, current_txn: int = 0) -> str:
    """A reader's (or, inside ``current_txn``, a writer's) ValidWriteIdList of one table."""
    txns = valid_txn_list(client.get_open_txns(), current_txn)
    r = client.get_valid_write_ids(T.GetValidWriteIdsRequest(
        fullTableNames=[f"{db}.{table}"], validTxnList=str(txns)))
    return str(valid_write_id_list(r.tblValidWriteIds[0]))


def events_since(client, last: int, types=None) -> list:
    events = client.get_next_notification(T.NotificationEventRequest(lastEvent=last)).events
    return [e for e in events if types is None or e.eventType in types]


def last_event_id(client) -> int:
    return client.get_current_notificationEventId().eventId


@contextmanager
def refused(cls, message: str):
    """The call raises ``cls`` whose message is ``message`` (or starts with it, when
    ``message`` ends with "...")."""
    with pytest.raises(cls) as err:
        yield err
    got = err.value.message
    if message.endswith("..."):
        assert got.startswith(message[:-3]), got
    else:
        assert got == message, got
