"""CREATE DATABASE, CREATE TABLE and DROP TABLE in the metastore, for hive_acid's tables.

``create_table`` makes the tables hive_acid reads and writes: managed, ``transactional``,
full ACID ORC or insert-only ORC/Parquet, ``bucketing_version=2``; an ORC table gets the
session's ORC codec as ``orc.compress`` unless ``properties`` say otherwise. The table
itself is made by the clients' shared ``hms_txn.clients.acid.ddl``.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Union

from pyspark.sql import SparkSession
from pyspark.sql import types as S
from pyspark.sql.types import _parse_datatype_string

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.ddl import create_acid_table
from hms_txn.clients.acid.ddl import create_database as acid_create_database
from hms_txn.clients.acid.metastore import T

from . import _types as TY
from ._errors import HiveAcidError
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
    columns = [(f.name, TY.spark_to_hive(f.dataType)) for f in schema.fields]
    params = dict(properties or {})
    codec = _orc_codec_of(session) if file_format == "orc" else None
    if codec and "orc.compress" not in params:
        params["orc.compress"] = codec
    create_acid_table(d.ms, table, columns, partition_by=partition_by, buckets=buckets,
                      bucket_by=bucket_by, insert_only=insert_only, file_format=file_format,
                      if_not_exists=if_not_exists, properties=params, owner=_owner(session))


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
    acid_create_database(registered_driver(session).ms, name, location=location,
                         owner=_owner(session))


def drop_table(session: SparkSession, table: str, *, if_exists: bool = True) -> None:
    d = registered_driver(session)
    db, name = M.split_name(table)
    try:
        d.ms.drop_table(db, name, True)
    except T.NoSuchObjectException:
        if not if_exists:
            raise HiveAcidError(f"table {db}.{name} does not exist (drop_table with "
                                f"if_exists=False)") from None
