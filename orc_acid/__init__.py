"""orc_acid: read and write Hive full-ACID (v2) ORC tables as Hive 3+/4 lays them out.

Light modules (no pyarrow import; the metastore uses them): ``orc_acid.valid_ids``,
``orc_acid.layout``, ``orc_acid.snapshot``. The others import pyarrow and are imported
lazily on first use of their names from this package:

* reading: ``splits`` (a snapshot's files per bucket id), ``table_files`` (opening them),
  ``event_filters`` (write id validity, delete events), ``reader``;
* writing: ``writer`` (insert/delete/update deltas, bases), ``streaming_writer`` (one
  growing bucket file with intermediate footers), ``acid_file_writer`` (one file written as
  its events come), ``compaction`` (its tasks: ``compaction_tasks``, ``compaction_plan``,
  ``compaction_run``, ``compaction_events``, ``event_merge``);
* ``hive_types``: Hive column type strings as Arrow types;
* ``fs`` (light): a location's file system on ``pyarrow.fs`` by its scheme (``s3a://``,
  ``abfs://``, ``gs://``, ``hdfs://``, local), configured with Hadoop's keys; every public
  function takes a location plus an optional ``filesystem``.

orc_acid imports nothing of ``hms_txn`` or ``spark``; both import it.
"""

from .valid_ids import (LONG_MAX, RangeResponse, ValidIdListError, ValidTxnList,
                        ValidTxnWriteIdList, ValidWriteIdList)
from .layout import (LayoutError, decode_bucket, encode_bucket, format_base, format_bucket_file,
                     format_delete_delta, format_delta, parse_base, parse_bucket_file,
                     parse_delta, parse_original_file)
from .snapshot import (AcidSnapshot, NotEnoughHistoryError, SnapshotError, get_acid_state,
                       list_table_dir, select_snapshot)

_LAZY = {
    # splits
    "plan_splits": "splits", "plan_splits_for_snapshot": "splits", "Split": "splits",
    "DataFile": "splits", "DeleteFile": "splits",
    # table_files, event_filters
    "OrcAcidError": "table_files", "AcidSchemaError": "table_files",
    "infer_row_schema": "table_files", "delete_key_groups": "event_filters",
    # reader
    "read_table": "reader", "iter_batches": "reader", "read_split": "reader",
    "iter_split": "reader", "ROW_ID_TYPE": "reader",
    # writer
    "write_delta": "writer", "write_delete_delta": "writer", "write_update": "writer",
    "write_base": "writer", "write_acid_file": "writer", "write_insert_only": "writer",
    "acid_schema": "writer", "WriterOptions": "writer",
}

__all__ = [
    "LONG_MAX", "RangeResponse", "ValidIdListError", "ValidTxnList", "ValidTxnWriteIdList",
    "ValidWriteIdList", "LayoutError", "decode_bucket", "encode_bucket", "format_base",
    "format_bucket_file", "format_delete_delta", "format_delta", "parse_base",
    "parse_bucket_file", "parse_delta", "parse_original_file", "AcidSnapshot",
    "NotEnoughHistoryError", "SnapshotError", "get_acid_state", "list_table_dir",
    "select_snapshot", *_LAZY,
]


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'orc_acid' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value
