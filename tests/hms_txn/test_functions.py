"""Permanent functions through a real Thrift client, on SQLite and PostgreSQL: each call
against Hive 4's behaviour (HMSHandler create/alter/drop/get_function, get_functions,
get_all_functions, validateFunctionInfo; ObjectStore's function calls), and one sequence
against the Java metastore 2.3, where the answers are the same except where Hive 4 changed
them (each such step says what 2.3 answers and why we follow Hive 4).
"""

from __future__ import annotations

import contextlib
import json

import pytest
from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.Thrift import TApplicationException
from thrift.TSerialization import deserialize

from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.support.servers import connect

JAR, FILE = t.ResourceType.JAR, t.ResourceType.FILE


def function(name="upper_udf", db="default", cls="com.example.Upper", uris=None, **kw):
    """A Function as Spark's Shim_v2_0.toHiveFunction sends it (owner type USER, type JAVA)."""
    kw.setdefault("ownerName", "alice")
    kw.setdefault("ownerType", t.PrincipalType.USER)
    kw.setdefault("functionType", t.FunctionType.JAVA)
    return t.Function(functionName=name, dbName=db, className=cls, createTime=123,
                      resourceUris=uris, **kw)


@contextlib.contextmanager
def raises(cls, message):
    """The call raises ``cls`` with exactly ``message``."""
    with pytest.raises(cls) as err:
        yield
    assert err.value.message == message


def events_since(client, last):
    return client.get_next_notification(t.NotificationEventRequest(lastEvent=last)).events


def current(client):
    return client.get_current_notificationEventId().eventId


# ------------------------------------------------------------------------- create / get

def test_create_and_read_back(client):
    uris = [t.ResourceUri(JAR, "hdfs:///udfs/upper.jar"), t.ResourceUri(FILE, "/tmp/words.txt")]
    client.create_function(function("Upper_UDF", uris=uris))
    got = client.get_function("default", "upper_udf")
    # Hive 4: createTime is the server's clock (HMSHandler.create_function), the catalog
    # is the database's (ObjectStore.convertToFunction); we store the name lower-cased
    # (Hive's lookups lower-case it, see domain/catalog/functions.py).
    assert got.functionName == "upper_udf" and got.dbName == "default"
    assert got.className == "com.example.Upper" and got.ownerName == "alice"
    assert got.ownerType == t.PrincipalType.USER and got.functionType == t.FunctionType.JAVA
    assert got.resourceUris == uris and got.catName == "hive"
    assert got.createTime != 123 and got.createTime > 1_600_000_000
    assert client.get_function("DEFAULT", "UPPER_udf") == got
    assert client.get_all_functions().functions == [got]


def test_no_resources_read_back_as_an_empty_list(client):
    client.create_function(function("plain", uris=None))
    assert client.get_function("default", "plain").resourceUris == []


def test_catalog_qualified_database_names(client):
    """HiveServer2 sends "@hive#db" to get_function, get_functions, drop_function and
    alter_function (hs2.md: HMSC.getFunction, getFunctions, dropFunction)."""
    client.create_function(function("f1", catName="hive"))
    assert client.get_function("@hive#default", "f1").functionName == "f1"
    assert client.get_functions("@hive#default", "*") == ["f1"]
    client.alter_function("@hive#default", "f1", function("f2", catName="hive"))
    assert client.get_functions("@hive#default", "f*") == ["f2"]
    # the message names the database as sent (HMSHandler.get_function)
    with raises(t.NoSuchObjectException, "Function @hive#default.f1 does not exist"):
        client.get_function("@hive#default", "f1")
    with pytest.raises(t.NoSuchObjectException, match="does not exist"):
        client.get_function("@other#default", "f2")     # no such catalog: no such database
    client.drop_function("@hive#default", "f2")
    assert client.get_functions("default", "*") == []


def test_missing_function_messages_clients_match(client):
    # Spark recognises a missing function only by "<name> does not exist" somewhere in the
    # cause chain (Shim_v2_0.getFunctionOption / isCausedBy); Trino by the exception type
    # (ThriftHiveMetastore.getFunction).
    with pytest.raises(t.NoSuchObjectException) as err:
        client.get_function("default", "nope")
    assert err.value.message == "Function default.nope does not exist"
    assert "nope does not exist" in err.value.message
    with raises(t.NoSuchObjectException, "Function nodb.nope does not exist"):
        client.get_function("nodb", "nope")


@pytest.mark.parametrize("bad, error, message", [
    # HMSHandler.validateFunctionInfo, in its order
    (dict(name=None), t.MetaException, "Function name cannot be null."),
    (dict(db=None), t.MetaException, "Database name in Function cannot be null."),
    (dict(name="a-b"), t.InvalidObjectException, "a-b is not a valid object name"),
    (dict(name=""), t.InvalidObjectException, " is not a valid object name"),
    (dict(cls=None), t.InvalidObjectException, "Function class name cannot be null"),
    (dict(ownerType=None), t.MetaException, "Function owner type cannot be null."),
    (dict(functionType=None), t.MetaException, "Function type cannot be null."),
    # not a Hive check: Hive's store fails on it with a NullPointerException
    (dict(uris=[t.ResourceUri(None, "x.jar")]), t.InvalidObjectException,
     "Function upper_udf: every resource URI needs a resource type"),
])
def test_create_validation(client, bad, error, message):
    start = current(client)
    with pytest.raises(error) as err:
        client.create_function(function(**bad))
    assert err.value.message.startswith(message)
    assert client.get_all_functions().functions == []
    assert events_since(client, start) == []


def test_create_refusals(client):
    client.create_function(function("dup"))
    # HMSHandler.create_function: the existing one is found by its lower-cased name
    with raises(t.AlreadyExistsException, "Function DUP already exists"):
        client.create_function(function("DUP"))
    # the database is looked up in the function's catalog (ObjectStore.getDatabase's text)
    with raises(t.NoSuchObjectException, "database hive.nodb"):
        client.create_function(function("x", db="nodb"))
    with raises(t.NoSuchObjectException, "database spark.default"):
        client.create_function(function("x", catName="spark"))
    with raises(t.MetaException, "Function cannot be null."):
        client.create_function(None)


# ------------------------------------------------------------------------- listing

def test_get_functions_patterns(client):
    client.create_database(t.Database(name="fl"))
    for name in ("alpha", "beta", "alpine", "gamma"):
        client.create_function(function(name, db="fl"))
    # ObjectStore.getFunctions: name order; "*" any run, "|" alternatives, case ignored
    assert client.get_functions("fl", "*") == ["alpha", "alpine", "beta", "gamma"]
    assert client.get_functions("fl", "al*") == ["alpha", "alpine"]
    assert client.get_functions("fl", "BETA|g*") == ["beta", "gamma"]
    assert client.get_functions("fl", None) == ["alpha", "alpine", "beta", "gamma"]
    assert client.get_functions("fl", "") == []
    assert client.get_functions("nodb", "*") == []      # no error for a missing database
    with pytest.raises(t.MetaException, match="Database name cannot be null"):
        client.get_functions(None, "*")


def test_get_all_functions(client):
    # Hive 4 answers a list, [] when there is none (never an unset field)
    assert client.get_all_functions().functions == []
    client.create_database(t.Database(name="zz"))
    client.create_function(function("b", db="zz"))
    client.create_function(function("a", db="zz"))
    client.create_function(function("c"))
    got = client.get_all_functions().functions
    assert [(f.dbName, f.functionName) for f in got] == [("default", "c"), ("zz", "a"), ("zz", "b")]


# ------------------------------------------------------------------------- alter

def test_alter_changes_name_database_owner_class_and_type_only(client):
    client.create_database(t.Database(name="other"))
    uris = [t.ResourceUri(JAR, "hdfs:///a.jar")]
    client.create_function(function("f", uris=uris))
    before = client.get_function("default", "f")
    start = current(client)
    # ObjectStore.alterFunction: "For now only alter name, owner, class name, type"
    client.alter_function("default", "f", function(
        "G", db="other", cls="com.example.Lower", ownerName="bob",
        ownerType=t.PrincipalType.ROLE, uris=[t.ResourceUri(FILE, "/ignored")]))
    after = client.get_function("other", "g")
    assert (after.functionName, after.dbName, after.className, after.ownerName,
            after.ownerType) == ("g", "other", "com.example.Lower", "bob", t.PrincipalType.ROLE)
    assert after.resourceUris == uris and after.createTime == before.createTime
    assert client.get_functions("default", "*") == []
    assert events_since(client, start) == []     # Hive has no ALTER_FUNCTION event


@pytest.mark.parametrize("db, name, new, message", [
    # HMSHandler.validateForAlterFunction
    (None, "f", function("f"), "Database and function name cannot be null."),
    ("default", None, function("f"), "Database and function name cannot be null."),
    ("default", "f", None, "Function cannot be null."),
    ("default", "f", function(None), "Function name cannot be null."),
    # validateFunctionInfo's InvalidObjectExceptions as MetaException(e.toString())
    ("default", "f", function("a-b"), "InvalidObjectException(message:a-b is not a valid object name)"),
    ("default", "f", function("f", cls=None),
     "InvalidObjectException(message:Function class name cannot be null)"),
    # ObjectStore.alterFunction, through HMSHandler.throwMetaException
    ("default", "f", function("f", catName="spark"),
     "InvalidObjectException(message:You cannot move a function between catalogs)"),
    ("default", "f", function("f", db="nodb"),
     "InvalidObjectException(message:Database nodb doesn't exist.)"),
    ("default", "NOPE", function("f"), "function nope doesn't exist"),
    # two functions cannot share a name (Hive: the store's unique key fails)
    ("default", "f", function("g"), "Function g already exists"),
])
def test_alter_refusals_are_meta_exceptions(client, db, name, new, message):
    client.create_function(function("f"))
    client.create_function(function("g"))
    with pytest.raises(t.MetaException) as err:
        client.alter_function(db, name, new)
    assert err.value.message == message
    assert client.get_functions("default", "*") == ["f", "g"]


# ------------------------------------------------------------------------- drop

def test_drop_refusals(client):
    # HMSHandler.drop_function: the name as sent in the message
    with raises(t.NoSuchObjectException, "Function Nope does not exist"):
        client.drop_function("default", "Nope")
    with raises(t.NoSuchObjectException, "Function x does not exist"):
        client.drop_function("nodb", "x")
    with raises(t.MetaException, "Function name cannot be null."):
        client.drop_function("default", None)
    with raises(t.MetaException, "Database name cannot be null."):
        client.drop_function(None, "x")
    with raises(t.MetaException, "Database name cannot be null."):
        client.drop_function("@hive#", "x")


def test_drop_database_with_functions(client):
    client.create_database(t.Database(name="udfs"))
    client.create_function(function("one", db="udfs"))
    client.create_function(function("two", db="udfs"))
    # HMSHandler.drop_database_core: refused without CASCADE, with Hive's text
    with raises(t.InvalidOperationException,
                "Database udfs is not empty. One or more functions exist."):
        client.drop_database("udfs", True, False)
    assert client.get_functions("udfs", "*") == ["one", "two"]
    start = current(client)
    client.drop_database("udfs", True, True)
    # each function dropped with its event, before the database
    got = [(e.eventType, e.dbName, json.loads(e.message).get("functionName"))
           for e in events_since(client, start)]
    assert got == [("DROP_FUNCTION", "udfs", "one"), ("DROP_FUNCTION", "udfs", "two"),
                   ("DROP_DATABASE", "udfs", None)]
    assert client.get_all_functions().functions == []
    client.create_database(t.Database(name="udfs"))
    assert client.get_functions("udfs", "*") == []


# ------------------------------------------------------------------------- events

def test_events(client):
    start = current(client)
    uris = [t.ResourceUri(JAR, "hdfs:///u.jar")]
    client.create_function(function("ev", uris=uris))
    client.drop_function("default", "ev")
    created, dropped = events_since(client, start)
    # JSONCreateFunctionMessage / JSONDropFunctionMessage (domain.events.event_messages)
    assert (created.eventType, created.dbName, created.tableName, created.catName) == \
        ("CREATE_FUNCTION", "default", None, "hive")
    message = json.loads(created.message)
    stored = deserialize(t.Function(), message["functionObjJson"].encode(), TJSONProtocolFactory())
    assert stored.functionName == "ev" and stored.resourceUris == uris
    assert message["db"] == "default"
    assert (dropped.eventType, dropped.dbName) == ("DROP_FUNCTION", "default")
    assert json.loads(dropped.message)["functionName"] == "ev"


# ============================================================ against the Java metastore 2.3

DIFF_DB = "fn_diff"


def _outcome(fn):
    try:
        value = fn()
    except TApplicationException as err:
        return ("TApplicationException", err.type, err.message)
    except Exception as err:  # noqa: BLE001 - the outcome is what is compared
        return (type(err).__name__, getattr(err, "message", str(err)))
    if isinstance(value, t.Function):
        # catName is Hive 3+ (2.3 has no field 9); createTime is each server's clock
        return ("Function", value.functionName, value.dbName, value.className, value.ownerName,
                value.ownerType, value.functionType,
                [(u.resourceType, u.uri) for u in value.resourceUris or []],
                value.createTime not in (None, 123))
    if isinstance(value, t.GetAllFunctionsResponse):
        return sorted(_outcome(lambda f=f: f)[1:3] for f in value.functions or []
                      if f.dbName.startswith(DIFF_DB))
    return value


def run_functions(client) -> list[tuple[str, object]]:
    out = []

    def step(name, fn):
        out.append((name, _outcome(fn)))

    uris = [t.ResourceUri(JAR, "hdfs:///a.jar"), t.ResourceUri(FILE, "/words")]
    client.create_database(t.Database(name=DIFF_DB, parameters={}))
    client.create_database(t.Database(name=DIFF_DB + "2", parameters={}))
    step("create", lambda: client.create_function(function("f1", db=DIFF_DB, uris=uris)))
    step("create g", lambda: client.create_function(function("g1", db=DIFF_DB)))
    step("get", lambda: client.get_function(DIFF_DB, "f1"))
    step("get upper case", lambda: client.get_function(DIFF_DB.upper(), "F1"))
    step("create again", lambda: client.create_function(function("f1", db=DIFF_DB)))
    step("create in missing db", lambda: client.create_function(function("f", db="nodb")))
    step("create bad name", lambda: client.create_function(function("a-b", db=DIFF_DB)))
    step("create no class", lambda: client.create_function(function("f", db=DIFF_DB, cls=None)))
    step("create no name", lambda: client.create_function(function(None, db=DIFF_DB)))
    step("get missing", lambda: client.get_function(DIFF_DB, "nope"))
    step("get in missing db", lambda: client.get_function("nodb", "nope"))
    for pattern in ("*", "f*|G*", "", None, "x*"):
        step(f"get_functions {pattern!r}", lambda p=pattern: client.get_functions(DIFF_DB, p))
    step("get_functions missing db", lambda: client.get_functions("nodb", "*"))
    step("get_all_functions", lambda: client.get_all_functions())
    step("alter", lambda: client.alter_function(DIFF_DB, "f1", function(
        "f2", db=DIFF_DB, cls="com.example.Other", ownerName="bob",
        ownerType=t.PrincipalType.ROLE, uris=[t.ResourceUri(FILE, "/x")])))
    step("get altered", lambda: client.get_function(DIFF_DB, "f2"))
    step("get old name", lambda: client.get_function(DIFF_DB, "f1"))
    step("alter missing", lambda: client.alter_function(DIFF_DB, "nope", function("q", db=DIFF_DB)))
    step("alter to missing db", lambda: client.alter_function(DIFF_DB, "f2", function("f2", db="nodb")))
    step("alter bad name", lambda: client.alter_function(DIFF_DB, "f2", function("a-b", db=DIFF_DB)))
    step("alter into other db", lambda: client.alter_function(DIFF_DB, "g1", function(
        "g1", db=DIFF_DB + "2")))
    step("get moved", lambda: client.get_function(DIFF_DB + "2", "g1"))
    step("drop", lambda: client.drop_function(DIFF_DB, "f2"))
    step("drop again", lambda: client.drop_function(DIFF_DB, "f2"))
    step("drop in missing db", lambda: client.drop_function("nodb", "x"))
    step("drop db with function", lambda: client.drop_database(DIFF_DB + "2", True, False))
    step("drop db cascade", lambda: client.drop_database(DIFF_DB + "2", True, True))
    step("get after cascade", lambda: client.get_function(DIFF_DB + "2", "g1"))
    step("get_all_functions at end", lambda: client.get_all_functions())
    client.drop_database(DIFF_DB, True, True)
    # last, in a database of their own: 2.3 can then drop neither the function nor the database
    case_db = DIFF_DB + "_case"
    client.create_database(t.Database(name=case_db, parameters={}))
    step("create mixed case", lambda: client.create_function(function("MixedCase", db=case_db)))
    step("get mixed case", lambda: client.get_function(case_db, "mixedcase"))
    step("drop mixed case", lambda: client.drop_function(case_db, "MixedCase"))
    return out


INTERNAL = TApplicationException.INTERNAL_ERROR

# Steps answered otherwise than by the Java metastore 2.3: (what 2.3 answers, what we answer).
EXPECTED_DIFFERENCES = {
    # Not Hive 4 either: Hive (2.3 and 4, ObjectStore.convertToMFunction) stores the name as
    # sent and looks it up lower-cased, so the function cannot be read nor dropped (it lists
    # as "MixedCase"). hms-txn stores it lower-cased (domain/catalog/functions.py).
    "get mixed case": (("NoSuchObjectException", f"Function {DIFF_DB}_case.mixedcase does not exist"),
                       ("Function", "mixedcase", f"{DIFF_DB}_case", "com.example.Upper", "alice",
                        t.PrincipalType.USER, t.FunctionType.JAVA, [], True)),
    "drop mixed case": (("NoSuchObjectException", "Function MixedCase does not exist"), None),
    # The rest: Hive 4 answers otherwise than 2.3, and we follow Hive 4.
    # 2.3's ObjectStore.getDatabase names the database alone; Hive 4's "database <cat>.<db>".
    "create in missing db": (("NoSuchObjectException", "nodb"),
                             ("NoSuchObjectException", "database hive.nodb")),
    # 2.3 dereferences the null name (INTERNAL_ERROR); Hive 4's validateFunctionInfo refuses it.
    "create no name": (("TApplicationException", INTERNAL, "Internal error processing create_function"),
                       ("MetaException", "Function name cannot be null.")),
    # 2.3 lets the store's InvalidObjectException escape alter_function (INTERNAL_ERROR);
    # Hive 4 answers MetaException(e.toString()) (HMSHandler.alter_function /
    # validateForAlterFunction).
    "alter to missing db": (("TApplicationException", INTERNAL, "Internal error processing alter_function"),
                            ("MetaException", "InvalidObjectException(message:Database nodb doesn't exist.)")),
    "alter bad name": (("TApplicationException", INTERNAL, "Internal error processing alter_function"),
                       ("MetaException", "InvalidObjectException(message:a-b is not a valid object name)")),
}


@pytest.mark.javahms
@pytest.mark.parametrize("backend", ["sqlite"])
def test_same_answers_as_the_java_metastore(java_metastore, hms):
    ours, theirs = hms.client(), connect(java_metastore.port)
    try:
        got, want = run_functions(ours), run_functions(theirs)
    finally:
        ours.close()
        theirs.close()
    assert [name for name, _ in got] == [name for name, _ in want]
    mismatches = []
    for (name, mine), (_, java) in zip(got, want):
        if name in EXPECTED_DIFFERENCES:
            if (java, mine) != EXPECTED_DIFFERENCES[name]:
                mismatches.append(f"{name}: ours={mine!r} java={java!r}, expected "
                                  f"{EXPECTED_DIFFERENCES[name]!r}")
        elif mine != java:
            mismatches.append(f"{name}: ours={mine!r} java={java!r}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_tables_and_functions_share_a_database_drop(client):
    """A database with tables and functions: CASCADE drops both (functions first)."""
    client.create_database(t.Database(name="mixed"))
    client.create_table(make_table("mixed", "t"))
    client.create_function(function("f", db="mixed"))
    start = current(client)
    client.drop_database("mixed", True, True)
    assert [e.eventType for e in events_since(client, start)] == \
        ["DROP_FUNCTION", "DROP_TABLE", "DROP_DATABASE"]
