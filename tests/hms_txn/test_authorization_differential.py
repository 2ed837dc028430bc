"""Differential test: the same sequence of role, privilege, token-store, type and
partition-mark calls against our server and against the Java metastore 2.3 that ships in
PySpark's jars; every answer and exception must match.

Where Hive 2.3 answers differently from Hive 4 we follow Hive 4, and the step is listed in
``HIVE4`` with Hive 4's answer (asserted on our side) and 2.3's (asserted on the Java
side). The two kinds of difference:

* Hive 3 made the handler turn the store's InvalidObjectException / NoSuchObjectException
  into MetaException ``"Got exception: <class> <message>"``
  (HMSHandler.create_role/grant_role/revoke_role/grant_privileges/revoke_privileges:
  ``handleException(e)...convertToMetaExIfInstance``); Hive 2.3 let them escape undeclared,
  which its clients get as TApplicationException INTERNAL_ERROR;
* wording: 2.3 writes "implictly" where Hive 4 (HMSHandler.create_role, grant_role) writes
  "implicitly"; Hive 4 answers ``get_token`` of an unknown identifier with "" (HMSHandler
  .get_token: "Thrift cannot return null result") where 2.3 returns null (MISSING_RESULT);
  Hive 4's ObjectStore.getMDatabase says "There is no database hive.<db>".

Compared without: create/grant times (when, not whether, set), ``catName`` of privilege
objects and ``authorizer`` (Hive 4 fields 2.3 does not have; test_authorization.py checks
ours), listing order (Hive's queries have no ORDER BY: lists are compared sorted), and the
text of an INTERNAL_ERROR (ours carries the reason). Bad input Hive answers with a
NullPointerException (INTERNAL_ERROR) is left out: we answer it with a clear MetaException
(test_authorization.py).

The Java metastore takes 30-60 s to start, so one instance serves the module.
"""

from __future__ import annotations

import shutil

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as T
from tests.hms_txn.test_catalog import make_table
from tests.support.postgres import free_port
from tests.support.requirements import require, require_module
from tests.support.differential import paired_outcomes

pytestmark = pytest.mark.javahms

USER, ROLE, GROUP = 1, 2, 3
GLOBAL, DATABASE, TABLE, PARTITION, COLUMN = 1, 2, 3, 4, 5
GRANT, REVOKE = 1, 2
INTERNAL = ("TApplicationException", TApplicationException.INTERNAL_ERROR)
MISSING = ("TApplicationException", TApplicationException.MISSING_RESULT)
API = "Got exception: org.apache.hadoop.hive.metastore.api."

# step -> (Hive 4's answer: ours, Hive 2.3's answer: the Java metastore's)
HIVE4 = {
    "create public": (("MetaException", "public role implicitly exists. It can't be created."),
                      ("MetaException", "public role implictly exists. It can't be created.")),
    "create r1 again": (("MetaException", API + "InvalidObjectException Role r1 already exists."),
                        INTERNAL),
    "grant public": (("MetaException", "No user can be added to public. Since all users "
                      "implicitly belong to public role."),
                     ("MetaException", "No user can be added to public. Since all users "
                      "implictly belong to public role.")),
    "grant missing role": (("MetaException", API + "NoSuchObjectException nope role can not be "
                            "found."), INTERNAL),
    "grant r1 bob again": (("MetaException", API + "InvalidObjectException Principal bob "
                            "already has the role r1"), INTERNAL),
    "grant r1 to missing role": (("MetaException", API + "NoSuchObjectException Role nope does "
                                  "not exist"), INTERNAL),
    "revoke missing role": (("MetaException", API + "NoSuchObjectException nope role can not be "
                             "found."), INTERNAL),
    "grant global again": (("MetaException", API + "InvalidObjectException SELECT is already "
                            "granted by alice"), INTERNAL),
    "grant db again": (("MetaException", API + "InvalidObjectException SELECT is already "
                        "granted on database pdb by alice"), INTERNAL),
    "grant missing db": (("MetaException", API + "NoSuchObjectException There is no database "
                          "hive.nodb"), INTERNAL),
    "grant table again": (("MetaException", API + "InvalidObjectException SELECT is already "
                           "granted on table [pdb,pt] by alice"), INTERNAL),
    "grant table to missing role": (("MetaException", API + "NoSuchObjectException Role norole "
                                     "does not exist"), INTERNAL),
    "grant partition again": (("MetaException", API + "InvalidObjectException SELECT is already "
                               "granted on partition [pdb,pt,k=1] by alice"), INTERNAL),
    "grant part column again": (("MetaException", API + "InvalidObjectException SELECT is "
                                 "already granted on column b [pdb,pt,k=1] by alice"), INTERNAL),
    "revoke global missing first": (("MetaException", API + "InvalidObjectException No user "
                                     "grant found for privileges DELETE"), INTERNAL),
    "revoke global lower": (("MetaException", API + "InvalidObjectException No user grant found "
                             "for privileges select"), INTERNAL),
    "revoke db missing priv": (("MetaException", API + "InvalidObjectException No database "
                                "grant found for privileges DROP on database pdb"), INTERNAL),
    "revoke missing db": (("MetaException", API + "NoSuchObjectException There is no database "
                           "hive.nodb"), INTERNAL),
    "revoke table missing": (("MetaException", API + "InvalidObjectException No grant (select) "
                              "found  on table pt, database is pdb"), INTERNAL),
    "revoke partition missing": (("MetaException", API + "InvalidObjectException No grant (DROP) "
                                  "found  on table pt, partition is k=1, database is pdb"),
                                 INTERNAL),
    "revoke column missing": (("MetaException", API + "InvalidObjectException No grant (DROP) "
                               "found  on table pt, column name = a, database is pdb"), INTERNAL),
    "revoke pcolumn missing": (("MetaException", API + "InvalidObjectException No grant (DROP) "
                                "found  on table pt, partition is k=1, column name = b, "
                                "database is pdb"), INTERNAL),
    "get missing token": ("", MISSING),
    "get token of null": ("", MISSING),
}


@pytest.fixture(scope="module")
def java_hms(tmp_path_factory):
    require(shutil.which("java") is not None, "java is not installed")
    require_module("pyspark")
    from hms_bench.javahms import start_java_metastore
    server = start_java_metastore(free_port(), str(tmp_path_factory.mktemp("javahms")))
    yield server
    server.stop()


def _norm(value):
    """An answer with what may differ (see the module docstring) taken out."""
    if isinstance(value, (list, tuple, set)):
        items = [_norm(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (list, set)) else tuple(items)
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    if hasattr(value, "thrift_spec"):
        out = {}
        for name, v in vars(value).items():
            if name in ("catName", "authorizer"):
                continue
            if name in ("createTime", "grantTime") and isinstance(v, int):
                v = v > 0
            out[name] = _norm(v)
        return (type(value).__name__, out)
    return value


def ref(kind, db=None, obj=None, parts=None, col=None):
    return T.HiveObjectRef(objectType=kind, dbName=db, objectName=obj, partValues=parts,
                           columnName=col)


def priv(obj, who, ptype, privilege, grantor="alice", option=False):
    return T.HiveObjectPrivilege(
        hiveObject=obj, principalName=who, principalType=ptype,
        grantInfo=T.PrivilegeGrantInfo(privilege=privilege, createTime=7, grantor=grantor,
                                       grantorType=USER, grantOption=option))


def bag(*privileges):
    return T.PrivilegeBag(privileges=list(privileges))


def run_sequence(c) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []

    def step(name, fn):
        try:
            value = _norm(fn())
        except TApplicationException as err:
            value = ("TApplicationException", err.type)
        except Exception as err:  # noqa: BLE001 - the outcome is what we compare
            value = (type(err).__name__, getattr(err, "message", str(err)))
        out.append((name, value))

    c.create_database(T.Database(name="pdb", parameters={}))
    c.create_table(make_table("pdb", "pt", keys=[("k", "string")], cols=[("a", "int"),
                                                                        ("b", "int")]))
    table = c.get_table("pdb", "pt")
    sd = table.sd
    sd.location = sd.location + "/k=1"
    c.add_partition(T.Partition(values=["1"], dbName="pdb", tableName="pt", sd=sd,
                                parameters={}))

    # -- roles (HMSHandler.create_role ... get_role_grants_for_principal; ObjectStore roles)
    step("role names", c.get_role_names)
    step("roles of admin role", lambda: c.list_roles("admin", ROLE))
    step("roles of a user", lambda: c.list_roles("bob", USER))
    step("default global grants", lambda: c.list_privileges(None, None, ref(GLOBAL)))
    step("create public", lambda: c.create_role(T.Role(roleName="public", ownerName="x")))
    step("create r1", lambda: c.create_role(T.Role(roleName="r1", ownerName="alice")))
    step("create r1 again", lambda: c.create_role(T.Role(roleName="r1", ownerName="alice")))
    step("create R1", lambda: c.create_role(T.Role(roleName="R1", ownerName="alice")))
    step("drop admin", lambda: c.drop_role("admin"))
    step("drop missing", lambda: c.drop_role("nope"))
    step("grant public", lambda: c.grant_role("public", "bob", USER, "alice", USER, False))
    step("grant missing role", lambda: c.grant_role("nope", "bob", USER, "alice", USER, False))
    step("grant r1 bob", lambda: c.grant_role("r1", "bob", USER, "alice", USER, True))
    step("grant r1 bob again", lambda: c.grant_role("r1", "bob", USER, "alice", USER, True))
    step("grant r1 to missing role", lambda: c.grant_role("r1", "nope", ROLE, "alice", USER,
                                                          True))
    step("create r2", lambda: c.create_role(T.Role(roleName="r2", ownerName="alice")))
    step("grant r2 to r1", lambda: c.grant_role("r2", "r1", ROLE, "alice", USER, False))
    step("grant r1 to r2 (cycle)", lambda: c.grant_role("r1", "r2", ROLE, "alice", USER, False))
    step("grant r1 to r1", lambda: c.grant_role("r1", "r1", ROLE, "alice", USER, False))
    step("roles of bob", lambda: c.list_roles("bob", USER))
    step("roles of r1", lambda: c.list_roles("r1", ROLE))
    step("members of r1", lambda: c.get_principals_in_role(
        T.GetPrincipalsInRoleRequest(roleName="r1")))
    step("members of public", lambda: c.get_principals_in_role(
        T.GetPrincipalsInRoleRequest(roleName="public")))
    step("members of a missing role", lambda: c.get_principals_in_role(
        T.GetPrincipalsInRoleRequest(roleName="nope")))
    step("role grants of bob", lambda: c.get_role_grants_for_principal(
        T.GetRoleGrantsForPrincipalRequest(principal_name="bob", principal_type=USER)))
    step("role grants of r1", lambda: c.get_role_grants_for_principal(
        T.GetRoleGrantsForPrincipalRequest(principal_name="r1", principal_type=ROLE)))
    step("revoke public", lambda: c.revoke_role("public", "bob", USER))
    step("revoke missing role", lambda: c.revoke_role("nope", "bob", USER))
    step("revoke from a non-member", lambda: c.revoke_role("r1", "carol", USER))
    step("revoke admin option", lambda: c.grant_revoke_role(T.GrantRevokeRoleRequest(
        requestType=REVOKE, roleName="r1", principalName="bob", principalType=USER,
        grantOption=True)))
    step("revoke admin option again", lambda: c.grant_revoke_role(T.GrantRevokeRoleRequest(
        requestType=REVOKE, roleName="r1", principalName="bob", principalType=USER,
        grantOption=True)))
    step("role grants of bob after", lambda: c.get_role_grants_for_principal(
        T.GetRoleGrantsForPrincipalRequest(principal_name="bob", principal_type=USER)))
    step("grant r2 to a group", lambda: c.grant_revoke_role(T.GrantRevokeRoleRequest(
        requestType=GRANT, roleName="r2", principalName="grp", principalType=GROUP,
        grantor="alice", grantorType=USER)))

    # -- grants (ObjectStore.grantPrivileges) and reads (HMSHandler.list_privileges,
    # get_privilege_set)
    step("grant global", lambda: c.grant_privileges(bag(
        priv(ref(GLOBAL), "bob", USER, "SELECT"), priv(ref(GLOBAL), "bob", USER, "UPDATE,INSERT"))))
    step("grant global again", lambda: c.grant_privileges(bag(priv(ref(GLOBAL), "bob", USER,
                                                                   "SELECT"))))
    step("grant global other grantor", lambda: c.grant_privileges(bag(
        priv(ref(GLOBAL), "bob", USER, "SELECT", grantor="carl"))))
    step("grant db", lambda: c.grant_privileges(bag(priv(ref(DATABASE, "PDB"), "bob", USER,
                                                         "SELECT", option=True))))
    step("grant db again", lambda: c.grant_privileges(bag(priv(ref(DATABASE, "pdb"), "bob",
                                                               USER, "SELECT"))))
    step("grant missing db", lambda: c.grant_privileges(bag(priv(ref(DATABASE, "nodb"), "bob",
                                                                 USER, "SELECT"))))
    step("grant table", lambda: c.grant_privileges(bag(
        priv(ref(TABLE, "pdb", "PT"), "grp", GROUP, "SELECT"),
        priv(ref(TABLE, "pdb", "pt"), "r2", ROLE, "ALTER"))))
    step("grant table again", lambda: c.grant_privileges(bag(priv(ref(TABLE, "pdb", "pt"), "grp",
                                                                  GROUP, "SELECT"))))
    step("grant missing table", lambda: c.grant_privileges(bag(
        priv(ref(TABLE, "pdb", "nope"), "grp", GROUP, "SELECT"))))
    step("grant table to missing role", lambda: c.grant_privileges(bag(
        priv(ref(TABLE, "pdb", "pt"), "norole", ROLE, "SELECT"))))
    step("grant partition", lambda: c.grant_privileges(bag(
        priv(ref(PARTITION, "pdb", "pt", ["1"]), "bob", USER, "SELECT"))))
    step("grant partition again", lambda: c.grant_privileges(bag(
        priv(ref(PARTITION, "pdb", "pt", ["1"]), "bob", USER, "SELECT"))))
    step("grant missing partition", lambda: c.grant_privileges(bag(
        priv(ref(PARTITION, "pdb", "pt", ["9"]), "bob", USER, "SELECT"))))
    step("grant column A", lambda: c.grant_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", None, "A"), "bob", USER, "SELECT"))))
    step("grant column a", lambda: c.grant_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", None, "a"), "bob", USER, "SELECT"))))
    step("grant part column", lambda: c.grant_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", ["1"], "b"), "bob", USER, "SELECT"))))
    step("grant part column again", lambda: c.grant_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", ["1"], "b"), "bob", USER, "SELECT"))))
    step("grant column of missing partition", lambda: c.grant_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", ["9"], "b"), "bob", USER, "SELECT"))))
    step("grant nothing", lambda: c.grant_privileges(T.PrivilegeBag(privileges=[])))
    step("list global", lambda: c.list_privileges(None, None, ref(GLOBAL)))
    step("list global of bob", lambda: c.list_privileges("bob", USER, ref(GLOBAL)))
    step("list db", lambda: c.list_privileges(None, None, ref(DATABASE, "PDB")))
    step("list db of bob", lambda: c.list_privileges("bob", USER, ref(DATABASE, "pdb")))
    step("list table", lambda: c.list_privileges(None, None, ref(TABLE, "pdb", "pt")))
    step("list table of grp", lambda: c.list_privileges("grp", GROUP, ref(TABLE, "pdb", "pt")))
    step("list partition", lambda: c.list_privileges(None, None, ref(PARTITION, "pdb", "pt",
                                                                     ["1"])))
    step("list partition of bob", lambda: c.list_privileges("bob", USER, ref(PARTITION, "pdb",
                                                                             "pt", ["1"])))
    step("list column", lambda: c.list_privileges(None, None, ref(COLUMN, "pdb", "pt", None,
                                                                  "a")))
    step("list column A of bob", lambda: c.list_privileges("bob", USER, ref(COLUMN, "pdb", "pt",
                                                                            None, "A")))
    step("list partition column", lambda: c.list_privileges(None, None, ref(COLUMN, "pdb",
                                                                            "pt", ["1"], "b")))
    step("list everything of bob", lambda: c.list_privileges("bob", USER, T.HiveObjectRef()))
    step("list everything of nobody", lambda: c.list_privileges("zed", USER, T.HiveObjectRef()))
    step("list table of a missing table", lambda: c.list_privileges(None, None, ref(
        TABLE, "pdb", "nope")))
    step("privilege set global", lambda: c.get_privilege_set(ref(GLOBAL), "bob", ["grp", "g2"]))
    step("privilege set global of nobody", lambda: c.get_privilege_set(ref(GLOBAL), "zed", []))
    step("privilege set db", lambda: c.get_privilege_set(ref(DATABASE, "PDB"), "bob", ["grp"]))
    step("privilege set table", lambda: c.get_privilege_set(ref(TABLE, "pdb", "pt"), "bob",
                                                            ["grp"]))
    step("privilege set partition", lambda: c.get_privilege_set(ref(PARTITION, "pdb", "pt",
                                                                    ["1"]), "bob", None))
    step("privilege set column", lambda: c.get_privilege_set(ref(COLUMN, "pdb", "pt", None,
                                                                 "a"), "bob", None))
    step("privilege set partition column", lambda: c.get_privilege_set(
        ref(COLUMN, "pdb", "pt", ["1"], "B"), "bob", None))
    step("privilege set without a principal", lambda: c.get_privilege_set(
        ref(DATABASE, "pdb"), None, None))

    # -- revokes (ObjectStore.revokePrivileges)
    step("revoke two, one missing", lambda: c.revoke_privileges(bag(
        priv(ref(GLOBAL), "bob", USER, "UPDATE,DELETE"))))
    step("revoke global missing first", lambda: c.revoke_privileges(bag(
        priv(ref(GLOBAL), "bob", USER, "DELETE,INSERT"))))
    step("global of bob after", lambda: c.list_privileges("bob", USER, ref(GLOBAL)))
    step("revoke SELECT of two grantors", lambda: c.revoke_privileges(bag(
        priv(ref(GLOBAL), "bob", USER, "SELECT", grantor="zzz"))))
    step("global of bob after one went", lambda: c.list_privileges("bob", USER, ref(GLOBAL)))
    step("revoke global lower", lambda: c.revoke_privileges(bag(priv(ref(GLOBAL), "bob", USER,
                                                                     "select"))))
    step("revoke db grant option", lambda: c.grant_revoke_privileges(
        T.GrantRevokePrivilegeRequest(requestType=REVOKE, revokeGrantOption=True, privileges=bag(
            priv(ref(DATABASE, "pdb"), "bob", USER, "SELECT")))))
    step("revoke db grant option again", lambda: c.grant_revoke_privileges(
        T.GrantRevokePrivilegeRequest(requestType=REVOKE, revokeGrantOption=True, privileges=bag(
            priv(ref(DATABASE, "pdb"), "bob", USER, "SELECT")))))
    step("list db after", lambda: c.list_privileges(None, None, ref(DATABASE, "pdb")))
    step("revoke db missing priv", lambda: c.revoke_privileges(bag(
        priv(ref(DATABASE, "pdb"), "bob", USER, "DROP"))))
    step("revoke missing db", lambda: c.revoke_privileges(bag(
        priv(ref(DATABASE, "nodb"), "bob", USER, "DROP"))))
    step("revoke db", lambda: c.revoke_privileges(bag(priv(ref(DATABASE, "PDB"), "bob", USER,
                                                           "SELECT"))))
    step("revoke table lower", lambda: c.revoke_privileges(bag(
        priv(ref(TABLE, "pdb", "pt"), "grp", GROUP, "select"))))
    step("revoke table missing", lambda: c.revoke_privileges(bag(
        priv(ref(TABLE, "pdb", "pt"), "grp", GROUP, "select"))))
    step("revoke partition missing", lambda: c.revoke_privileges(bag(
        priv(ref(PARTITION, "pdb", "pt", ["1"]), "bob", USER, "DROP"))))
    step("revoke partition", lambda: c.revoke_privileges(bag(
        priv(ref(PARTITION, "pdb", "pt", ["1"]), "bob", USER, "select"))))
    step("revoke column missing", lambda: c.revoke_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", None, "a"), "bob", USER, "DROP"))))
    step("revoke pcolumn missing", lambda: c.revoke_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", ["1"], "b"), "bob", USER, "DROP"))))
    step("revoke column A", lambda: c.revoke_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", None, "A"), "bob", USER, "select"))))
    step("revoke a blank privilege", lambda: c.revoke_privileges(bag(
        priv(ref(COLUMN, "pdb", "pt", None, "A"), "bob", USER, " "))))
    step("everything of bob at the end", lambda: c.list_privileges("bob", USER,
                                                                   T.HiveObjectRef()))
    step("drop r1", lambda: c.drop_role("r1"))
    step("drop r2 with its grants", lambda: c.drop_role("r2"))
    step("role names at the end", c.get_role_names)
    step("table grants at the end", lambda: c.list_privileges(None, None, ref(TABLE, "pdb",
                                                                              "pt")))

    # -- HiveServer2's token store (ObjectStore.addToken ... getMasterKeys)
    step("tokens at first", c.get_all_token_identifiers)
    step("add token", lambda: c.add_token("id1", "tok1"))
    step("add token again", lambda: c.add_token("id1", "tok2"))
    step("get token", lambda: c.get_token("id1"))
    step("get missing token", lambda: c.get_token("nope"))
    step("add another token", lambda: c.add_token("id0", "tokz"))
    step("token identifiers", c.get_all_token_identifiers)
    step("remove token", lambda: c.remove_token("id1"))
    step("remove token again", lambda: c.remove_token("id1"))
    step("add token of null", lambda: c.add_token("idn", None))
    step("get token of null", lambda: c.get_token("idn"))
    step("add token without identifier", lambda: c.add_token(None, "x"))
    step("master keys at first", c.get_master_keys)
    step("add master key", lambda: c.add_master_key("k1"))
    step("add master key 2", lambda: c.add_master_key("k2"))
    step("add the same key", lambda: c.add_master_key("k1"))
    step("update master key", lambda: c.update_master_key(1, "k1b"))
    step("update missing master key", lambda: c.update_master_key(99, "x"))
    step("remove master key", lambda: c.remove_master_key(2))
    step("remove master key again", lambda: c.remove_master_key(2))
    step("master keys", c.get_master_keys)
    step("add master key after a removal", lambda: c.add_master_key("k4"))

    # -- types (HMSHandler.create_type/get_type/drop_type/get_type_all)
    step("get missing type", lambda: c.get_type("t1"))
    step("create type", lambda: c.create_type(T.Type(name="t1", type1="int", fields=[
        T.FieldSchema("x", "int", "c")])))
    step("create type again", lambda: c.create_type(T.Type(name="t1")))
    step("create badly named type", lambda: c.create_type(T.Type(name="bad name")))
    step("create T2", lambda: c.create_type(T.Type(name="T2", type2="x")))
    step("get type", lambda: c.get_type("t1"))
    step("get T2", lambda: c.get_type("T2"))
    step("get t2", lambda: c.get_type("t2"))
    step("get type with spaces", lambda: c.get_type(" t1 "))
    step("get_type_all", lambda: c.get_type_all("t1"))
    step("drop type", lambda: c.drop_type("t1"))
    step("drop type again", lambda: c.drop_type("t1"))

    # -- partition marks (ObjectStore.markPartitionForEvent / isPartitionMarkedForEvent)
    spec = {"k": "1"}
    step("mark", lambda: c.markPartitionForEvent("pdb", "pt", spec, 1))
    step("mark again", lambda: c.markPartitionForEvent("pdb", "pt", spec, 1))
    step("is marked", lambda: c.isPartitionMarkedForEvent("pdb", "pt", spec, 1))
    step("other partition", lambda: c.isPartitionMarkedForEvent("pdb", "pt", {"k": "2"}, 1))
    step("is marked, upper-case names", lambda: c.isPartitionMarkedForEvent("PDB", "PT", spec, 1))
    step("mark, upper-case names", lambda: c.markPartitionForEvent("PDB", "PT", {"k": "3"}, 1))
    step("that mark, lower-case", lambda: c.isPartitionMarkedForEvent("pdb", "pt", {"k": "3"},
                                                                      1))
    step("mark a missing table", lambda: c.markPartitionForEvent("pdb", "nope", spec, 1))
    step("is a missing table marked", lambda: c.isPartitionMarkedForEvent("pdb", "nope", spec,
                                                                          1))
    step("mark in a missing db", lambda: c.markPartitionForEvent("nodb", "nope", spec, 1))
    step("mark with a value too many", lambda: c.markPartitionForEvent(
        "pdb", "pt", {"k": "1", "z": "2"}, 1))
    step("mark with another key", lambda: c.markPartitionForEvent("pdb", "pt", {"K": "1"}, 1))
    return out


@pytest.mark.parametrize("backend", ["sqlite"])
def test_same_outcomes_as_java_metastore(java_hms, hms):
    mismatches = []
    for name, mine, java in paired_outcomes(run_sequence, hms.port, java_hms.port):
        if name in HIVE4:
            hive4, hive23 = HIVE4[name]
            if (mine, java) != (hive4, hive23):
                mismatches.append(f"{name}: ours={mine!r} (Hive 4: {hive4!r}) "
                                  f"java={java!r} (Hive 2.3: {hive23!r})")
        elif mine != java:
            mismatches.append(f"{name}: ours={mine!r} java={java!r}")
    assert not mismatches, "\n".join(mismatches)
