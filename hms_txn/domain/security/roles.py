"""Roles: Hive's SQL-standard authorization roles and who holds them (``ROLE_MAP``).

The metastore stores and answers; engines (HiveServer2's SQL-standard authorizer, Impala,
Ranger's synchronizer) decide what a role allows. The answers follow Hive 4's
``HMSHandler`` and ``ObjectStore`` (``create_role`` ... ``get_role_grants_for_principal``):

* roles ``admin`` and ``public`` exist from the start (``ensure_default_roles``, Hive's
  ``createDefaultRoles`` with ``addAdminUsers``), ``admin`` holding ``All`` on GLOBAL;
* every user implicitly holds ``public``: it is listed (grant time 0, no grantor) among a
  user's roles but never stored, cannot be granted, revoked, created or dropped;
* refusals are MetaException; where Hive's store raised an InvalidObjectException or
  NoSuchObjectException the handler wraps it as ``"Got exception: <class> <message>"``
  (``wrapped``), and so do we;
* names are taken as sent (role and principal names are case-sensitive in Hive).

Functions take the caller's connection; writes hold the ``authorization`` mutex, so checks
and inserts of concurrent grants on PostgreSQL do not interleave.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.model.catalog import now_s
from hms_txn.store.security_schema import privileges, role_members, roles
from hms_txn.store.sql import insert_ignore, lock_mutex

ADMIN, PUBLIC = "admin", "public"
USER, ROLE, GROUP = "USER", "ROLE", "GROUP"        # PrincipalType names, as stored
PRINCIPAL_TYPES = {1: USER, 2: ROLE, 3: GROUP}     # the Thrift enum values
PRINCIPAL_TYPE_VALUES = {name: value for value, name in PRINCIPAL_TYPES.items()}
MUTEX = "authorization"
_API = "org.apache.hadoop.hive.metastore.api."


def wrapped(exception_class: str, message: str) -> MetastoreError:
    """The MetaException Hive's handler makes of a store exception: ``"Got exception:
    org.apache.hadoop.hive.metastore.api.<class> <message>"``."""
    return MetastoreError(f"Got exception: {_API}{exception_class} {message}")


def principal_type_name(value: int | None, what: str = "principal type") -> str:
    """The stored name of a PrincipalType value (MetaException when unset or unknown: Hive
    fails with a NullPointerException there)."""
    name = PRINCIPAL_TYPES.get(value) if value is not None else None
    if name is None:
        raise MetastoreError(f"{what} must be USER, ROLE or GROUP, not {value!r}")
    return name


@dataclass(frozen=True)
class Role:
    name: str
    create_time: int
    owner: str | None


@dataclass(frozen=True)
class Membership:
    """A RolePrincipalGrant: ``principal`` holds ``role``."""
    role: str
    principal: str
    principal_type: str
    grant_option: bool
    grant_time: int
    grantor: str | None
    grantor_type: str | None


_PUBLIC_ROLE = Role(PUBLIC, 0, PUBLIC)


def ensure_default_roles(conn: Connection, admin_users: Iterable[str] = ()) -> None:
    """Roles ``admin`` and ``public``, ``All`` on GLOBAL for ``admin`` (authorizer ``SQL``)
    and the configured admin users in ``admin`` (Hive's ``HMSHandler.init``); what exists is
    left alone, so every start may run it."""
    lock_mutex(conn, MUTEX)
    now = now_s()
    for name in (ADMIN, PUBLIC):
        insert_ignore(conn, roles, {"role_name": name, "create_time": now, "owner_name": name})
    p = privileges.c
    admin_all = conn.execute(select(p.id).where(
        (p.object_type == 1) & (p.principal_name == ADMIN) & (p.principal_type == ROLE)
        & (p.privilege == "All") & (p.grantor == ADMIN))).first()
    if admin_all is None:
        conn.execute(insert(privileges).values(
            object_type=1, principal_name=ADMIN, principal_type=ROLE, privilege="All",
            create_time=now, grantor=ADMIN, grantor_type=ROLE, grant_option=True,
            authorizer="SQL"))
    for user in admin_users:
        if _membership(conn, ADMIN, user, USER) is None:
            conn.execute(insert(role_members).values(
                role_name=ADMIN, principal_name=user, principal_type=USER, add_time=now,
                grantor=ADMIN, grantor_type=ROLE, grant_option=True))


# ------------------------------------------------------------------------------ roles

def _role(conn: Connection, name: str | None) -> Role | None:
    r = conn.execute(select(roles).where(roles.c.role_name == name)).first()
    return None if r is None else Role(r.role_name, r.create_time, r.owner_name)


def require_role(conn: Connection, name: str | None) -> Role:
    """The role (Hive's ``ObjectStore.getRole``: "<name> role can not be found.")."""
    role = _role(conn, name)
    if role is None:
        raise wrapped("NoSuchObjectException", f"{name} role can not be found.")
    return role


def require_role_principal(conn: Connection, name: str) -> None:
    """A ROLE grantee must exist (Hive's ``ObjectStore.validateRole``)."""
    if _role(conn, name) is None:
        raise wrapped("NoSuchObjectException", f"Role {name} does not exist")


def create_role(conn: Connection, name: str | None, owner: str | None) -> None:
    if name == PUBLIC:
        raise MetastoreError(f"{PUBLIC} role implicitly exists. It can't be created.")
    if not name:
        raise MetastoreError("a role needs a name")
    lock_mutex(conn, MUTEX)
    if _role(conn, name) is not None:
        raise wrapped("InvalidObjectException", f"Role {name} already exists.")
    conn.execute(insert(roles).values(role_name=name, create_time=now_s(), owner_name=owner))


def drop_role(conn: Connection, name: str | None) -> None:
    """Drop the role with its memberships (both ways) and its grants; a role that does not
    exist is no error (Hive answers true)."""
    if name in (ADMIN, PUBLIC):
        raise MetastoreError(f"{PUBLIC},{ADMIN} roles can't be dropped.")
    lock_mutex(conn, MUTEX)
    if _role(conn, name) is None:
        return
    m = role_members.c
    conn.execute(delete(role_members).where(
        (m.role_name == name) | ((m.principal_name == name) & (m.principal_type == ROLE))))
    conn.execute(delete(privileges).where((privileges.c.principal_name == name)
                                          & (privileges.c.principal_type == ROLE)))
    conn.execute(delete(roles).where(roles.c.role_name == name))


def role_names(conn: Connection) -> list[str]:
    return sorted(r[0] for r in conn.execute(select(roles.c.role_name)))


# ------------------------------------------------------------------------------ members

def _membership(conn: Connection, role: str, principal: str, principal_type: str):
    m = role_members.c
    return conn.execute(select(role_members).where(
        (m.role_name == role) & (m.principal_name == principal)
        & (m.principal_type == principal_type))).first()


def _is_member_or_self(conn: Connection, candidate: str, role: str, seen: set[str]) -> bool:
    """Whether ``candidate`` is ``role`` or a role it holds, directly or not (Hive's
    ``isNewRoleAParent``)."""
    if candidate == role:
        return True
    if role in seen:
        return False
    seen.add(role)
    return any(_is_member_or_self(conn, candidate, parent.role, seen)
               for parent in memberships_of(conn, role, ROLE))


def grant_role(conn: Connection, role: str | None, principal: str | None,
               principal_type: int | None, grantor: str | None, grantor_type: int | None,
               grant_option: bool) -> None:
    if role == PUBLIC:
        raise MetastoreError(f"No user can be added to {PUBLIC}. Since all users implicitly "
                             f"belong to {PUBLIC} role.")
    ptype = principal_type_name(principal_type)
    gtype = principal_type_name(grantor_type, "grantor type")
    if principal is None:
        raise MetastoreError("grant_role needs a principal name")
    lock_mutex(conn, MUTEX)
    require_role(conn, role)
    if ptype == ROLE and _is_member_or_self(conn, principal, role, set()):
        raise MetastoreError(f"Cannot grant role {principal} to {role} as {role} already "
                             f"belongs to the role {principal}. (no cycles allowed)")
    if _membership(conn, role, principal, ptype) is not None:
        raise wrapped("InvalidObjectException",
                      f"Principal {principal} already has the role {role}")
    if ptype == ROLE:
        require_role_principal(conn, principal)
    conn.execute(insert(role_members).values(
        role_name=role, principal_name=principal, principal_type=ptype, add_time=now_s(),
        grantor=grantor, grantor_type=gtype, grant_option=bool(grant_option)))


def revoke_role(conn: Connection, role: str | None, principal: str | None,
                principal_type: int | None, grant_option: bool) -> None:
    """Take the role from the principal, or with ``grant_option`` only its admin option. A
    principal that does not hold the role is no error (Hive answers true)."""
    if role == PUBLIC:
        raise MetastoreError(f"{PUBLIC} role can't be revoked.")
    ptype = principal_type_name(principal_type)
    lock_mutex(conn, MUTEX)
    require_role(conn, role)
    member = _membership(conn, role, principal, ptype)
    m = role_members.c
    if grant_option:
        if member is None or not member.grant_option:
            raise MetastoreError(f"User {principal} does not have grant option with role "
                                 f"{role}")
        conn.execute(update(role_members).where(m.id == member.id).values(grant_option=False))
    elif member is not None:
        conn.execute(delete(role_members).where(m.id == member.id))


def memberships_of(conn: Connection, principal: str | None,
                   principal_type: str) -> list[Membership]:
    """The roles ``principal`` holds directly, oldest grant first; a user also holds
    ``public`` (Hive's ``ObjectStore.listMRoles``)."""
    m = role_members.c
    rows = conn.execute(select(role_members).where(
        (m.principal_name == principal) & (m.principal_type == principal_type))
        .order_by(m.id)).all()
    out = [_member(r) for r in rows]
    if principal_type == USER:
        out.append(Membership(PUBLIC, principal, USER, False, 0, None, None))
    return out


def roles_of(conn: Connection, principal: str | None, principal_type: str) -> list[Role]:
    """``list_roles``: the roles behind ``memberships_of``."""
    out = []
    for m in memberships_of(conn, principal, principal_type):
        role = _PUBLIC_ROLE if m.role == PUBLIC else _role(conn, m.role)
        if role is not None:
            out.append(role)
    return out


def members_of(conn: Connection, role: str | None) -> list[Membership]:
    """``get_principals_in_role``: who holds ``role`` (nobody, for an unknown role)."""
    rows = conn.execute(select(role_members).where(role_members.c.role_name == role)
                        .order_by(role_members.c.id)).all()
    return [_member(r) for r in rows]


def roles_in_hierarchy(conn: Connection, user: str | None,
                       groups: Iterable[str] | None) -> list[str]:
    """Every role the user and groups hold, directly or through other roles (Hive's
    ``listAllRolesInHierarchy``): what privilege sets include besides the principals."""
    pending = []
    if user is not None:
        pending += [m.role for m in memberships_of(conn, user, USER)]
    for group in groups or ():
        pending += [m.role for m in memberships_of(conn, group, GROUP)]
    found: list[str] = []
    while pending:
        role = pending.pop(0)
        if role in found:
            continue
        found.append(role)
        pending += [m.role for m in memberships_of(conn, role, ROLE)]
    return found


def _member(r) -> Membership:
    return Membership(r.role_name, r.principal_name, r.principal_type, bool(r.grant_option),
                      r.add_time, r.grantor, r.grantor_type)
