"""Thrift function calls: create/alter/drop/get_function, get_functions, get_all_functions.

The rules and Hive's answers are in ``hms_txn.domain.catalog.functions``; here the wire structs
become documents and back.
"""

from __future__ import annotations

from hms_txn.domain.catalog import functions
from hms_txn.domain.catalog.functions import Functions
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.codec import from_doc, to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


def _doc(function: t.Function | None) -> dict | None:
    return None if function is None else to_doc(function)


class FunctionService:
    """Permanent functions, stored by hms-txn (extension mode forwards them instead)."""

    def __init__(self, units: UnitOfWork, functions: Functions):
        self.units = units
        self.functions = functions

    def create_function(self, func):
        self.units.write(lambda c: self.functions.create(c, _doc(func)))

    def alter_function(self, dbName, funcName, newFunc):
        self.units.write(lambda c: self.functions.alter(c, dbName, funcName, _doc(newFunc)))

    def drop_function(self, dbName, funcName):
        self.units.write(lambda c: self.functions.drop(c, dbName, funcName))

    def get_function(self, dbName, funcName):
        return from_doc(t.Function, self.units.read(lambda c: functions.get(c, dbName, funcName)))

    def get_functions(self, dbName, pattern):
        return self.units.read(lambda c: functions.names_matching(c, dbName, pattern))

    def get_all_functions(self):
        docs = self.units.read(functions.all_functions)
        return t.GetAllFunctionsResponse(functions=[from_doc(t.Function, d) for d in docs])
