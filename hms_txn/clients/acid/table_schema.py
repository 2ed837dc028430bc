"""A table's columns as Arrow, and what a statement's writer needs to write into it: one
definition for every client (``spark.hive_acid``'s tasks and ``hms_txn.tables``), so they
write the same files.

The Arrow types are ``orc_acid.hive_types``' reading of the metastore's column types (the
project's one reader of Hive type strings).
"""

from __future__ import annotations

import pyarrow as pa

from orc_acid.hive_types import UnsupportedHiveType, arrow_type
from orc_acid.reader import ROW_ID_TYPE
from orc_acid.table_io import ROW_ID, WriteSpec

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.errors import HiveAcidError


def table_schema(info: M.TableInfo, with_row_id: bool = False) -> pa.Schema:
    """The table's columns: [ROW__ID,] data columns, partition columns."""
    fields = [pa.field(ROW_ID, ROW_ID_TYPE)] if with_row_id else []
    for name, hive_type in info.columns + info.partition_keys:
        try:
            fields.append(pa.field(name, arrow_type(hive_type)))
        except UnsupportedHiveType:
            raise HiveAcidError(f"{info.full_name}.{name}: unsupported Hive type "
                                f"{hive_type!r}") from None
    return pa.schema(fields)


def data_schema(info: M.TableInfo) -> pa.Schema:
    """The table's data columns (what its files hold)."""
    full = table_schema(info)
    return pa.schema([full.field(n) for n, _ in info.columns])


def write_spec(info: M.TableInfo, write_id: int, statement_id: int, mode: str) -> WriteSpec:
    """What a writer needs to write into ``info``'s table for one statement (picklable):
    ``mode`` append, overwrite or dml."""
    return WriteSpec(location=info.location, data_schema=data_schema(info),
                     part_keys=tuple(info.part_names), write_id=write_id,
                     statement_id=statement_id, mode=mode, insert_only=info.insert_only,
                     file_format=info.file_format, bucketed=info.num_buckets > 0,
                     compression=info.compression, filesystem=info.fs,
                     file_version=info.orc_file_version)
