"""Permanent functions (Hive's ``CREATE FUNCTION``): stored, read, altered and dropped as
Hive 4's metastore does (``HMSHandler`` create/alter/drop/get_function, get_functions,
get_all_functions over ``ObjectStore``'s function calls).

A function is a document of the Thrift ``Function`` (``functionName``, ``dbName``,
``className``, ``ownerName``, ``ownerType``, ``createTime``, ``functionType``,
``resourceUris``, ``catName``) in the ``functions`` table, keyed by database and name.

Names. Hive looks functions up by their lower-cased database and name. Its store keeps a
new function's name as sent, so a function created with capitals can never be read or
dropped again; hms-txn stores the name lower-cased, which every lookup then finds (the
clients lower-case names themselves: Spark's ``toHiveFunction``, Hive's ``FunctionTask``).

Database arguments may carry the catalog (``@hive#db``, ``hms_txn.domain.model.qualified_names``);
the functions of a catalog are those of its databases. Errors are Hive's texts: ``Refused``
where Hive throws a plain MetaException, the typed domain errors elsewhere. Every change
writes its event (CREATE_FUNCTION, DROP_FUNCTION; Hive has no event for an alter) in its
own transaction.
"""

from __future__ import annotations

import copy
import json

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import AlreadyExists, InvalidObject, NoSuchObject, Refused
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import Doc, database_row, dumps, now_s
from hms_txn.domain.model.qualified_names import DEFAULT_CATALOG, parse_db_name
from hms_txn.store.schema import functions


def _catalog_of(db: Doc) -> str:
    return (db.get("catalogName") or DEFAULT_CATALOG).lower()


def _database(conn: Connection, catalog: str | None, name: str | None) -> Doc | None:
    """The database ``name`` of ``catalog`` (None when either does not exist)."""
    row = database_row(conn, names.lower(name))
    if row is None:
        return None
    doc = json.loads(row.doc)
    return doc if _catalog_of(doc) == names.lower(catalog or DEFAULT_CATALOG) else None


def _function_row(conn: Connection, db: str, name: str, *, for_update: bool = False):
    query = select(functions.c.doc).where(functions.c.db_name == db,
                                          functions.c.func_name == name)
    if for_update:
        query = query.with_for_update()
    return conn.execute(query).first()


def _find(conn: Connection, db_arg: str, name: str, *, for_update: bool = False) -> Doc | None:
    """The function ``name`` of the database argument ``db_arg`` (may be ``@cat#db``)."""
    catalog, db = parse_db_name(db_arg)
    if db is None or _database(conn, catalog, db) is None:
        return None
    row = _function_row(conn, names.lower(db), names.lower(name), for_update=for_update)
    return None if row is None else json.loads(row.doc)


def _validate(function: Doc | None) -> Doc:
    """``HMSHandler.validateFunctionInfo``: its checks, in its order, with its texts."""
    if function is None:
        raise Refused("Function cannot be null.")
    name = function.get("functionName")
    if name is None:
        raise Refused("Function name cannot be null.")
    if function.get("dbName") is None:
        raise Refused("Database name in Function cannot be null.")
    try:
        names.check_name("function", name)     # MetaStoreUtils.validateName: [\w_]+
    except InvalidObject:
        raise InvalidObject(f"{name} is not a valid object name") from None
    if function.get("className") is None:
        raise InvalidObject("Function class name cannot be null")
    if function.get("ownerType") is None:
        raise Refused("Function owner type cannot be null.")
    if function.get("functionType") is None:
        raise Refused("Function type cannot be null.")
    return function


def _check_resources(function: Doc) -> None:
    """A resource without a type or URI would make Hive's store fail with a
    NullPointerException (INTERNAL_ERROR); refuse it by name instead."""
    for uri in function.get("resourceUris") or []:
        if uri.get("resourceType") is None or uri.get("uri") is None:
            raise InvalidObject(f"Function {function['functionName']}: every resource URI "
                                f"needs a resource type and a URI, got {uri}")


def _as_meta_exception(err: InvalidObject) -> Refused:
    """An InvalidObjectException that Hive answers as ``MetaException(e.toString())``
    (``HMSHandler.newMetaException``): alter_function does not declare the former."""
    return Refused(f"InvalidObjectException(message:{err.message})")


class Functions:
    """Function changes; ``messages`` builds their notification events."""

    def __init__(self, messages: em.MessageContext):
        self.messages = messages

    def create(self, conn: Connection, function: Doc | None) -> None:
        doc = copy.deepcopy(_validate(function))
        _check_resources(doc)
        catalog = doc.get("catName") or DEFAULT_CATALOG
        database = _database(conn, catalog, doc["dbName"])
        if database is None:
            raise NoSuchObject(f"database {catalog}.{doc['dbName']}")
        db, name = names.lower(doc["dbName"]), names.lower(doc["functionName"])
        if _function_row(conn, db, name) is not None:
            raise AlreadyExists(f"Function {doc['functionName']} already exists")
        doc.update(functionName=name, dbName=db, catName=_catalog_of(database),
                   createTime=now_s(), resourceUris=doc.get("resourceUris") or [])
        conn.execute(insert(functions).values(db_name=db, func_name=name, doc=dumps(doc)))
        notifications.append(conn, self.messages.message_format,
                             em.create_function(self.messages, doc))

    @staticmethod
    def alter(conn: Connection, db_arg: str | None, name: str | None, new: Doc | None) -> None:
        """``HMSHandler.alter_function`` and ``ObjectStore.alterFunction``: the name,
        database, owner, class and type change; the resources and creation time stay.
        Every failure is a MetaException (the call declares no InvalidObjectException)."""
        catalog, db = parse_db_name(db_arg)
        if db is None or name is None:
            raise Refused("Database and function name cannot be null.")
        try:
            _check_resources(_validate(new))
        except InvalidObject as err:
            raise _as_meta_exception(err) from None
        if names.lower(new.get("catName") or DEFAULT_CATALOG) != names.lower(catalog):
            raise _as_meta_exception(InvalidObject("You cannot move a function between catalogs"))
        target = _database(conn, catalog, new["dbName"])
        if target is None:
            raise _as_meta_exception(InvalidObject(f"Database {new['dbName']} doesn't exist."))
        old = _find(conn, db_arg, name, for_update=True)
        if old is None:
            raise Refused(f"function {names.lower(name)} doesn't exist")
        new_db, new_name = names.lower(new["dbName"]), names.lower(new["functionName"])
        if (new_db, new_name) != (old["dbName"], old["functionName"]) \
                and _function_row(conn, new_db, new_name) is not None:
            raise AlreadyExists(f"Function {new['functionName']} already exists")
        doc = {**old, "functionName": new_name, "dbName": new_db,
               "ownerName": new.get("ownerName"), "ownerType": new["ownerType"],
               "className": new["className"], "functionType": new["functionType"]}
        conn.execute(update(functions)
                     .where(functions.c.db_name == old["dbName"],
                            functions.c.func_name == old["functionName"])
                     .values(db_name=new_db, func_name=new_name, doc=dumps(doc)))

    def drop(self, conn: Connection, db_arg: str | None, name: str | None) -> None:
        if name is None:
            raise Refused("Function name cannot be null.")
        if parse_db_name(db_arg).database is None:
            raise Refused("Database name cannot be null.")
        doc = _find(conn, db_arg, name, for_update=True)
        if doc is None:
            raise NoSuchObject(f"Function {name} does not exist")
        self._delete(conn, doc)

    def drop_all(self, conn: Connection, db: str) -> None:
        """Drop every function of database ``db`` (DROP DATABASE ... CASCADE: Hive drops
        them one by one, each with its DROP_FUNCTION event, before the tables)."""
        for doc in database_functions(conn, db):
            self._delete(conn, doc)

    def _delete(self, conn: Connection, doc: Doc) -> None:
        conn.execute(delete(functions).where(functions.c.db_name == doc["dbName"],
                                             functions.c.func_name == doc["functionName"]))
        notifications.append(conn, self.messages.message_format,
                             em.drop_function(self.messages, doc))


# ------------------------------------------------------------------------------ reads

def get(conn: Connection, db_arg: str | None, name: str | None) -> Doc:
    if db_arg is None or name is None:
        raise Refused("Database and function name cannot be null.")
    doc = _find(conn, db_arg, name)
    if doc is None:
        raise NoSuchObject(f"Function {db_arg}.{name} does not exist")
    return doc


def names_matching(conn: Connection, db_arg: str | None, pattern: str | None) -> list[str]:
    """The names of a database's functions matching a Hive pattern (all for None), in
    name order; none for a database that does not exist."""
    catalog, db = parse_db_name(db_arg)
    if db is None:
        raise Refused("Database name cannot be null.")
    if _database(conn, catalog, db) is None:
        return []
    rows = conn.execute(select(functions.c.func_name)
                        .where(functions.c.db_name == names.lower(db))
                        .order_by(functions.c.func_name)).scalars()
    return [n for n in rows
            if pattern is None or names.matches(pattern, n, empty_matches_all=False)]


def database_functions(conn: Connection, db: str) -> list[Doc]:
    """The functions of database ``db`` (lower-case), in name order."""
    rows = conn.execute(select(functions.c.doc).where(functions.c.db_name == db)
                        .order_by(functions.c.func_name)).scalars()
    return [json.loads(doc) for doc in rows]


def all_functions(conn: Connection) -> list[Doc]:
    """Every function of the ``hive`` catalog (``get_all_functions`` always reads that
    catalog, whatever the default), by database and name."""
    rows = conn.execute(select(functions.c.doc)
                        .order_by(functions.c.db_name, functions.c.func_name)).scalars()
    docs = [json.loads(doc) for doc in rows]
    return [d for d in docs if names.lower(d.get("catName") or DEFAULT_CATALOG) == DEFAULT_CATALOG]
