"""Privileges: grants on the global object, databases, data connectors, tables, partitions
and columns, as Hive 4's ``ObjectStore`` keeps them and ``HMSHandler`` answers for them.

We store and answer; engines decide what a privilege allows. Hive's rules, kept here:

* a grant names its privileges comma-separated (``"SELECT,INSERT"``: one row each); a
  privilege the principal already has from the same grantor (and authorizer) on the object
  is refused: ``"<p> is already granted ... by <grantor>"``;
* a grant on a table, partition or column that does not exist is silently ignored; one on a
  database that does not exist is refused ("There is no database <cat>.<db>"); a grant to a
  ROLE needs the role;
* a revoke removes the first of the principal's grants of each privilege, whoever granted
  it (compared exactly on global, database and data connector grants, ignoring case on
  table, partition and column ones); a privilege the principal does not have is refused --
  but only until one privilege of the same request was found (Hive's ``found`` flag is not
  reset between the privileges of one request); with the grant option it only clears the
  option;
* column names are stored as sent and looked up lower-cased (so a grant on ``"A"`` is kept
  but never found, as in Hive);
* ``list_privileges`` and ``get_privilege_set`` of a data connector answer nothing (Hive's
  handler has no branch for them: the client gets MISSING_RESULT), while grants, revokes and
  ``refresh_privileges`` work on them (Hive's store has them). hms-txn keeps no data
  connectors, so grants on one are not checked against one;
* grants on tables, partitions and columns hold the table's and partition's ids, as Hive's
  hold references to them: they follow a rename and go with a drop (foreign keys);
* listings come in grant order (Hive's queries have no ORDER BY).

Refusals Hive's store raises as InvalidObjectException/NoSuchObjectException reach the client
as MetaException ``"Got exception: <class> <message>"`` (``roles.wrapped``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import delete, insert, select, true, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.model import catalog
from hms_txn.domain.model.catalog import now_s
from hms_txn.domain.model.qualified_names import DEFAULT_CATALOG
from hms_txn.domain.security.roles import (MUTEX, PRINCIPAL_TYPE_VALUES, ROLE, principal_type_name,
                                           require_role_principal, roles_in_hierarchy, wrapped)
from hms_txn.domain.txn.txn_records import java_str
from hms_txn.store.schema import partitions, tbls
from hms_txn.store.security_schema import privileges
from hms_txn.store.sql import lock_mutex

GLOBAL, DATABASE, TABLE, PARTITION, COLUMN, DATACONNECTOR = 1, 2, 3, 4, 5, 6
OBJECT_TYPE_NAMES = {GLOBAL: "GLOBAL", DATABASE: "DATABASE", TABLE: "TABLE",
                     PARTITION: "PARTITION", COLUMN: "COLUMN", DATACONNECTOR: "DATACONNECTOR"}
LISTED_TYPES = (GLOBAL, DATABASE, TABLE, PARTITION, COLUMN)    # those Hive's handler reads
P = privileges.c
_NO_PARTITION = -1          # a partition reference whose partition does not exist


@dataclass(frozen=True)
class ObjectRef:
    """A HiveObjectRef: what a privilege is on."""
    type: int | None
    db: str | None = None
    name: str | None = None              # a table or a data connector
    part_values: tuple[str, ...] | None = None
    column: str | None = None
    catalog: str | None = None


@dataclass(frozen=True)
class Grant:
    """A HiveObjectPrivilege: ``privilege`` (one, or comma-separated in a request) on
    ``obj`` for the principal."""
    obj: ObjectRef
    principal: str | None
    principal_type: int | None           # PrincipalType value
    privilege: str | None
    create_time: int = 0
    grantor: str | None = None
    grantor_type: int | None = None
    grant_option: bool = False
    authorizer: str | None = None


@dataclass
class PrivilegeSet:
    """A PrincipalPrivilegeSet: name -> [Grant] per kind of principal; None = unset."""
    users: dict[str, list[Grant]] | None = None
    groups: dict[str, list[Grant]] | None = None
    roles: dict[str, list[Grant]] | None = None


@dataclass(frozen=True)
class _Target:
    """A table, partition or column reference resolved: the table (None if missing), the
    partition's id (None: none named; ``_NO_PARTITION``: named but missing) and name."""
    table_id: int | None
    doc: dict | None
    part_id: int | None = None
    part_name: str | None = None


def java_split(text: str) -> list[str]:
    """Java's ``text.split(",")``: trailing empty parts dropped, ``""`` stays ``[""]``."""
    parts = text.split(",")
    if len(parts) == 1:
        return parts
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _lower(name: str | None) -> str | None:
    return None if name is None else name.lower()


def _catalog(obj: ObjectRef) -> str:
    return (obj.catalog or DEFAULT_CATALOG).lower()


def _principal_cond(name: str, principal_type: str):
    return (P.principal_name == name) & (P.principal_type == principal_type)


def _rows(conn: Connection, cond) -> list:
    """Privilege rows with the current names of their tables and partitions."""
    query = (select(privileges, tbls.c.db_name.label("t_db"), tbls.c.tbl_name.label("t_name"),
                    partitions.c.doc.label("p_doc"))
             .select_from(privileges.outerjoin(tbls, P.tbl_id == tbls.c.tbl_id)
                          .outerjoin(partitions, P.part_id == partitions.c.part_id))
             .where(cond).order_by(P.id))
    return conn.execute(query).all()


def _resolve(conn: Connection, obj: ObjectRef, *, required: bool = False) -> _Target:
    """The table (and partition, when values are given) an object reference names;
    ``required``: a missing table is refused (Hive's ``get_table_core`` message)."""
    row = catalog.table_row(conn, _lower(obj.db), _lower(obj.name))
    if row is None:
        if required:
            raise MetastoreError(f"{_catalog(obj)}.{_lower(obj.db)}.{_lower(obj.name)} table "
                                 f"not found")
        return _Target(None, None)
    doc = json.loads(row.doc)
    if obj.part_values is None:
        return _Target(row.tbl_id, doc)
    part_name = catalog.partition_name(doc, list(obj.part_values))
    part_id = conn.execute(select(partitions.c.part_id).where(
        (partitions.c.tbl_id == row.tbl_id) & (partitions.c.part_name == part_name))).scalar()
    return _Target(row.tbl_id, doc, part_id if part_id is not None else _NO_PARTITION,
                   part_name)


def _on(obj: ObjectRef, target: _Target | None = None):
    """Rows on exactly the object ``obj`` (``target``: its resolved table and partition;
    a partition id of None is a table column). A missing object matches nothing."""
    t = obj.type
    cond = P.object_type == t
    if t == GLOBAL:
        return cond
    if t == DATACONNECTOR:
        return cond & (P.object_name == _lower(obj.name))
    if t == DATABASE:
        return cond & (P.cat_name == _catalog(obj)) & (P.db_name == _lower(obj.db))
    cond &= P.tbl_id == target.table_id
    if t in (PARTITION, COLUMN):
        cond &= P.part_id == target.part_id
    if t == COLUMN:
        cond &= P.column_name == _lower(obj.column)
    return cond


# ------------------------------------------------------------------------------ grant

def grant(conn: Connection, grants: Iterable[Grant]) -> None:
    """``grant_privileges``: every grant of the request, or none."""
    lock_mutex(conn, MUTEX)
    now = now_s()
    for g in grants:
        if g.privilege is None or g.principal is None:
            raise MetastoreError("a privilege to grant needs a principal and grantInfo with "
                                 "a privilege")
        ptype = principal_type_name(g.principal_type)
        gtype = principal_type_name(g.grantor_type, "grantor type")
        if ptype == ROLE:
            require_role_principal(conn, g.principal)
        found = _grant_target(conn, g.obj)
        if found is None:
            continue                                    # no such table / partition
        target, where = found
        held = {r.privilege for r in _rows(conn, _on(g.obj, target)
                                           & _principal_cond(g.principal, ptype)
                                           & _authorizer_cond(g.authorizer))
                if r.grantor is not None and g.grantor is not None
                and r.grantor.lower() == g.grantor.lower()}
        obj = g.obj
        for privilege in java_split(g.privilege):
            if privilege in held:
                raise wrapped("InvalidObjectException",
                              f"{privilege} is already granted {where}by {g.grantor}")
            conn.execute(insert(privileges).values(
                object_type=obj.type,
                cat_name=None if obj.type in (GLOBAL, DATACONNECTOR) else _catalog(obj),
                db_name=_lower(obj.db) if obj.type == DATABASE else None,
                object_name=_lower(obj.name) if obj.type == DATACONNECTOR else None,
                tbl_id=target.table_id if target else None,
                part_id=target.part_id if target else None,
                column_name=obj.column if obj.type == COLUMN else None,
                principal_name=g.principal, principal_type=ptype, privilege=privilege,
                create_time=now, grantor=g.grantor, grantor_type=gtype,
                grant_option=bool(g.grant_option), authorizer=g.authorizer))


def _authorizer_cond(authorizer: str | None):
    """Hive filters a principal's grants by authorizer only when one is given."""
    return P.authorizer == authorizer if authorizer is not None else true()


def _grant_target(conn: Connection, obj: ObjectRef) -> tuple[_Target | None, str] | None:
    """(the resolved table or partition, the words naming the object in Hive's "already
    granted" message), or None when the table or partition does not exist."""
    t = obj.type
    if t == GLOBAL:
        return None, ""
    if t == DATABASE:
        _require_database(conn, obj)
        return None, f"on database {obj.db} "
    if t == DATACONNECTOR:      # Hive names the object by its (unset) dbName here
        return None, f"on data connector {java_str(obj.db)} "
    if t not in (TABLE, PARTITION, COLUMN):
        raise MetastoreError(f"cannot grant privileges on object type {java_str(t)}")
    target = _resolve(conn, obj if t != TABLE else ObjectRef(t, obj.db, obj.name))
    if target.table_id is None or target.part_id == _NO_PARTITION:
        return None
    if t == TABLE:
        return target, f"on table [{obj.db},{obj.name}] "
    if t == PARTITION:
        if target.part_id is None:
            return None
        return target, f"on partition [{obj.db},{obj.name},{target.part_name}] "
    part = f",{target.part_name}" if target.part_name is not None else ""
    return target, f"on column {obj.column} [{obj.db},{obj.name}{part}] "


def _require_database(conn: Connection, obj: ObjectRef) -> None:
    if obj.db is None or catalog.database_row(conn, obj.db.lower()) is None:
        raise wrapped("NoSuchObjectException",
                      f"There is no database {_catalog(obj)}.{_lower(obj.db)}")


# ------------------------------------------------------------------------------ revoke

def revoke(conn: Connection, grants: Iterable[Grant], grant_option: bool) -> None:
    """``revoke_privileges``: the privileges, or only their grant option."""
    lock_mutex(conn, MUTEX)
    doomed: list[int] = []
    cleared: set[int] = set()               # grant options cleared by this request
    for g in grants:
        if g.privilege is None or not g.privilege.strip():
            continue
        ptype = principal_type_name(g.principal_type)
        found_target = _revoke_target(conn, g.obj)
        if found_target is None:
            continue
        cond, exact, missing = found_target
        held = _rows(conn, cond & _principal_cond(g.principal, ptype))
        found = False                       # Hive sets it once per request, never resets
        for privilege in java_split(g.privilege):
            for row in held:
                same = row.privilege == privilege if exact else \
                    row.privilege.lower() == privilege.lower()
                if not same:
                    continue
                found = True
                if grant_option:
                    if not row.grant_option or row.id in cleared:
                        raise MetastoreError(f"User {g.principal} does not have grant option "
                                             f"with privilege {privilege}")
                    conn.execute(update(privileges).where(P.id == row.id)
                                 .values(grant_option=False))
                    cleared.add(row.id)
                else:
                    doomed.append(row.id)
                break
            if not found:
                raise wrapped("InvalidObjectException", missing.format(privilege=privilege))
    if doomed:
        conn.execute(delete(privileges).where(P.id.in_(sorted(set(doomed)))))


def _revoke_target(conn: Connection, obj: ObjectRef):
    """(condition on the object's rows, whether privileges compare exactly, Hive's message
    for a privilege not found), or None for an object type Hive ignores."""
    t = obj.type
    if t == GLOBAL:
        return _on(obj), True, "No user grant found for privileges {privilege}"
    if t == DATABASE:
        _require_database(conn, obj)
        return _on(obj), True, ("No database grant found for privileges {privilege}"
                                f" on database {obj.db}")
    if t == DATACONNECTOR:
        return _on(obj), True, ("No dataconnector grant found for privileges {privilege} on "
                                "data connector " + java_str(obj.name))
    if t == TABLE:
        target = _resolve(conn, ObjectRef(t, obj.db, obj.name))
        return _on(obj, target), False, ("No grant ({privilege}) found  on table "
                                         f"{obj.name}, database is {obj.db}")
    if t not in (PARTITION, COLUMN):
        return None
    target = _resolve(conn, obj, required=True)
    doc = target.doc
    where = f"on table {doc['tableName']}, "
    if target.part_name is not None or t == PARTITION:
        where += f"partition is {java_str(target.part_name)}, "
    if t == COLUMN:
        where += f"column name = {obj.column}, "
    if t == PARTITION and target.part_id is None:
        target = _Target(target.table_id, doc, _NO_PARTITION)   # no values: no partition
    return (_on(obj, target), False,
            "No grant ({privilege}) found  " + f"{where}database is {doc['dbName']}")


# ------------------------------------------------------------------------------ reads

def list_grants(conn: Connection, principal: str | None, principal_type: int | None,
                obj: ObjectRef) -> list[Grant] | None:
    """``list_privileges``: the principal's grants (every principal's when None) on the
    object; every grant of the principal on objects of the type when no database is named,
    and on objects of every type (but data connectors) when the type is unset; None (no
    answer) for a data connector, as Hive's handler."""
    ptype = None if principal is None else principal_type_name(principal_type)
    t = obj.type
    if t is not None and t not in LISTED_TYPES:
        return None
    if principal is None and (t is None or (t != GLOBAL and obj.db is None)):
        raise MetastoreError("list_privileges needs a principal or an object")
    if t is None:
        cond = P.object_type.in_(LISTED_TYPES)
    elif t != GLOBAL and obj.db is None:
        cond = P.object_type == t
        if t == COLUMN:
            cond &= P.part_id.is_not(None) if obj.part_values else P.part_id.is_(None)
    else:
        target = None
        if t in (TABLE, PARTITION, COLUMN):
            named = t == PARTITION or (t == COLUMN and obj.part_values)
            if named and obj.part_values is None:
                raise MetastoreError("a partition's privileges need its partValues")
            target = _resolve(conn, obj if named else ObjectRef(t, obj.db, obj.name),
                              required=bool(named))
        cond = _on(obj, target)
    if principal is not None:
        cond &= _principal_cond(principal, ptype)
    rows = _rows(conn, cond)
    if t is None:       # Hive lists them kind by kind, table columns before partition ones
        rows.sort(key=lambda r: (r.object_type, r.part_id is not None, r.id))
    return [_grant(r) for r in rows]


def privilege_set(conn: Connection, obj: ObjectRef, user: str | None,
                  groups: list[str] | None) -> PrivilegeSet | None:
    """``get_privilege_set``: the grants on the object of the user, the groups and every role
    they hold (directly or not); on GLOBAL only the user's and groups' with grants, and no
    roles (Hive's ``getUserPrivilegeSet``). None for a data connector."""
    t = obj.type
    if t not in LISTED_TYPES:
        return None
    target = None
    if t in (TABLE, PARTITION, COLUMN):
        named = t in (PARTITION, COLUMN) and bool(obj.part_values)
        target = _resolve(conn, obj if named else ObjectRef(t, obj.db, obj.name),
                          required=named)
        if t == PARTITION and not named:        # Hive looks for a partition named null
            target = _Target(target.table_id, target.doc, _NO_PARTITION)
    on = _on(obj, target)

    def held(name: str, ptype: str) -> list[Grant]:
        return [_grant(r) for r in _rows(conn, on & _principal_cond(name, ptype))]

    out = PrivilegeSet()
    if t == GLOBAL:
        mine = held(user, "USER") if user is not None else []
        if mine:
            out.users = {user: mine}
        if groups:
            out.groups = {g: found for g in groups if (found := held(g, "GROUP"))}
        return out
    if user is not None:
        out.users = {user: held(user, "USER")}
    if groups:
        out.groups = {g: held(g, "GROUP") for g in groups}
    held_roles = roles_in_hierarchy(conn, user, groups)
    if held_roles:
        out.roles = {r: held(r, ROLE) for r in held_roles}
    return out


# ------------------------------------------------------------------------------ refresh

_REFRESHABLE = (DATABASE, DATACONNECTOR, TABLE, COLUMN)


def refresh(conn: Connection, obj: ObjectRef, authorizer: str | None,
            grants: list[Grant]) -> None:
    """``refresh_privileges``: make ``authorizer``'s grants on the object (a database, data
    connector, table, or every column of a table) exactly ``grants``: revoke the others,
    grant the new ones (compared without their create times)."""
    if obj.type not in _REFRESHABLE:
        raise MetastoreError(
            f"Unexpected object type {OBJECT_TYPE_NAMES.get(obj.type, java_str(obj.type))}")
    if obj.type == COLUMN and obj.column is not None:
        raise MetastoreError("columnName must be null")
    lock_mutex(conn, MUTEX)
    if obj.type in (TABLE, COLUMN):
        target = _resolve(conn, ObjectRef(obj.type, obj.db, obj.name))
        cond = (P.object_type == obj.type) & (P.tbl_id == target.table_id) \
            & P.part_id.is_(None)                       # the table, or all its columns
    else:
        cond = _on(obj)
    existing = {_key(_grant(r)): r.id for r in _rows(conn, cond & _authorizer_cond(authorizer))}
    wanted: dict[tuple, Grant] = {}
    for g in grants:
        wanted.setdefault(_key(g), g)
    stale = [row_id for key, row_id in existing.items() if key not in wanted]
    if stale:
        conn.execute(delete(privileges).where(P.id.in_(stale)))
    grant(conn, [g for key, g in wanted.items() if key not in existing])


def _key(g: Grant) -> tuple:
    o = g.obj
    return (o.type, _lower(o.db), _lower(o.name),
            tuple(o.part_values) if o.part_values is not None else None, _lower(o.column),
            g.principal, g.principal_type, g.privilege, g.grantor, g.grantor_type,
            bool(g.grant_option), g.authorizer)


def _grant(r) -> Grant:
    """A privilege row as a Grant, its table and partition named as they are now."""
    if r.tbl_id is not None:
        values = json.loads(r.p_doc)["values"] if r.part_id is not None else None
        obj = ObjectRef(r.object_type, r.t_db, r.t_name,
                        tuple(values) if values is not None else None, r.column_name,
                        r.cat_name)
    else:
        obj = ObjectRef(r.object_type, r.db_name, r.object_name, catalog=r.cat_name)
    types = PRINCIPAL_TYPE_VALUES
    return Grant(obj, r.principal_name, types[r.principal_type], r.privilege, r.create_time,
                 r.grantor, types.get(r.grantor_type), bool(r.grant_option), r.authorizer)
