"""Every workload ``hms-txn bench`` runs, by name: the Thrift ones (``hms_bench.workloads``)
and the Iceberg REST catalog's (``hms_bench.iceberg_rest``), which build on the same
``Workload``; kept apart from both so neither imports the other's importer."""

from __future__ import annotations

from hms_bench.iceberg_rest import RestAppend, RestLoadTable
from hms_bench.workloads import (AddPartitions, GetTable, Locks, OpenCommit, PartitionsByNames,
                                 SparkPlanning, ValidWriteIds, Workload, Writer)

WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    OpenCommit(), Writer(), ValidWriteIds(), GetTable(), PartitionsByNames(), AddPartitions(),
    SparkPlanning(), Locks(), RestLoadTable(), RestAppend(),
)}
SCALE = "scale"   # the history scale curves (not a Workload: see runner.scale_curve)
ALL = list(WORKLOADS) + [SCALE]
