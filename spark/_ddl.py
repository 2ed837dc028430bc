"""CREATE DATABASE, CREATE TABLE and DROP TABLE in the metastore, for hive_acid's tables.

``create_table`` makes the tables hive_acid reads and writes: managed, ``transactional``,
full ACID ORC or insert-only ORC/Parquet, ``bucketing_version=2``; an ORC table gets the
session's ORC codec as ``orc.compress`` unless ``properties`` say otherwise.
"""

from __future__ import annotations

import time
from typing import Dict, Optional, Sequence, Union

from pyspark.sql import SparkSession
from pyspark.sql import types as S
from pyspark.sql.types import _parse_datatype_string

from . import _metastore as M
from . import _types as TY
from ._errors import HiveAcidError
from ._metastore import T
from ._session import registered_driver

# Spark's ORC codec names -> the table property ``orc.compress`` that Hive's writers read.
_ORC_CODECS = {"none": "NONE", "uncompressed": "NONE", "snappy": "SNAPPY", "zlib": "ZLIB",
               "lz4": "LZ4", "zstd": "ZSTD"}


def create_table(session: SparkSession, table: str, schema: Union[S.StructType, str], *,
                 partition_by: Sequence[str] = (), buckets: Optional[int] = None,
                 bucket_by: Sequence[str] = (), insert_only: bool = False,
                 file_format: str = "orc", if_not_exists: bool = False,
                 properties: Optional[Dict[str, str]] = None) -> None:
    """CREATE a transactional table (full ACID ORC, or insert-only ORC/Parquet). ``schema``
    (a StructType or DDL string) includes the partition columns."""
    d = registered_driver(session)
    if isinstance(schema, str):
        schema = _parse_datatype_string(schema)
        if not isinstance(schema, S.StructType):
            raise HiveAcidError("schema must be a struct")
    db, name = M.split_name(table)
    parts = [p.lower() for p in partition_by]
    by_name = {f.name.lower(): f for f in schema.fields}
    missing = [p for p in parts if p not in by_name]
    if missing:
        raise HiveAcidError(f"partition columns {missing} are not in the schema")
    cols = [T.FieldSchema(f.name.lower(), TY.spark_to_hive(f.dataType), "")
            for f in schema.fields if f.name.lower() not in parts]
    pkeys = [T.FieldSchema(p, TY.spark_to_hive(by_name[p].dataType), "") for p in parts]
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
    if file_format == "orc":
        codec = _orc_codec_of(session)
        if codec:
            params["orc.compress"] = codec
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
    t = T.Table(tableName=name, dbName=db, owner=_owner(session), createTime=int(time.time()),
                lastAccessTime=0, retention=0, sd=sd, partitionKeys=pkeys, parameters=params,
                tableType="MANAGED_TABLE")
    try:
        d.ms.create_table(t)
    except T.AlreadyExistsException:
        if not if_not_exists:
            raise HiveAcidError(f"table {db}.{name} already exists") from None


def _owner(session: SparkSession) -> str:
    """The owner of what the session creates: Spark's user, as Spark's own CREATE TABLE
    records it (the short name of its Kerberos principal, else the login user)."""
    return session.sparkContext.sparkUser() or M.USER


def _orc_codec_of(session: SparkSession) -> Optional[str]:
    """The codec a table created from this session gets: the session's own ORC codec
    (``spark.sql.orc.compression.codec``, snappy unless changed), so ACID tables cost what
    Spark's native ORC tables cost. A codec our writer cannot produce (lzo, brotli) leaves
    the property unset, i.e. Hive's default, ZLIB."""
    name = (session.conf.get("spark.sql.orc.compression.codec", "snappy") or "snappy")
    return _ORC_CODECS.get(name.strip().lower())


def create_database(session: SparkSession, name: str, *, location: Optional[str] = None
                    ) -> None:
    """CREATE DATABASE IF NOT EXISTS ``name`` in the metastore."""
    d = registered_driver(session)
    try:
        d.ms.create_database(T.Database(name=name.lower(), description="",
                                        locationUri=location, parameters={},
                                        ownerName=_owner(session), ownerType=1))
    except T.AlreadyExistsException:
        pass


def drop_table(session: SparkSession, table: str, *, if_exists: bool = True) -> None:
    d = registered_driver(session)
    db, name = M.split_name(table)
    try:
        d.ms.drop_table(db, name, True)
    except T.NoSuchObjectException:
        if not if_exists:
            raise HiveAcidError(f"table {db}.{name} does not exist (drop_table with "
                                f"if_exists=False)") from None
