"""Hive's small record stores: runtime statistics (``domain.stats.runtime_stats``), the legacy
types (``domain.catalog.type_definitions``) and partition event marks
(``domain.catalog.partition_events``). In extension mode they are forwarded to the upstream
(docs/extension-mode.md).
"""

from __future__ import annotations

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.catalog import partition_events, type_definitions
from hms_txn.domain.stats import runtime_stats
from hms_txn.domain.model.qualified_names import parse_db_name
from hms_txn.domain.catalog.type_definitions import TypeDefinition
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


class RuntimeStatsService:
    """``add_runtime_stats``, ``get_runtime_stats``."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    def add_runtime_stats(self, stat):
        if stat is None:
            raise MetastoreError("add_runtime_stats needs a stat")
        self.units.write(lambda conn: runtime_stats.add(conn, stat.weight, stat.payload))

    def get_runtime_stats(self, rqst):
        found = self.units.read(lambda conn: runtime_stats.read(
            conn, rqst.maxWeight if rqst.maxWeight is not None else -1,
            rqst.maxCreateTime or 0))
        return [t.RuntimeStat(createTime=c, weight=w, payload=p) for c, w, p in found]


class TypeService:
    """``create_type``, ``get_type``, ``drop_type``, ``get_type_all``."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    def create_type(self, type_def):
        if type_def is None:
            raise MetastoreError("create_type needs a type")
        definition = TypeDefinition(type_def.name, type_def.type1, type_def.type2,
                                    [to_doc(f) for f in type_def.fields or ()])
        self.units.write(lambda conn: type_definitions.create(conn, definition))
        return True

    def get_type(self, name):
        d = self.units.read(lambda conn: type_definitions.get(conn, name))
        return t.Type(name=d.name, type1=d.type1, type2=d.type2,
                      fields=[from_doc(t.FieldSchema, f) for f in d.fields])

    def drop_type(self, name):
        return self.units.write(lambda conn: type_definitions.drop(conn, name))

    def get_type_all(self, name):
        return type_definitions.get_all(name)


class PartitionEventService:
    """``markPartitionForEvent``, ``isPartitionMarkedForEvent`` (database names may carry
    the catalog: ``@hive#db``)."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    def markPartitionForEvent(self, db_name, tbl_name, part_vals, eventType):
        cat, db = parse_db_name(db_name)
        self._run(self.units.write, partition_events.mark, cat, db, tbl_name, part_vals,
                  eventType)

    def isPartitionMarkedForEvent(self, db_name, tbl_name, part_vals, eventType):
        cat, db = parse_db_name(db_name)
        return self._run(self.units.read, partition_events.is_marked, cat, db, tbl_name,
                         part_vals, eventType)

    @staticmethod
    def _run(unit, work, *args):
        try:
            return unit(lambda conn: work(conn, *args))
        except partition_events.UnknownTable as err:
            raise t.UnknownTableException(message=err.message) from None
        except partition_events.InvalidPartition as err:
            raise t.InvalidPartitionException(message=err.message) from None
