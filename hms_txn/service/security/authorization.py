"""The SQL-standard authorization calls: roles (``domain.security.roles``) and privileges
(``domain.security.privileges``). The metastore stores and answers; the engines decide.

Every call declares only MetaException: refusals arrive as MetaException with Hive 4's
message. A reference to a data connector in ``list_privileges`` / ``get_privilege_set``
answers nothing (the handler returns null, the client gets MISSING_RESULT), as Hive's
handler does. In extension mode these calls are forwarded to the upstream metastore (its
grants are on its objects): see docs/extension-mode.md.
"""

from __future__ import annotations

from hms_txn.common.errors import MetastoreError
from hms_txn.domain.security import privileges, roles
from hms_txn.domain.security.privileges import Grant, ObjectRef
from hms_txn.service.units import UnitOfWork
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

GRANT, REVOKE = 1, 2        # GrantRevokeType


def _ref(ref) -> ObjectRef:
    if ref is None:
        raise MetastoreError("a privilege needs a hiveObject (HiveObjectRef)")
    return ObjectRef(ref.objectType, ref.dbName, ref.objectName,
                     tuple(ref.partValues) if ref.partValues is not None else None,
                     ref.columnName, ref.catName)


def _grants(bag) -> list[Grant]:
    out = []
    for p in (bag.privileges if bag is not None else None) or ():
        info = p.grantInfo or t.PrivilegeGrantInfo()
        out.append(Grant(_ref(p.hiveObject), p.principalName, p.principalType, info.privilege,
                         info.createTime or 0, info.grantor, info.grantorType,
                         bool(info.grantOption), p.authorizer))
    return out


def _grant_info(g: Grant) -> t.PrivilegeGrantInfo:
    return t.PrivilegeGrantInfo(privilege=g.privilege, createTime=g.create_time,
                                grantor=g.grantor, grantorType=g.grantor_type,
                                grantOption=g.grant_option)


def _privilege(g: Grant) -> t.HiveObjectPrivilege:
    o = g.obj
    ref = t.HiveObjectRef(objectType=o.type, dbName=o.db, objectName=o.name,
                          partValues=list(o.part_values) if o.part_values is not None else None,
                          columnName=o.column, catName=o.catalog)
    return t.HiveObjectPrivilege(hiveObject=ref, principalName=g.principal,
                                 principalType=g.principal_type, grantInfo=_grant_info(g),
                                 authorizer=g.authorizer)


def _infos(by_name):
    if by_name is None:
        return None
    return {name: [_grant_info(g) for g in grants] for name, grants in by_name.items()}


def _role(r: roles.Role) -> t.Role:
    return t.Role(roleName=r.name, createTime=r.create_time, ownerName=r.owner)


def _role_grant(m: roles.Membership) -> t.RolePrincipalGrant:
    types = roles.PRINCIPAL_TYPE_VALUES
    return t.RolePrincipalGrant(
        roleName=m.role, principalName=m.principal, principalType=types[m.principal_type],
        grantOption=m.grant_option, grantTime=m.grant_time, grantorName=m.grantor,
        grantorPrincipalType=types.get(m.grantor_type))


def _unknown_request() -> MetastoreError:
    # Java reads a value it does not know as null; 1 and 2 never get here
    return MetastoreError("Unknown request type null")


class AuthorizationService:
    """``create_role`` ... ``refresh_privileges``."""

    def __init__(self, units: UnitOfWork):
        self.units = units

    # -- roles ------------------------------------------------------------------------------

    def create_role(self, role):
        if role is None:
            raise MetastoreError("create_role needs a role")
        self.units.write(lambda conn: roles.create_role(conn, role.roleName, role.ownerName))
        return True

    def drop_role(self, role_name):
        self.units.write(lambda conn: roles.drop_role(conn, role_name))
        return True

    def get_role_names(self):
        return self.units.read(roles.role_names)

    def grant_role(self, role_name, principal_name, principal_type, grantor, grantorType,
                   grant_option):
        self.units.write(lambda conn: roles.grant_role(
            conn, role_name, principal_name, principal_type, grantor, grantorType,
            bool(grant_option)))
        return True

    def revoke_role(self, role_name, principal_name, principal_type):
        self.units.write(lambda conn: roles.revoke_role(
            conn, role_name, principal_name, principal_type, False))
        return True

    def grant_revoke_role(self, request):
        option = bool(request.grantOption)
        if request.requestType == GRANT:
            self.grant_role(request.roleName, request.principalName, request.principalType,
                            request.grantor, request.grantorType, option)
        elif request.requestType == REVOKE:
            self.units.write(lambda conn: roles.revoke_role(
                conn, request.roleName, request.principalName, request.principalType, option))
        else:
            raise _unknown_request()
        return t.GrantRevokeRoleResponse(success=True)

    def list_roles(self, principal_name, principal_type):
        ptype = roles.principal_type_name(principal_type)
        return [_role(r) for r in self.units.read(
            lambda conn: roles.roles_of(conn, principal_name, ptype))]

    def get_principals_in_role(self, request):
        found = self.units.read(lambda conn: roles.members_of(conn, request.roleName))
        return t.GetPrincipalsInRoleResponse(principalGrants=[_role_grant(m) for m in found])

    def get_role_grants_for_principal(self, request):
        ptype = roles.principal_type_name(request.principal_type)
        found = self.units.read(
            lambda conn: roles.memberships_of(conn, request.principal_name, ptype))
        return t.GetRoleGrantsForPrincipalResponse(
            principalGrants=[_role_grant(m) for m in found])

    # -- privileges -------------------------------------------------------------------------

    def get_privilege_set(self, hiveObject, user_name, group_names):
        obj = _ref(hiveObject)
        found = self.units.read(lambda conn: privileges.privilege_set(
            conn, obj, user_name, list(group_names) if group_names is not None else None))
        if found is None:
            return None
        return t.PrincipalPrivilegeSet(userPrivileges=_infos(found.users),
                                       groupPrivileges=_infos(found.groups),
                                       rolePrivileges=_infos(found.roles))

    def list_privileges(self, principal_name, principal_type, hiveObject):
        obj = _ref(hiveObject)
        found = self.units.read(lambda conn: privileges.list_grants(
            conn, principal_name, principal_type, obj))
        return None if found is None else [_privilege(g) for g in found]

    def grant_privileges(self, privileges_bag):
        grants = _grants(privileges_bag)
        self.units.write(lambda conn: privileges.grant(conn, grants))
        return True

    def revoke_privileges(self, privileges_bag):
        grants = _grants(privileges_bag)
        self.units.write(lambda conn: privileges.revoke(conn, grants, False))
        return True

    def grant_revoke_privileges(self, request):
        grants = _grants(request.privileges)
        if request.requestType == GRANT:
            self.units.write(lambda conn: privileges.grant(conn, grants))
        elif request.requestType == REVOKE:
            option = bool(request.revokeGrantOption)
            self.units.write(lambda conn: privileges.revoke(conn, grants, option))
        else:
            raise _unknown_request()
        return t.GrantRevokePrivilegeResponse(success=True)

    def refresh_privileges(self, objToRefresh, authorizer, grantRequest):
        obj = _ref(objToRefresh)
        if grantRequest is None:
            raise MetastoreError("refresh_privileges needs a grantRequest")
        grants = _grants(grantRequest.privileges)
        self.units.write(lambda conn: privileges.refresh(conn, obj, authorizer, grants))
        return t.GrantRevokePrivilegeResponse(success=True)
