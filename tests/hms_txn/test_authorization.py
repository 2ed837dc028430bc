"""Roles and privileges as Hive 4 answers them, over Thrift, on SQLite and PostgreSQL.

The answers both Hive 2.3 and Hive 4 give are compared with the Java metastore in
test_authorization_differential.py; this file covers what 2.3 cannot show: Hive 4's fields
(authorizer, catName), refresh_privileges (HIVE-19440), data connector grants, and our
declared answers to input Hive fails on with a NullPointerException.
"""

from __future__ import annotations

import re

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_authorization_differential import (API, COLUMN, DATABASE, GLOBAL,
                                                           GRANT, GROUP, PARTITION, REVOKE, ROLE,
                                                           TABLE, USER, bag, priv, ref)
from tests.hms_txn.test_catalog import make_table

DATACONNECTOR = 6


def _setup(c):
    c.create_database(T.Database(name="pdb", parameters={}))
    c.create_table(make_table("pdb", "pt", keys=[("k", "string")], cols=[("a", "int")]))
    sd = c.get_table("pdb", "pt").sd
    sd.location += "/k=1"
    c.add_partition(T.Partition(values=["1"], dbName="pdb", tableName="pt", sd=sd,
                                parameters={}))


def _names(privileges):
    return [(p.principalName, p.hiveObject.objectType, p.hiveObject.columnName,
             p.grantInfo.privilege, p.grantInfo.grantor) for p in privileges]


def test_default_roles_and_admin_grant(hms_factory):
    """HMSHandler.init: createDefaultRoles (admin, public; admin has "All" on GLOBAL, with
    the "SQL" authorizer in Hive 4) and addAdminUsers (metastore.users.in.admin.role)."""
    first = hms_factory({"hive.users.in.admin.role": "hive, etl"})
    c = first.client()
    assert c.get_role_names() == ["admin", "public"]
    [admin_all] = c.list_privileges("admin", ROLE, ref(GLOBAL))
    assert (admin_all.grantInfo.privilege, admin_all.grantInfo.grantor,
            admin_all.grantInfo.grantorType, admin_all.grantInfo.grantOption,
            admin_all.authorizer) == ("All", "admin", ROLE, True, "SQL")
    members = c.get_principals_in_role(T.GetPrincipalsInRoleRequest(roleName="admin"))
    assert [(m.principalName, m.principalType, m.grantorName, m.grantorPrincipalType,
             m.grantOption) for m in members.principalGrants] == [
        ("hive", USER, "admin", ROLE, True), ("etl", USER, "admin", ROLE, True)]
    c.close()
    # every start ensures them again, without duplicates (a second server, same database)
    second = hms_factory({"hive.users.in.admin.role": "hive"})
    c = second.client()
    assert c.get_role_names() == ["admin", "public"]
    assert len(c.list_privileges(None, None, ref(GLOBAL))) == 1
    assert len(c.get_principals_in_role(
        T.GetPrincipalsInRoleRequest(roleName="admin")).principalGrants) == 2
    c.close()


def test_privilege_objects_carry_the_catalog(client):
    """Hive 4's ObjectStore.convertDB/convertTable/...: catName on every object but GLOBAL."""
    _setup(client)
    client.grant_privileges(bag(priv(ref(DATABASE, "pdb"), "bob", USER, "SELECT"),
                                priv(ref(TABLE, "pdb", "pt"), "bob", USER, "SELECT"),
                                priv(ref(PARTITION, "pdb", "pt", ["1"]), "bob", USER, "SELECT"),
                                priv(ref(COLUMN, "pdb", "pt", None, "a"), "bob", USER, "SELECT"),
                                priv(ref(GLOBAL), "bob", USER, "SELECT")))
    found = client.list_privileges("bob", USER, T.HiveObjectRef())
    assert [(p.hiveObject.objectType, p.hiveObject.catName) for p in found] == [
        (GLOBAL, None), (DATABASE, "hive"), (TABLE, "hive"), (PARTITION, "hive"),
        (COLUMN, "hive")]


def test_privilege_set_follows_the_role_hierarchy(client):
    """ObjectStore.listAllRolesInHierarchy: the roles of the user (public included) and of
    its groups, and the roles those hold, each with its grants on the object."""
    _setup(client)
    for name in ("analyst", "reader", "team"):
        client.create_role(T.Role(roleName=name, ownerName="alice"))
    client.grant_role("analyst", "bob", USER, "alice", USER, False)
    client.grant_role("reader", "analyst", ROLE, "alice", USER, False)
    client.grant_role("team", "devs", GROUP, "alice", USER, False)
    client.grant_privileges(bag(priv(ref(TABLE, "pdb", "pt"), "reader", ROLE, "SELECT"),
                                priv(ref(TABLE, "pdb", "pt"), "team", ROLE, "INSERT"),
                                priv(ref(TABLE, "pdb", "pt"), "public", ROLE, "ALTER")))
    found = client.get_privilege_set(ref(TABLE, "pdb", "pt"), "bob", ["devs"])
    assert found.userPrivileges == {"bob": []}
    assert found.groupPrivileges == {"devs": []}
    roles = {name: [g.privilege for g in grants] for name, grants in found.rolePrivileges.items()}
    assert roles == {"analyst": [], "public": ["ALTER"], "reader": ["SELECT"], "team": ["INSERT"]}


def test_drop_role_takes_its_memberships_and_grants(client):
    _setup(client)
    client.create_role(T.Role(roleName="a", ownerName="o"))
    client.create_role(T.Role(roleName="b", ownerName="o"))
    client.grant_role("a", "bob", USER, "o", USER, False)
    client.grant_role("b", "a", ROLE, "o", USER, False)
    client.grant_privileges(bag(priv(ref(DATABASE, "pdb"), "a", ROLE, "SELECT")))
    client.drop_role("a")
    assert client.list_roles("bob", USER)[0].roleName == "public"
    assert client.get_principals_in_role(T.GetPrincipalsInRoleRequest(roleName="b")) \
        .principalGrants == []
    assert client.list_privileges(None, None, ref(DATABASE, "pdb")) == []
    # a role created again under the name starts empty
    client.create_role(T.Role(roleName="a", ownerName="o"))
    assert client.list_privileges("a", ROLE, T.HiveObjectRef()) == []


def test_refresh_privileges_makes_an_authorizers_grants_exactly_these(client):
    """ObjectStore.refreshPrivileges (HIVE-19440): the authorizer's grants on the object
    become the request's (compared without create time); other authorizers' stay."""
    _setup(client)

    def grants(*rows, authorizer="ranger"):
        out = []
        for who, privilege in rows:
            p = priv(ref(TABLE, "pdb", "pt"), who, USER, privilege, grantor="ranger")
            p.authorizer = authorizer
            out.append(p)
        return bag(*out)

    client.grant_privileges(grants(("bob", "SELECT"), ("carl", "SELECT")))
    client.grant_privileges(grants(("bob", "INSERT"), authorizer="other"))
    request = T.GrantRevokePrivilegeRequest(requestType=GRANT, privileges=grants(
        ("bob", "SELECT"), ("dave", "UPDATE")))
    created = {(p.principalName, p.grantInfo.privilege): p.grantInfo.createTime
               for p in client.list_privileges(None, None, ref(TABLE, "pdb", "pt"))}
    assert client.refresh_privileges(ref(TABLE, "pdb", "pt"), "ranger", request).success
    after = client.list_privileges(None, None, ref(TABLE, "pdb", "pt"))
    assert sorted((p.principalName, p.grantInfo.privilege, p.authorizer) for p in after) == [
        ("bob", "INSERT", "other"), ("bob", "SELECT", "ranger"), ("dave", "UPDATE", "ranger")]
    kept = [p for p in after if (p.principalName, p.grantInfo.privilege) == ("bob", "SELECT")]
    assert kept[0].grantInfo.createTime == created[("bob", "SELECT")]    # untouched
    # every column of a table at once (columnName unset); other object types are refused
    col = priv(ref(COLUMN, "pdb", "pt", None, "a"), "bob", USER, "SELECT", grantor="ranger")
    col.authorizer = "ranger"
    assert client.refresh_privileges(ref(COLUMN, "pdb", "pt"), "ranger",
                                     T.GrantRevokePrivilegeRequest(privileges=bag(col))).success
    assert _names(client.list_privileges(None, None, ref(COLUMN, "pdb", "pt", None, "a"))) == [
        ("bob", COLUMN, "a", "SELECT", "ranger")]
    with pytest.raises(T.MetaException) as err:
        client.refresh_privileges(ref(PARTITION, "pdb", "pt", ["1"]), "ranger",
                                  T.GrantRevokePrivilegeRequest(privileges=bag()))
    assert err.value.message == "Unexpected object type PARTITION"
    with pytest.raises(T.MetaException, match="columnName must be null"):
        client.refresh_privileges(ref(COLUMN, "pdb", "pt", None, "a"), "ranger",
                                  T.GrantRevokePrivilegeRequest(privileges=bag()))


def test_data_connector_grants(client):
    """Hive 4's ObjectStore grants, revokes and refreshes privileges on data connectors
    (DC_PRIVS), but HMSHandler.list_privileges and get_privilege_set have no branch for
    them: they return null, which the client reads as MISSING_RESULT."""
    dc = ref(DATACONNECTOR, None, "mysql_dc")
    assert client.grant_privileges(bag(priv(dc, "bob", USER, "SELECT,ALTER")))
    with pytest.raises(T.MetaException, match=API + "InvalidObjectException SELECT is already "
                       "granted on data connector null by alice"):
        client.grant_privileges(bag(priv(dc, "bob", USER, "SELECT")))
    for call in (lambda: client.list_privileges("bob", USER, dc),
                 lambda: client.get_privilege_set(dc, "bob", [])):
        with pytest.raises(TApplicationException) as err:
            call()
        assert err.value.type == TApplicationException.MISSING_RESULT
    assert client.revoke_privileges(bag(priv(dc, "bob", USER, "ALTER")))
    with pytest.raises(T.MetaException, match=API + "InvalidObjectException No dataconnector "
                       "grant found for privileges ALTER on data connector mysql_dc"):
        client.revoke_privileges(bag(priv(dc, "bob", USER, "ALTER")))
    # data connector grants are not among "everything of bob" (HMSHandler.getAllPrivileges)
    assert client.list_privileges("bob", USER, T.HiveObjectRef()) == []
    assert client.refresh_privileges(dc, None, T.GrantRevokePrivilegeRequest(
        privileges=bag())).success
    assert client.grant_privileges(bag(priv(dc, "bob", USER, "SELECT")))    # it was revoked


def test_grant_option_of_roles_and_privileges(client):
    _setup(client)
    client.create_role(T.Role(roleName="r", ownerName="o"))
    client.grant_role("r", "bob", USER, "o", USER, True)
    assert client.grant_revoke_role(T.GrantRevokeRoleRequest(
        requestType=REVOKE, roleName="r", principalName="bob", principalType=USER,
        grantOption=True)).success
    [membership] = [g for g in client.get_role_grants_for_principal(
        T.GetRoleGrantsForPrincipalRequest(principal_name="bob", principal_type=USER))
        .principalGrants if g.roleName == "r"]
    assert membership.grantOption is False
    # a plain revoke removes the role; revoking from a non-member is no error (Hive: true)
    assert client.revoke_role("r", "bob", USER)
    assert client.revoke_role("r", "bob", USER)
    client.grant_privileges(bag(priv(ref(TABLE, "pdb", "pt"), "bob", USER, "SELECT",
                                     option=True)))
    client.grant_revoke_privileges(T.GrantRevokePrivilegeRequest(
        requestType=REVOKE, revokeGrantOption=True,
        privileges=bag(priv(ref(TABLE, "pdb", "pt"), "bob", USER, "select"))))
    [kept] = client.list_privileges("bob", USER, ref(TABLE, "pdb", "pt"))
    assert (kept.grantInfo.privilege, kept.grantInfo.grantOption) == ("SELECT", False)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_bad_input_is_a_declared_meta_exception(client):
    """Where Hive fails with a NullPointerException (INTERNAL_ERROR on the wire) we answer
    a MetaException that says what is missing, and change nothing."""
    _setup(client)
    client.create_role(T.Role(roleName="r", ownerName="o"))
    refused = [
        (lambda: client.grant_role("r", "bob", USER, "o", None, False), "grantor type"),
        (lambda: client.grant_role("r", "bob", None, "o", USER, False), "principal type"),
        (lambda: client.list_roles("bob", None), "principal type"),
        (lambda: client.list_privileges("bob", None, ref(GLOBAL)), "principal type"),
        (lambda: client.list_privileges(None, None, T.HiveObjectRef()), "principal"),
        (lambda: client.list_privileges("bob", USER, None), "hiveObject"),
        (lambda: client.grant_privileges(bag(T.HiveObjectPrivilege(
            hiveObject=ref(GLOBAL), principalName="bob", principalType=USER))), "privilege"),
        (lambda: client.grant_privileges(bag(priv(ref(GLOBAL), "bob", None, "SELECT"))),
         "principal type"),
        (lambda: client.grant_revoke_role(T.GrantRevokeRoleRequest(
            roleName="r", principalName="bob", principalType=USER)),
         "^Unknown request type null$"),
        (lambda: client.grant_revoke_privileges(T.GrantRevokePrivilegeRequest(
            requestType=7, privileges=bag())), "^Unknown request type null$"),
        (lambda: client.revoke_privileges(bag(priv(ref(PARTITION, "pdb", "nope", ["1"]),
                                                   "bob", USER, "SELECT"))),
         "^hive.pdb.nope table not found$"),
        (lambda: client.refresh_privileges(ref(TABLE, "pdb", "pt"), "x", None),
         "grantRequest"),
    ]
    for call, says in refused:
        with pytest.raises(T.MetaException) as err:
            call()
        assert re.search(says, err.value.message), err.value.message
    assert client.get_role_names() == ["admin", "public", "r"]
    assert client.get_principals_in_role(T.GetPrincipalsInRoleRequest(roleName="r")) \
        .principalGrants == []
    assert [p.principalName for p in client.list_privileges(None, None, ref(GLOBAL))] == \
        ["admin"]


def test_grants_follow_renames_and_go_with_drops(client):
    """Hive's table, partition and column privileges reference the table and partition
    (TBL_PRIVS.TBL_ID, PART_PRIVS.PART_ID, ...): a rename keeps them, a drop removes them
    (ObjectStore.dropTable/dropPartitions delete the grants)."""
    _setup(client)
    client.grant_privileges(bag(priv(ref(TABLE, "pdb", "pt"), "bob", USER, "SELECT"),
                                priv(ref(PARTITION, "pdb", "pt", ["1"]), "bob", USER, "SELECT"),
                                priv(ref(COLUMN, "pdb", "pt", ["1"], "a"), "bob", USER, "SELECT")))
    table = client.get_table("pdb", "pt")
    table.tableName = "renamed"
    client.alter_table("pdb", "pt", table)
    part = client.get_partition("pdb", "renamed", ["1"])
    part.values = ["2"]
    client.rename_partition("pdb", "renamed", ["1"], part)
    found = client.list_privileges("bob", USER, T.HiveObjectRef())
    assert [(p.hiveObject.objectType, p.hiveObject.objectName, p.hiveObject.partValues)
            for p in found] == [(TABLE, "renamed", None), (PARTITION, "renamed", ["2"]),
                                (COLUMN, "renamed", ["2"])]
    assert len(client.list_privileges(None, None, ref(PARTITION, "pdb", "renamed", ["2"]))) == 1
    assert client.list_privileges(None, None, ref(TABLE, "pdb", "pt")) == []
    client.drop_partition("pdb", "renamed", ["2"], True)
    assert [p.hiveObject.objectType for p in client.list_privileges("bob", USER,
                                                                    T.HiveObjectRef())] == [TABLE]
    client.drop_table("pdb", "renamed", True)
    client.create_table(make_table("pdb", "renamed"))
    assert client.list_privileges("bob", USER, T.HiveObjectRef()) == []
