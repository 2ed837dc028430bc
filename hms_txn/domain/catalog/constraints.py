"""Table constraints (primary, foreign and unique keys, not-null, default and check
constraints) as Hive 4's metastore keeps them: ``HMSHandler``'s add/get/drop calls over
``ObjectStore.addPrimaryKeys`` & co. (standalone-metastore, ObjectStore.java).

A constraint is one row per column in ``table_constraints`` (Hive's KEY_CONSTRAINTS),
attached to its table by id, so it follows a renamed table and goes when the table goes.
The documents in and out are those of the Thrift structs (``SQLPrimaryKey``: ``table_db``,
``table_name``, ``column_name``, ``key_seq``, ``pk_name``, ``enable_cstr``, ...).

Hive's rules, kept here:

* names are lower-cased; a constraint without a name gets ``<pk|fk|uk|nn|dc>_<hash>_<ms>_<n>``
  (``generateConstraintName``; a key's later columns take its first column's name, default
  and check constraints are both ``dc``); a name is unique among the constraints declared on
  one table (for a foreign key: on the referenced table), checked against the stored ones
  only, so the columns of one key may all carry its name;
* a table has at most one primary key; key, unique and not-null columns must exist (table
  columns, then partition keys); default and check constraints may name none;
* a foreign key references the whole primary key or a whole unique key of its parent, with
  the child's column types (the signature check of ``addForeignKeys``).

Errors: ``InvalidObject`` where Hive's store throws InvalidObjectException, ``Refused`` where
it throws MetaException, with Hive's texts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from sqlalchemy import delete, insert, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql import alias

from hms_txn.common.errors import InvalidObject, NoSuchObject, Refused
from hms_txn.domain.events import event_messages as em
from hms_txn.domain.events import notifications
from hms_txn.domain.model import names
from hms_txn.domain.model.catalog import Doc, table_row
from hms_txn.domain.model.qualified_names import DEFAULT_CATALOG
from hms_txn.store.schema import table_constraints as tc
from hms_txn.store.schema import tbls

# Hive's MConstraint types.
PRIMARY_KEY, FOREIGN_KEY, UNIQUE, NOT_NULL, DEFAULT, CHECK = range(6)


@dataclass(frozen=True)
class Kind:
    code: int
    name_key: str                 # the struct's constraint-name field
    suffix: str                   # last part of a generated name's inputs
    log: Callable[[em.MessageContext, Sequence[Doc]], em.LogEntry | None]
    value_key: str | None = None  # the default value / check expression field
    keyed: bool = False           # has key_seq: a multi-column key


# In Hive's order: create_table_core writes the events in this order.
KINDS: dict[str, Kind] = {
    "primary_keys": Kind(PRIMARY_KEY, "pk_name", "pk", em.add_primary_keys, keyed=True),
    "foreign_keys": Kind(FOREIGN_KEY, "fk_name", "fk", em.add_foreign_keys, keyed=True),
    "unique_constraints": Kind(UNIQUE, "uk_name", "uk", em.add_unique_constraints, keyed=True),
    "not_null_constraints": Kind(NOT_NULL, "nn_name", "nn", em.add_not_null_constraints),
    "default_constraints": Kind(DEFAULT, "dc_name", "dc", em.add_default_constraints,
                                "default_value"),
    "check_constraints": Kind(CHECK, "dc_name", "dc", em.add_check_constraints,
                              "check_expression"),
}
# Stored keys first: a new table's foreign keys may reference its own keys.
_STORE_ORDER = ("primary_keys", "unique_constraints", "foreign_keys", "not_null_constraints",
                "default_constraints", "check_constraints")


class _Table(NamedTuple):
    id: int
    db: str
    name: str
    doc: Doc


def _lower(value: str | None) -> str | None:
    return None if value is None else value.strip().lower()


def _find_table(conn: Connection, catalog: str | None, db: str | None,
                name: str | None) -> _Table | None:
    row = table_row(conn, names.lower(db), names.lower(name))
    if row is None:
        return None
    doc = json.loads(row.doc)
    if names.lower(doc.get("catName") or DEFAULT_CATALOG) != names.lower(catalog or DEFAULT_CATALOG):
        return None
    return _Table(row.tbl_id, doc["dbName"], doc["tableName"], doc)


def _column(table: Doc, name: str | None) -> Doc | None:
    """The column ``name`` of a table: its columns first, then its partition keys."""
    for col in [*((table.get("sd") or {}).get("cols") or []), *(table.get("partitionKeys") or [])]:
        if name is not None and col.get("name", "").lower() == name:
            return col
    return None


# ------------------------------------------------------------------- Java's hash codes

def java_string_hash(text: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit number."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_set_text(items: Sequence[str]) -> str:
    """``HashSet<String>.toString()`` of distinct ``items`` added in this order: bucket
    order of a default-sized HashMap, insertion order within a bucket."""
    capacity = 16
    while len(items) > capacity * 3 // 4:
        capacity *= 2

    def bucket(text: str) -> int:
        h = java_string_hash(text)
        return (h ^ (h >> 16)) & (capacity - 1)

    ordered = sorted(range(len(items)), key=lambda i: (bucket(items[i]), i))
    return "[" + ", ".join(items[i] for i in ordered) + "]"


# ------------------------------------------------------------------------ names

def _names_on(conn: Connection, tbl_id: int) -> set[str]:
    return set(conn.execute(select(tc.c.constraint_name)
                            .where(tc.c.parent_tbl_id == tbl_id)).scalars())


def _generated_name(conn: Connection, table: _Table, parts: Sequence[str | None]) -> str:
    """``generateConstraintName``: ``<last part>_<hash of the parts>_<ms>_<n>``."""
    text = "{" + ",".join("<null>" if p is None else p for p in parts) + "}"
    hashcode = java_string_hash(text) & 0xFFFFFFF
    taken = _names_on(conn, table.id)
    for counter in range(10):
        name = f"{parts[-1]}_{hashcode}_{int(time.time() * 1000)}_{counter}"
        if name not in taken:
            return name
    raise Refused(f"Error while trying to generate the constraint name for {text}")


def _new_name(conn: Connection, table: _Table, given: str) -> str:
    name = given.strip().lower()
    if name in _names_on(conn, table.id):
        raise InvalidObject(f"Constraint name already exists: {table.db}.{table.name}.{name}")
    return name


def _flags(doc: Doc) -> int:
    return ((4 if doc.get("enable_cstr") else 0) + (2 if doc.get("validate_cstr") else 0)
            + (1 if doc.get("rely_cstr") else 0))


# ------------------------------------------------------------------------ adding

def _add_table_columns(conn: Connection, kind: Kind,
                       columns: Sequence[Doc]) -> tuple[list[dict], list[Doc]]:
    """Rows and normalized documents of primary-key, unique, not-null, default or check
    columns (``addPrimaryKeys``, ``addUniqueConstraints``, ``addNotNullConstraints``,
    ``addConstraint``)."""
    rows, docs, name = [], [], None
    for col in columns:
        cat, db, tbl = _lower(col.get("catName")), _lower(col.get("table_db")), _lower(col.get("table_name"))
        column = _lower(col.get("column_name"))
        table = _find_table(conn, cat, db, tbl)
        if table is None:
            raise InvalidObject(f"Parent table not found: {tbl}")
        found = _column(table.doc, column) is not None
        if not found and kind.code not in (DEFAULT, CHECK):
            raise InvalidObject(f"Parent column not found: {column}")
        if kind.code == PRIMARY_KEY and _stored(conn, PRIMARY_KEY, table.id):
            raise Refused(f" Primary key already exists for: {cat}.{db}.{tbl}")
        given = col.get(kind.name_key)
        if given is not None:
            name = _new_name(conn, table, given)
        elif not kind.keyed or col.get("key_seq") == 1 or name is None:
            name = _generated_name(conn, table, [db, tbl, column, kind.suffix])
        rows.append({"constraint_name": name, "kind": kind.code,
                     "position": (col.get("key_seq") or 1) if kind.keyed else 1,
                     "parent_tbl_id": table.id, "parent_column": column if found else None,
                     "enable_validate_rely": _flags(col),
                     "value": col.get(kind.value_key) if kind.value_key else None})
        docs.append({**col, "catName": cat, "table_db": db, "table_name": tbl,
                     "column_name": column, kind.name_key: name})
    return rows, docs


def _key_signatures(parent: Doc, pks: list[tuple], uks: list[tuple]) -> list[str]:
    """``generateValidPKsOrUniqueSignatures``: ``col:type;...`` of the parent's primary
    key and of each unique key (by name, then position), in insertion order."""
    def sig(cols) -> str:
        return "".join(f"{c}:{(_column(parent, c) or {}).get('type')};" for _, _, c in cols)

    out: list[str] = []
    if pks:
        out.append(sig(sorted(pks)))
    groups: dict[str, list] = {}
    for key in sorted(uks):
        groups.setdefault(key[0], []).append(key)
    for cols in groups.values():
        if sig(cols) not in out:
            out.append(sig(cols))
    return out


def _add_foreign_keys(conn: Connection, kind: Kind,
                      fks: Sequence[Doc]) -> tuple[list[dict], list[Doc]]:
    """``addForeignKeys``: one key per run of columns starting at key_seq 1."""
    rows, docs, catalog, name = [], [], None, None
    i = 0
    while i < len(fks):
        cat = _lower(fks[i].get("catName") or DEFAULT_CATALOG)
        if catalog is None:
            catalog = cat
        elif cat != catalog:
            raise InvalidObject("Foreign keys cannot span catalogs")
        fk_db, fk_tbl = _lower(fks[i].get("fktable_db")), _lower(fks[i].get("fktable_name"))
        child = _find_table(conn, catalog, fk_db, fk_tbl)
        if child is None:
            raise InvalidObject(f"Child table not found: {fk_tbl}")
        pk_db, pk_tbl = _lower(fks[i].get("pktable_db")), _lower(fks[i].get("pktable_name"))
        same = (fk_db, fk_tbl) == (pk_db, pk_tbl)
        parent = child if same else _find_table(conn, catalog, pk_db, pk_tbl)
        if parent is None:
            raise InvalidObject(f"Parent table not found: {pk_tbl}")
        pks, uks = _stored(conn, PRIMARY_KEY, parent.id), _stored(conn, UNIQUE, parent.id)
        if not pks and not uks:
            raise Refused("Trying to define foreign key but there are no primary keys or "
                          "unique keys for referenced table")
        valid = _key_signatures(parent.doc, pks, uks)
        fk_sig = ref_sig = ""
        while True:
            fk = fks[i]
            fk_col, pk_col = _lower(fk.get("fkcolumn_name")), _lower(fk.get("pkcolumn_name"))
            child_col = _column(child.doc, fk_col)
            if child_col is None:
                raise InvalidObject(f"Child column not found: {fk_col}")
            if _column(parent.doc, pk_col) is None:
                raise InvalidObject(f"Parent column not found: {pk_col}")
            if fk.get("fk_name") is not None:
                name = _new_name(conn, parent, fk["fk_name"])
            elif fk.get("key_seq") == 1 or name is None:
                name = _generated_name(conn, parent, [fk_db, fk_tbl, pk_db, pk_tbl, pk_col,
                                                      fk_col, kind.suffix])
            rows.append({"constraint_name": name, "kind": FOREIGN_KEY,
                         "position": fk.get("key_seq") or 1, "parent_tbl_id": parent.id,
                         "parent_column": pk_col, "child_tbl_id": child.id,
                         "child_column": fk_col, "enable_validate_rely": _flags(fk),
                         "update_rule": fk.get("update_rule"),
                         "delete_rule": fk.get("delete_rule")})
            docs.append({**fk, "fk_name": name, "catName": catalog, "fktable_db": fk_db,
                         "fktable_name": fk_tbl, "pktable_db": pk_db, "pktable_name": pk_tbl,
                         "fkcolumn_name": fk_col, "pkcolumn_name": pk_col})
            fk_sig += f"{fk_col}:{child_col.get('type')};"
            ref_sig += f"{pk_col}:{child_col.get('type')};"
            i += 1
            if i >= len(fks) or fks[i].get("key_seq") == 1:
                break
        if ref_sig not in valid:
            raise Refused(f"Foreign key references {ref_sig} but no corresponding primary key "
                          f"or unique key exists. Possible keys: {java_hash_set_text(valid)}")
        if same and fk_sig == ref_sig:
            raise Refused(f"Cannot be both foreign key and primary/unique key on same table: "
                          f"{ref_sig}")
    return rows, docs


class Constraints:
    """Constraint changes; ``messages`` builds their notification events."""

    def __init__(self, messages: em.MessageContext):
        self.messages = messages

    def add(self, conn: Connection, which: str, columns: Sequence[Doc] | None,
            default_catalog: str = DEFAULT_CATALOG) -> list[Doc]:
        """``add_primary_key`` & co.: the catalog defaults for all columns when the first
        has none; returns the stored documents (names filled in), as the event has them."""
        docs = [dict(c) for c in columns or []]
        if docs and not docs[0].get("catName"):
            for doc in docs:
                doc["catName"] = default_catalog
        stored = self._store(conn, which, docs)
        self._log(conn, which, stored)
        return stored

    def add_for_new_table(self, conn: Connection, catalog: str,
                          lists: Mapping[str, Sequence[Doc] | None]) -> None:
        """The constraints of ``create_table_with_constraints`` / ``create_table_req``, in
        the table's transaction; a column without a catalog gets the table's."""
        stored = {}
        for which in _STORE_ORDER:
            docs = [{**c, "catName": c.get("catName") or catalog} for c in lists.get(which) or []]
            stored[which] = self._store(conn, which, docs)
        for which in KINDS:
            self._log(conn, which, stored[which])

    @staticmethod
    def _store(conn: Connection, which: str, docs: list[Doc]) -> list[Doc]:
        if not docs:
            return []
        kind = KINDS[which]
        add = _add_foreign_keys if kind.code == FOREIGN_KEY else _add_table_columns
        rows, stored = add(conn, kind, docs)
        conn.execute(insert(tc), rows)
        return stored

    def _log(self, conn: Connection, which: str, docs: list[Doc]) -> None:
        entry = KINDS[which].log(self.messages, docs)
        if entry is not None:
            notifications.append(conn, self.messages.message_format, entry)

    def drop(self, conn: Connection, catalog: str, db: str, table: str, name: str) -> None:
        """``drop_constraint``: every row of that name on the table, whether declared on it
        or (a foreign key) referencing from it."""
        found = _find_table(conn, catalog, db, table)
        ids = []
        if found is not None:
            ids = list(conn.execute(select(tc.c.id).where(
                or_(tc.c.parent_tbl_id == found.id, tc.c.child_tbl_id == found.id),
                tc.c.constraint_name == names.lower(name))).scalars())
        if not ids:
            raise NoSuchObject(f"The constraint: {name} does not exist for the associated "
                               f"table: {db}.{table}")
        conn.execute(delete(tc).where(tc.c.id.in_(ids)))
        notifications.append(conn, self.messages.message_format,
                             em.drop_constraint(self.messages, db, table, name, catalog))


def delete_table_rows(conn: Connection, tbl_id: int) -> None:
    """Drop the constraints of a table being dropped: those declared on it, those it
    references from, and the foreign keys of other tables that reference it (as Hive)."""
    conn.execute(delete(tc).where(or_(tc.c.parent_tbl_id == tbl_id, tc.c.child_tbl_id == tbl_id)))


# ------------------------------------------------------------------------ reads

def _stored(conn: Connection, code: int, tbl_id: int) -> list[tuple[str, int, str]]:
    """(name, position, column) of a table's constraints of one kind."""
    return [tuple(r) for r in conn.execute(
        select(tc.c.constraint_name, tc.c.position, tc.c.parent_column)
        .where(tc.c.kind == code, tc.c.parent_tbl_id == tbl_id).order_by(tc.c.id))]


def _table_filter(query, table, db: str | None, name: str | None):
    if db is not None:
        query = query.where(table.c.db_name == names.lower(db))
    if name is not None:
        query = query.where(table.c.tbl_name == names.lower(name))
    return query


def _catalog_matches(doc_text: str, catalog: str | None) -> bool:
    doc = json.loads(doc_text)
    return names.lower(doc.get("catName") or DEFAULT_CATALOG) == names.lower(catalog or DEFAULT_CATALOG)


def _flag_fields(flags: int) -> dict[str, bool]:
    return {"enable_cstr": bool(flags & 4), "validate_cstr": bool(flags & 2),
            "rely_cstr": bool(flags & 1)}


def read(conn: Connection, which: str, catalog: str | None, db: str | None,
         table: str | None) -> list[Doc]:
    """The constraints of one kind (not foreign keys) declared on ``db.table``; [] when
    the table does not exist. A None name matches every table (Hive's direct SQL)."""
    kind = KINDS[which]
    query = _table_filter(
        select(tc, tbls.c.db_name, tbls.c.tbl_name, tbls.c.doc.label("tbl_doc"))
        .join(tbls, tbls.c.tbl_id == tc.c.parent_tbl_id).where(tc.c.kind == kind.code),
        tbls, db, table).order_by(tc.c.id)
    out = []
    for r in conn.execute(query):
        if not _catalog_matches(r.tbl_doc, catalog):
            continue
        doc: dict[str, Any] = {"catName": names.lower(catalog or DEFAULT_CATALOG),
                               "table_db": r.db_name, "table_name": r.tbl_name,
                               "column_name": r.parent_column, kind.name_key: r.constraint_name,
                               **_flag_fields(r.enable_validate_rely)}
        if kind.keyed:
            doc["key_seq"] = r.position
        if kind.value_key:
            doc[kind.value_key] = r.value
        out.append(doc)
    return out


def foreign_keys(conn: Connection, catalog: str | None, parent_db: str | None,
                 parent_table: str | None, foreign_db: str | None,
                 foreign_table: str | None) -> list[Doc]:
    """Foreign keys by referenced (parent) and/or referencing (foreign) table; a None
    name does not filter. ``pk_name`` is the parent's primary key at the same position."""
    parent, child = alias(tbls, "parent_tbl"), alias(tbls, "child_tbl")
    query = (select(tc, parent.c.db_name.label("p_db"), parent.c.tbl_name.label("p_tbl"),
                    child.c.db_name.label("c_db"), child.c.tbl_name.label("c_tbl"),
                    child.c.doc.label("tbl_doc"))
             .join(parent, parent.c.tbl_id == tc.c.parent_tbl_id)
             .join(child, child.c.tbl_id == tc.c.child_tbl_id)
             .where(tc.c.kind == FOREIGN_KEY))
    query = _table_filter(query, parent, parent_db, parent_table)
    query = _table_filter(query, child, foreign_db, foreign_table).order_by(tc.c.id)
    primary: dict[int, dict[int, str]] = {}
    out = []
    for r in conn.execute(query):
        if not _catalog_matches(r.tbl_doc, catalog):
            continue
        if r.parent_tbl_id not in primary:
            primary[r.parent_tbl_id] = {pos: n for n, pos, _ in
                                        _stored(conn, PRIMARY_KEY, r.parent_tbl_id)}
        out.append({"pktable_db": r.p_db, "pktable_name": r.p_tbl,
                    "pkcolumn_name": r.parent_column, "fktable_db": r.c_db,
                    "fktable_name": r.c_tbl, "fkcolumn_name": r.child_column,
                    "key_seq": r.position, "update_rule": r.update_rule,
                    "delete_rule": r.delete_rule, "fk_name": r.constraint_name,
                    "pk_name": primary[r.parent_tbl_id].get(r.position),
                    "catName": names.lower(catalog or DEFAULT_CATALOG),
                    **_flag_fields(r.enable_validate_rely)})
    return out


def all_of_table(conn: Connection, catalog: str | None, db: str,
                 table: str) -> dict[str, list[Doc]]:
    """``get_all_table_constraints``: every kind, the foreign keys being the table's own
    (it is their referencing side)."""
    out = {which: read(conn, which, catalog, db, table)
           for which in KINDS if which != "foreign_keys"}
    out["foreign_keys"] = foreign_keys(conn, catalog, None, None, db, table)
    return out
