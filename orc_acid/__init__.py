"""orc_acid: read and write Hive full-ACID (v2) ORC tables as Hive 3+/4 lays them out.

Light modules (no pyarrow import; the metastore uses them): ``orc_acid.valid_ids``,
``orc_acid.layout``, ``orc_acid.snapshot``. The reader and writer (pyarrow) are imported
lazily on first use of their names from this package.
"""

from .valid_ids import (LONG_MAX, RangeResponse, ValidIdListError, ValidTxnList,
                        ValidTxnWriteIdList, ValidWriteIdList)
from .layout import (LayoutError, decode_bucket, encode_bucket, format_base, format_bucket_file,
                     format_delete_delta, format_delta, parse_base, parse_bucket_file,
                     parse_delta, parse_original_file)
from .snapshot import (AcidSnapshot, NotEnoughHistoryError, SnapshotError, get_acid_state,
                       list_table_dir, select_snapshot)

_LAZY = {
    # reader
    "read_table": "reader", "iter_batches": "reader", "plan_splits": "reader",
    "plan_splits_for_snapshot": "reader", "read_split": "reader", "iter_split": "reader",
    "Split": "reader", "delete_key_groups": "reader",
    "DataFile": "reader", "DeleteFile": "reader", "OrcAcidError": "reader",
    "AcidSchemaError": "reader", "infer_row_schema": "reader", "ROW_ID_TYPE": "reader",
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
