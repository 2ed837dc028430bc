"""Thrift constraint calls: add_primary_key ... add_check_constraint, drop_constraint, the
get_* calls, get_all_table_constraints and create_table_with_constraints.

The rules and Hive's answers are in ``hms_txn.domain.catalog.constraints``. Hive's store throws
InvalidObjectException for a missing table or column or a taken name, which the add calls
do not declare (Hive's clients then get INTERNAL_ERROR without the text, and retry it);
here such an error reaches them as the declared MetaException with Hive's text. Likewise a
missing constraint in drop_constraint is the declared NoSuchObjectException (Hive turns it
into an undeclared InvalidObjectException).
"""

from __future__ import annotations

from typing import Sequence

from hms_txn.domain.catalog import constraints
from hms_txn.domain.catalog.constraints import Constraints
from hms_txn.domain.model.qualified_names import DEFAULT_CATALOG
from hms_txn.domain.catalog.tables import Tables
from hms_txn.domain.model.warehouse import Warehouse
from hms_txn.service.catalog.owners import owned_table
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

# The Thrift struct of each kind's columns.
_STRUCTS = {
    "primary_keys": t.SQLPrimaryKey, "foreign_keys": t.SQLForeignKey,
    "unique_constraints": t.SQLUniqueConstraint, "not_null_constraints": t.SQLNotNullConstraint,
    "default_constraints": t.SQLDefaultConstraint, "check_constraints": t.SQLCheckConstraint,
}


def constraint_docs(primary_keys: Sequence | None = None, foreign_keys: Sequence | None = None,
                    unique_constraints: Sequence | None = None,
                    not_null_constraints: Sequence | None = None,
                    default_constraints: Sequence | None = None,
                    check_constraints: Sequence | None = None) -> dict[str, list[dict]]:
    """The six constraint lists of a table being created, as documents by kind."""
    lists = {"primary_keys": primary_keys, "foreign_keys": foreign_keys,
             "unique_constraints": unique_constraints,
             "not_null_constraints": not_null_constraints,
             "default_constraints": default_constraints, "check_constraints": check_constraints}
    return {which: [to_doc(c) for c in cols or []] for which, cols in lists.items()}


def request_constraint_docs(request: t.CreateTableRequest) -> dict[str, list[dict]]:
    """The constraint lists a ``CreateTableRequest`` carries (each may be unset)."""
    return constraint_docs(request.primaryKeys, request.foreignKeys, request.uniqueConstraints,
                           request.notNullConstraints, request.defaultConstraints,
                           request.checkConstraints)


def _structs(which: str, docs: list[dict]) -> list:
    return [from_doc(_STRUCTS[which], d) for d in docs]


class ConstraintService:
    """Table constraints, stored by hms-txn (extension mode forwards them instead)."""

    def __init__(self, units: UnitOfWork, warehouse: Warehouse, tables: Tables,
                 constraints: Constraints):
        self.units = units
        self.warehouse = warehouse
        self.tables = tables
        self.constraints = constraints

    def create_table_with_constraints(self, tbl, primaryKeys, foreignKeys, uniqueConstraints,
                                      notNullConstraints, defaultConstraints, checkConstraints):
        lists = constraint_docs(primaryKeys, foreignKeys, uniqueConstraints, notNullConstraints,
                                defaultConstraints, checkConstraints)
        owned_table(tbl)
        files = self.units.write(lambda c: self.tables.create(c, to_doc(tbl), constraints=lists))
        files.apply(self.warehouse)

    # ---------------------------------------------------------------- changes

    def _add(self, which: str, columns) -> None:
        docs = [to_doc(c) for c in columns or []]
        self.units.write(lambda c: self.constraints.add(c, which, docs))

    def add_primary_key(self, req):
        self._add("primary_keys", req.primaryKeyCols)

    def add_foreign_key(self, req):
        self._add("foreign_keys", req.foreignKeyCols)

    def add_unique_constraint(self, req):
        self._add("unique_constraints", req.uniqueConstraintCols)

    def add_not_null_constraint(self, req):
        self._add("not_null_constraints", req.notNullConstraintCols)

    def add_default_constraint(self, req):
        self._add("default_constraints", req.defaultConstraintCols)

    def add_check_constraint(self, req):
        self._add("check_constraints", req.checkConstraintCols)

    def drop_constraint(self, req):
        self.units.write(lambda c: self.constraints.drop(
            c, req.catName or DEFAULT_CATALOG, req.dbname, req.tablename, req.constraintname))

    # ---------------------------------------------------------------- reads

    def _read(self, which: str, catalog, db, table) -> list:
        docs = self.units.read(lambda c: constraints.read(c, which, catalog or DEFAULT_CATALOG,
                                                          db, table))
        return _structs(which, docs)

    def get_primary_keys(self, request):
        return t.PrimaryKeysResponse(primaryKeys=self._read(
            "primary_keys", request.catName, request.db_name, request.tbl_name))

    def get_foreign_keys(self, request):
        docs = self.units.read(lambda c: constraints.foreign_keys(
            c, request.catName or DEFAULT_CATALOG, request.parent_db_name,
            request.parent_tbl_name, request.foreign_db_name, request.foreign_tbl_name))
        return t.ForeignKeysResponse(foreignKeys=_structs("foreign_keys", docs))

    def get_unique_constraints(self, request):
        return t.UniqueConstraintsResponse(uniqueConstraints=self._read(
            "unique_constraints", request.catName, request.db_name, request.tbl_name))

    def get_not_null_constraints(self, request):
        return t.NotNullConstraintsResponse(notNullConstraints=self._read(
            "not_null_constraints", request.catName, request.db_name, request.tbl_name))

    def get_default_constraints(self, request):
        return t.DefaultConstraintsResponse(defaultConstraints=self._read(
            "default_constraints", request.catName, request.db_name, request.tbl_name))

    def get_check_constraints(self, request):
        return t.CheckConstraintsResponse(checkConstraints=self._read(
            "check_constraints", request.catName, request.db_name, request.tbl_name))

    def get_all_table_constraints(self, request):
        found = self.units.read(lambda c: constraints.all_of_table(
            c, request.catName or DEFAULT_CATALOG, request.dbName, request.tblName))
        return t.AllTableConstraintsResponse(allTableConstraints=t.SQLAllTableConstraints(
            primaryKeys=_structs("primary_keys", found["primary_keys"]),
            foreignKeys=_structs("foreign_keys", found["foreign_keys"]),
            uniqueConstraints=_structs("unique_constraints", found["unique_constraints"]),
            notNullConstraints=_structs("not_null_constraints", found["not_null_constraints"]),
            defaultConstraints=_structs("default_constraints", found["default_constraints"]),
            checkConstraints=_structs("check_constraints", found["check_constraints"])))
