"""Metastore structs as the engines build them, for either generated binding.

Every builder takes the binding's ``ttypes`` module first: ours (the Hive 4 IDL, which
HiveServer2 4, Trino and Impala speak) or hmsclient's (the Hive 2.3 IDL of Spark's
built-in client), so a struct has exactly the fields the engine's IDL has. Also here:
the connection to a server with hmsclient's Hive 2.3 bindings, and the set-up of the
objects a statement starts from, made with calls that exist today (``given_*``).
"""

from __future__ import annotations

import json
import time
from types import ModuleType

from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from hms_txn.clients.snapshots import valid_txn_list, valid_write_id_list
from hms_txn.wire.client import table_request
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

ORC_IN = "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat"
ORC_OUT = "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat"
ORC_SERDE = "org.apache.hadoop.hive.ql.io.orc.OrcSerde"
COLUMNS = (("id", "bigint"), ("name", "string"))
PARTITION_KEY = ("dt", "string")
DAYS = ("2024-01-01", "2024-01-02")
UPPER_UDF = "org.apache.hadoop.hive.ql.udf.generic.GenericUDFUpper"


def columns(tt: ModuleType, cols=COLUMNS) -> list:
    return [tt.FieldSchema(name, type_, "") for name, type_ in cols]


def storage(tt: ModuleType, cols=COLUMNS, location: str | None = None):
    return tt.StorageDescriptor(
        cols=columns(tt, cols), location=location, inputFormat=ORC_IN, outputFormat=ORC_OUT,
        compressed=False, numBuckets=-1,
        serdeInfo=tt.SerDeInfo(serializationLib=ORC_SERDE, parameters={}),
        bucketCols=[], sortCols=[], parameters={})


def table(tt: ModuleType, db: str, name: str, *, partitioned: bool = False,
          acid: bool = False, owner: str = "engine", **fields):
    """A managed ORC table (``transactional=true`` for ``acid``); ``fields`` adds what
    one engine sets besides (``catName`` ...)."""
    params = {"transactional": "true"} if acid else {}
    return tt.Table(
        tableName=name, dbName=db, owner=owner, createTime=int(time.time()), lastAccessTime=0,
        retention=0, sd=storage(tt),
        partitionKeys=columns(tt, [PARTITION_KEY]) if partitioned else [],
        parameters=params, tableType="MANAGED_TABLE", **fields)


def partition(tt: ModuleType, tbl, values: list[str], **fields):
    sd = storage(tt)
    if tbl.sd is not None and tbl.sd.location:
        sd.location = tbl.sd.location + "/" + "/".join(
            f"{k.name}={v}" for k, v in zip(tbl.partitionKeys, values))
    return tt.Partition(values=values, dbName=tbl.dbName, tableName=tbl.tableName,
                        createTime=int(time.time()), lastAccessTime=0, sd=sd, parameters={},
                        **fields)


def long_stats(tt: ModuleType, col: str, low: int, high: int, nulls: int = 0, ndv: int = 0):
    return tt.ColumnStatisticsObj(colName=col, colType="bigint", statsData=tt.ColumnStatisticsData(
        longStats=tt.LongColumnStatsData(lowValue=low, highValue=high, numNulls=nulls,
                                         numDVs=ndv)))


def string_stats(tt: ModuleType, col: str, max_len: int, avg_len: float, nulls: int = 0,
                 ndv: int = 0):
    return tt.ColumnStatisticsObj(colName=col, colType="string", statsData=tt.ColumnStatisticsData(
        stringStats=tt.StringColumnStatsData(maxColLen=max_len, avgColLen=avg_len,
                                             numNulls=nulls, numDVs=ndv)))


def column_stats(tt: ModuleType, db: str, name: str, *, part_name: str | None = None,
                 **fields):
    """The statistics of the rows the replays insert: ids 1..3, names of 1..5 chars."""
    return tt.ColumnStatistics(
        statsDesc=tt.ColumnStatisticsDesc(isTblLevel=part_name is None, dbName=db,
                                          tableName=name, partName=part_name,
                                          lastAnalyzed=int(time.time()),
                                          **({"catName": fields.pop("catName")}
                                             if "catName" in fields else {})),
        statsObj=[long_stats(tt, "id", 1, 3, 0, 3), string_stats(tt, "name", 5, 2.5, 0, 3)],
        **fields)


# COLUMN_STATS_ACCURATE of a table or partition whose statistics are all accurate: what
# HiveServer2 sends for a new managed table (CreateTableDesc.toTable →
# StatsSetupConst.setStatsStateForCreateTable) or a new partition (Hive.loadPartitionInternal),
# and keeps through BasicStatsTask's update (setBasicStatsState; Trino and Impala leave it
# alone). The metastore merges column
# statistics only of the columns it lists (MetaStoreServerUtils.getMergableCols).
ALL_STATS_ACCURATE = {"COLUMN_STATS_ACCURATE": json.dumps(
    {"BASIC_STATS": "true", "COLUMN_STATS": {"id": "true", "name": "true"}},
    separators=(",", ":"))}


def basic_stats(rows: int = 3, files: int = 1, size: int = 600) -> dict[str, str]:
    """The table/partition parameters of Hive's basic statistics (StatsSetupConst)."""
    return {"numRows": str(rows), "numFiles": str(files), "totalSize": str(size),
            "rawDataSize": str(rows * 20)}


def with_params(struct, params: dict[str, str]):
    struct.parameters = {**(struct.parameters or {}), **params}
    return struct


# --------------------------------------------------------------------------- snapshots

def txn_list(state: dict, key: str, txn_key: str | None = "txn") -> str:
    """Hive's ValidTxnList string of a saved ``GetOpenTxnsResponse`` (as
    TxnCommonUtils.createValidReadTxnList builds it inside the statement's transaction)."""
    current = state[txn_key].txn_ids[0] if txn_key else 0
    return str(valid_txn_list(state[key], current))


def write_id_list(state: dict, key: str, index: int = 0) -> str:
    """The table's ValidWriteIdList string of a saved ``GetValidWriteIdsResponse``."""
    return str(valid_write_id_list(state[key].tblValidWriteIds[index]))


def min_history_write_ids(state: dict, key: str) -> dict[str, int]:
    """What DbTxnManager.addWriteIdsToMinHistory sends per transactional input: the
    table's minOpenWriteId, or its high watermark + 1 when none is open."""
    out = {}
    for ids in state[key].tblValidWriteIds:
        out[ids.fullTableName] = (ids.minOpenWriteId if ids.minOpenWriteId is not None
                                  else ids.writeIdHighWaterMark + 1)
    return out


# --------------------------------------------------------------------------- connections

def connect_hive23(port: int):
    """A client of hmsclient's Hive 2.3 bindings (the IDL Spark's built-in client speaks),
    over the buffered binary transport HiveMetaStoreClient 2.3 opens."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as H23
    sock = TSocket.TSocket("127.0.0.1", port)
    sock.setTimeout(60000)
    transport = TTransport.TBufferedTransport(sock)
    transport.open()
    client = H23.Client(TBinaryProtocol.TBinaryProtocol(transport))
    client.close = transport.close
    return client


# --------------------------------------------------------------------------- set-up

def given_database(client, name: str, **fields) -> None:
    client.create_database(t.Database(name=name, description=f"{name} for the replay",
                                      parameters=fields.pop("parameters", {}),
                                      ownerName="setup", ownerType=t.PrincipalType.USER,
                                      **fields))


def given_table(client, db: str, name: str, *, partitioned: bool = False, acid: bool = False,
                days=DAYS, params: dict[str, str] | None = None) -> t.Table:
    """A table (with a partition per day when partitioned), made with our client."""
    tbl = table(t, db, name, partitioned=partitioned, acid=acid, owner="setup")
    tbl.parameters.update(params or {})
    client.create_table(tbl)
    tbl = client.get_table_req(table_request(db, name)).table   # as an ACID-aware client
    if partitioned and days:
        client.add_partitions([partition(t, tbl, [d]) for d in days])
    return tbl


def given_committed_write(client, db: str, name: str, user: str = "setup") -> int:
    """One committed transaction that wrote to an ACID table (as an earlier INSERT did);
    its write id."""
    txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user=user, hostname="setup")).txn_ids[0]
    write_id = client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
        dbName=db, tableName=name, txnIds=[txn])).txnToWriteIds[0].writeId
    client.commit_txn(t.CommitTxnRequest(txnid=txn))
    return write_id
