"""What a Spark scan reads: partitions pruned by the filters Spark pushed down.

The read locks and the planning of units are shared with ``hms_txn.tables``
(``hms_txn.clients.acid.scans``); what is Spark's own is the pushed-down filter classes.
"""

from __future__ import annotations

from typing import List, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull,
                                    IsNull, LessThan, LessThanOrEqual)

from hms_txn.clients.acid import metastore as M
from hms_txn.clients.acid.scans import plan_units as plan_target_units
from hms_txn.clients.acid.scans import scan_targets
from orc_acid.layout import DEFAULT_PARTITION_NAME
from orc_acid.table_io import ReadUnit

from . import _types as TY


# the pushed-down filters that can prune partitions
PRUNING_FILTERS = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In,
                   IsNull, IsNotNull)


def plan_units(ms: M.MetastoreConnection, info: M.TableInfo, txns: str, write_ids: str,
               txn_partitions: Sequence[str], filters) -> List[ReadUnit]:
    """The input partitions of a scan at the snapshot (``txns``, ``write_ids``) of the
    table partitions that can match ``filters``."""
    targets = scan_targets(ms, info, txn_partitions,
                           lambda values: partition_matches(filters, info.partition_keys,
                                                            values))
    return plan_target_units(info, txns, write_ids, targets)


_COMPARISONS = {EqualTo: lambda a, b: a == b, GreaterThan: lambda a, b: a > b,
                GreaterThanOrEqual: lambda a, b: a >= b, LessThan: lambda a, b: a < b,
                LessThanOrEqual: lambda a, b: a <= b}


def partition_matches(filters, partition_keys, values) -> bool:
    """Can a partition with these (string) values satisfy all pushed-down ``filters``
    (pyspark.sql.datasource filters on partition columns)? True when unsure."""
    keys = [k.lower() for k, _ in partition_keys]
    types = {k.lower(): t for k, t in partition_keys}
    vals = dict(zip(keys, values))
    for f in filters or ():
        col = f.attribute[0].lower() if len(f.attribute) == 1 else None
        if col not in vals:
            continue
        raw = vals[col]
        if raw == DEFAULT_PARTITION_NAME:
            v = None
        else:
            try:
                v = pa.array([raw]).cast(TY.arrow_type(TY.hive_to_spark(types[col])))[0].as_py()
            except Exception:
                continue
        try:
            if isinstance(f, IsNull):
                ok = v is None
            elif isinstance(f, IsNotNull):
                ok = v is not None
            elif v is None:
                ok = False
            elif isinstance(f, In):
                ok = v in f.value
            elif type(f) in _COMPARISONS:
                ok = _COMPARISONS[type(f)](v, f.value)
            else:
                ok = True
        except TypeError:
            ok = True
        if not ok:
            return False
    return True
