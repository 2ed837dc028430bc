"""CREATE TABLE of the ACID tables the clients read and write (``spark.hive_acid`` and
``hms_txn.tables`` create them alike): managed, ``transactional``, full ACID ORC or
insert-only ORC/Parquet, ``bucketing_version=2``; and CREATE DATABASE.
"""

from __future__ import annotations

import time
from typing import Dict, Optional, Sequence, Tuple

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError
from hms_txn.clients.acid.metastore import T


def create_acid_table(ms: M.MetastoreConnection, table: str,
                      columns: Sequence[Tuple[str, str]], *, partition_by: Sequence[str] = (),
                      buckets: Optional[int] = None, bucket_by: Sequence[str] = (),
                      insert_only: bool = False, file_format: str = "orc",
                      if_not_exists: bool = False,
                      properties: Optional[Dict[str, str]] = None,
                      owner: Optional[str] = None) -> None:
    """CREATE a transactional table; ``columns`` (name, Hive type) include the partition
    columns named by ``partition_by``."""
    db, name = M.split_name(table)
    parts = [p.lower() for p in partition_by]
    by_name = {n.lower(): t for n, t in columns}
    missing = [p for p in parts if p not in by_name]
    if missing:
        raise HiveAcidError(f"partition columns {missing} are not in the schema")
    cols = [T.FieldSchema(n.lower(), t, "") for n, t in columns if n.lower() not in parts]
    pkeys = [T.FieldSchema(p, by_name[p], "") for p in parts]
    if file_format not in ("orc", "parquet"):
        raise HiveAcidError("file_format must be orc or parquet")
    if file_format == "parquet" and not insert_only:
        raise HiveAcidError("full-ACID tables are ORC; Parquet needs insert_only=True")
    if file_format == "orc":
        inf, outf, serde = M.ORC_INPUT, M.ORC_OUTPUT, M.ORC_SERDE
    else:
        inf, outf, serde = M.PARQUET_INPUT, M.PARQUET_OUTPUT, M.PARQUET_SERDE
    params = {"transactional": "true",
              "transactional_properties": "insert_only" if insert_only else "default",
              "bucketing_version": "2"}
    params.update(properties or {})
    if buckets is not None and (isinstance(buckets, bool) or not isinstance(buckets, int)
                                or buckets <= 0):
        raise HiveAcidError(f"buckets must be a positive number of buckets, not {buckets!r}")
    if bucket_by and not buckets:
        raise HiveAcidError("bucket_by needs buckets (the number of buckets)")
    unknown = [b for b in bucket_by if b.lower() not in {c.name for c in cols}]
    if unknown:
        raise HiveAcidError(f"bucket_by: {unknown} are not data columns of {db}.{name} "
                            f"(its data columns: {[c.name for c in cols]})")
    bcols = [b.lower() for b in bucket_by] or ([cols[0].name] if buckets else [])
    sd = T.StorageDescriptor(cols=cols, location=None, inputFormat=inf, outputFormat=outf,
                             compressed=False, numBuckets=buckets or -1,
                             serdeInfo=T.SerDeInfo(name=None, serializationLib=serde,
                                                   parameters={"serialization.format": "1"}),
                             bucketCols=bcols if buckets else [], sortCols=[], parameters={})
    t = T.Table(tableName=name, dbName=db, owner=owner or M.USER, createTime=int(time.time()),
                lastAccessTime=0, retention=0, sd=sd, partitionKeys=pkeys, parameters=params,
                tableType="MANAGED_TABLE")
    try:
        ms.create_table(t)
    except T.AlreadyExistsException:
        if not if_not_exists:
            raise HiveAcidError(f"table {db}.{name} already exists") from None


def create_database(ms: M.MetastoreConnection, name: str, *,
                    location: Optional[str] = None, owner: Optional[str] = None) -> None:
    """CREATE DATABASE IF NOT EXISTS ``name``, owned by ``owner`` (default: the login
    user)."""
    try:
        ms.create_database(T.Database(name=name.lower(), description="", locationUri=location,
                                      parameters={}, ownerName=owner or M.USER, ownerType=1))
    except T.AlreadyExistsException:
        pass
