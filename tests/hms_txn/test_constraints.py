"""Table constraints through a real Thrift client, on SQLite and PostgreSQL: each call
against Hive 4's behaviour (HMSHandler's add/get/drop constraint calls and
create_table_core; ObjectStore.addPrimaryKeys, addForeignKeys, addUniqueConstraints,
addNotNullConstraints, addConstraint, dropConstraint), and the primary and foreign keys
against the Java metastore 2.3, whose answers are the same except where Hive 4 changed
them (each such step says what 2.3 answers and why we follow Hive 4).
"""

from __future__ import annotations

import contextlib
import json
import os
import re

import pytest
from thrift.Thrift import TApplicationException

from hms_txn.domain.catalog.constraints import java_hash_set_text, java_string_hash
from hms_txn.wire.codec import to_doc
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import local, make_table
from tests.support.servers import connect

GENERATED = re.compile(r"^(pk|fk|uk|nn|dc)_(-?\d+)_(\d{13})_(\d+)$")


@contextlib.contextmanager
def raises(cls, message):
    """The call raises ``cls`` with exactly ``message``."""
    with pytest.raises(cls) as err:
        yield
    assert err.value.message == message


def pk(table, column, seq=1, name=None, db="default", **kw):
    return t.SQLPrimaryKey(db, table, column, seq, name, False, False, True, **kw)


def fk(parent, pcol, child, ccol, seq=1, name=None, db="default", **kw):
    return t.SQLForeignKey(db, parent, pcol, db, child, ccol, seq, 0, 0, name, None,
                           False, False, True, **kw)


def uk(table, column, seq=1, name=None, db="default"):
    return t.SQLUniqueConstraint("hive", db, table, column, seq, name, False, False, True)


def nn(table, column, name=None, db="default"):
    return t.SQLNotNullConstraint("hive", db, table, column, name, True, False, False)


def dc(table, column, value, name=None, db="default"):
    return t.SQLDefaultConstraint("hive", db, table, column, value, name, True, False, False)


def cc(table, column, expression, name=None, db="default"):
    return t.SQLCheckConstraint("hive", db, table, column, expression, name, True, False, False)


def all_of(client, table, db="default"):
    return client.get_all_table_constraints(
        t.AllTableConstraintsRequest(dbName=db, tblName=table, catName="hive")).allTableConstraints


def events_since(client, last):
    return client.get_next_notification(t.NotificationEventRequest(lastEvent=last)).events


def current(client):
    return client.get_current_notificationEventId().eventId


ORDERS = (("id", "int"), ("customer", "int"), ("code", "string"), ("qty", "int"))


# ------------------------------------------------------------------ create with constraints

def test_create_table_with_every_kind(client):
    client.create_table(make_table("default", "customers", cols=(("id", "int"), ("name", "string"))))
    client.add_primary_key(t.AddPrimaryKeyRequest([pk("customers", "id", name="cust_pk")]))
    start = current(client)
    client.create_table_with_constraints(
        make_table("default", "Orders", cols=ORDERS, keys=(("day", "string"),)),
        [pk("Orders", "ID", name="Orders_PK")],
        [fk("customers", "id", "orders", "customer", name="orders_cust")],
        [uk("orders", "code", name="code_uk")],
        [nn("orders", "qty")],
        [dc("orders", "qty", "1", name="qty_default")],
        [cc("orders", None, "qty > 0", name="qty_positive")])
    got = all_of(client, "orders")
    # names and columns lower-cased (ObjectStore: normalizeIdentifier), catalog filled in
    assert [to_doc(k) for k in got.primaryKeys] == [dict(
        table_db="default", table_name="orders", column_name="id", key_seq=1,
        pk_name="orders_pk", enable_cstr=False, validate_cstr=False, rely_cstr=True,
        catName="hive")]
    assert [to_doc(k) for k in got.foreignKeys] == [dict(
        pktable_db="default", pktable_name="customers", pkcolumn_name="id",
        fktable_db="default", fktable_name="orders", fkcolumn_name="customer", key_seq=1,
        update_rule=0, delete_rule=0, fk_name="orders_cust", pk_name="cust_pk",
        enable_cstr=False, validate_cstr=False, rely_cstr=True, catName="hive")]
    assert [(u.uk_name, u.column_name, u.key_seq) for u in got.uniqueConstraints] == \
        [("code_uk", "code", 1)]
    (notnull,) = got.notNullConstraints
    assert (notnull.column_name, notnull.enable_cstr, notnull.catName) == ("qty", True, "hive")
    assert GENERATED.match(notnull.nn_name).group(1) == "nn"    # generateConstraintName
    assert [(d.dc_name, d.column_name, d.default_value) for d in got.defaultConstraints] == \
        [("qty_default", "qty", "1")]
    # a table-level check constraint names no column
    assert [(c.dc_name, c.column_name, c.check_expression) for c in got.checkConstraints] == \
        [("qty_positive", None, "qty > 0")]
    # CREATE_TABLE, then one event per kind in Hive's order (HMSHandler.create_table_core);
    # a foreign key's event is filed under the referenced table (DbNotificationListener)
    assert [(e.eventType, e.tableName) for e in events_since(client, start)] == [
        ("CREATE_TABLE", "orders"), ("ADD_PRIMARYKEY", "orders"),
        ("ADD_FOREIGNKEY", "customers"), ("ADD_UNIQUECONSTRAINT", "orders"),
        ("ADD_NOTNULLCONSTRAINT", "orders"), ("ADD_DEFAULTCONSTRAINT", "orders"),
        ("ADD_CHECKCONSTRAINT", "orders")]


def test_create_table_req_stores_its_constraints(client):
    """HiveServer2 creates every table with create_table_req, the six lists each possibly
    unset (hs2.md, CREATE TABLE: Hive.createTable -> HMSC.createTable(CreateTableRequest))."""
    client.create_table_req(t.CreateTableRequest(
        table=make_table("default", "t1", cols=ORDERS), primaryKeys=[pk("t1", "id", name="t1_pk")],
        notNullConstraints=[nn("t1", "code", name="code_nn")]))
    got = all_of(client, "t1")
    assert [k.pk_name for k in got.primaryKeys] == ["t1_pk"]
    assert [k.nn_name for k in got.notNullConstraints] == ["code_nn"]
    client.create_table_req(t.CreateTableRequest(table=make_table("default", "t2")))
    empty = all_of(client, "t2")
    # DESCRIBE FORMATTED reads all six lists (hs2.md: DescTableOperation): set and empty
    assert (empty.primaryKeys, empty.foreignKeys, empty.uniqueConstraints,
            empty.notNullConstraints, empty.defaultConstraints, empty.checkConstraints) == \
        ([], [], [], [], [], [])


def test_a_failing_constraint_creates_no_table(client, tmp_path):
    start = current(client)
    with raises(t.InvalidObjectException, "Parent column not found: nope"):
        client.create_table_with_constraints(make_table("default", "t"), [pk("t", "nope")],
                                             [], [], [], [], [])
    assert client.get_all_tables("default") == []
    assert events_since(client, start) == []
    assert not os.path.exists(local(client.get_database("default").locationUri) + "/t")


def test_a_new_tables_foreign_key_may_reference_its_own_key(client):
    client.create_table_with_constraints(
        make_table("default", "emp", cols=(("id", "int"), ("boss", "int"))),
        [pk("emp", "id", name="emp_pk")], [fk("emp", "id", "emp", "boss", name="emp_boss")],
        [], [], [], [])
    (key,) = all_of(client, "emp").foreignKeys
    assert (key.fk_name, key.pk_name, key.pkcolumn_name, key.fkcolumn_name) == \
        ("emp_boss", "emp_pk", "id", "boss")


# ------------------------------------------------------------------ add

def test_generated_names_and_multi_column_keys(client):
    client.create_table(make_table("default", "t", cols=ORDERS, keys=(("day", "string"),)))
    # a key's later columns take the name generated for its first (key_seq 1) column, and
    # partition columns may be key columns (getColumnIndexFromTableColumns, then the keys)
    client.add_primary_key(t.AddPrimaryKeyRequest([pk("t", "id", 1), pk("t", "day", 2)]))
    keys = client.get_primary_keys(t.PrimaryKeysRequest("default", "t")).primaryKeys
    assert [(k.column_name, k.key_seq) for k in keys] == [("id", 1), ("day", 2)]
    assert keys[0].pk_name == keys[1].pk_name
    prefix, hashcode, _, counter = GENERATED.match(keys[0].pk_name).groups()
    # ArrayUtils.toString of the parts, String.hashCode & 0xfffffff
    assert (prefix, int(hashcode), counter) == \
        ("pk", java_string_hash("{default,t,id,pk}") & 0xFFFFFFF, "0")
    # not-null constraints get a name per column
    client.add_not_null_constraint(t.AddNotNullConstraintRequest([nn("t", "qty"), nn("t", "code")]))
    names = [c.nn_name for c in client.get_not_null_constraints(
        t.NotNullConstraintsRequest("hive", "default", "t")).notNullConstraints]
    assert len(set(names)) == 2


def test_add_writes_its_event_with_the_stored_names(client):
    client.create_table(make_table("default", "t", cols=ORDERS))
    start = current(client)
    client.add_unique_constraint(t.AddUniqueConstraintRequest([uk("t", "Code")]))
    (event,) = events_since(client, start)
    assert (event.eventType, event.dbName, event.tableName, event.catName) == \
        ("ADD_UNIQUECONSTRAINT", "default", "t", "hive")
    from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
    from thrift.TSerialization import deserialize
    (text,) = json.loads(event.message)["uniqueConstraintListJson"]
    logged = deserialize(t.SQLUniqueConstraint(), text.encode(), TJSONProtocolFactory())
    stored = client.get_unique_constraints(
        t.UniqueConstraintsRequest("hive", "default", "t")).uniqueConstraints[0]
    assert logged.uk_name == stored.uk_name and logged.column_name == "code"
    # an empty list adds nothing and logs nothing
    client.add_check_constraint(t.AddCheckConstraintRequest([]))
    assert len(events_since(client, start)) == 1


def test_add_refusals(client):
    """Hive's store texts. Its InvalidObjectExceptions are not declared by the add calls
    (Hive's clients get INTERNAL_ERROR); here they are the declared MetaException."""
    client.create_table(make_table("default", "t", cols=ORDERS))
    client.add_primary_key(t.AddPrimaryKeyRequest([pk("t", "id", name="t_pk")]))
    with raises(t.MetaException, " Primary key already exists for: hive.default.t"):
        client.add_primary_key(t.AddPrimaryKeyRequest([pk("t", "qty", name="other")]))
    with raises(t.MetaException, "Parent table not found: nope"):
        client.add_primary_key(t.AddPrimaryKeyRequest([pk("nope", "id")]))
    with raises(t.MetaException, "Parent column not found: nope"):
        client.add_unique_constraint(t.AddUniqueConstraintRequest([uk("t", "nope")]))
    with raises(t.MetaException, "Parent column not found: nope"):
        client.add_not_null_constraint(t.AddNotNullConstraintRequest([nn("t", "nope")]))
    # the name is taken on this table, whatever the kind
    with raises(t.MetaException, "Constraint name already exists: default.t.t_pk"):
        client.add_unique_constraint(t.AddUniqueConstraintRequest([uk("t", "code", name="T_PK")]))
    # ... but free on another table (the check is per table)
    client.create_table(make_table("default", "u", cols=ORDERS))
    client.add_unique_constraint(t.AddUniqueConstraintRequest([uk("u", "code", name="t_pk")]))
    # the catalog of the first column is every column's; no such table in another catalog
    with raises(t.MetaException, "Parent table not found: t"):
        client.add_not_null_constraint(t.AddNotNullConstraintRequest([t.SQLNotNullConstraint(
            "spark", "default", "t", "qty", None, True, False, False)]))
    assert [c.uk_name for c in client.get_unique_constraints(
        t.UniqueConstraintsRequest("hive", "default", "t")).uniqueConstraints] == []


def test_default_and_check_constraints_need_no_existing_column(client):
    # ObjectStore.addConstraint looks the column up but does not require it
    client.create_table(make_table("default", "t", cols=ORDERS))
    client.add_default_constraint(t.AddDefaultConstraintRequest([dc("t", "nope", "0")]))
    client.add_check_constraint(t.AddCheckConstraintRequest([cc("t", "qty", "qty < 10")]))
    got = all_of(client, "t")
    assert [(d.column_name, d.default_value) for d in got.defaultConstraints] == [(None, "0")]
    assert [(c.column_name, c.check_expression) for c in got.checkConstraints] == \
        [("qty", "qty < 10")]
    # both are "dc" constraints when generated (addConstraint)
    assert GENERATED.match(got.defaultConstraints[0].dc_name).group(1) == "dc"
    assert GENERATED.match(got.checkConstraints[0].dc_name).group(1) == "dc"


def test_foreign_key_rules(client):
    client.create_table(make_table("default", "p", cols=(("a", "int"), ("b", "string"), ("c", "int"))))
    client.create_table(make_table("default", "ch", cols=(("x", "int"), ("y", "string"), ("z", "bigint"))))
    with raises(t.MetaException, "Trying to define foreign key but there are no primary keys "
                                 "or unique keys for referenced table"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "a", "ch", "x")]))
    client.add_primary_key(t.AddPrimaryKeyRequest([pk("p", "a", 1, "p_pk"), pk("p", "b", 2, "p_pk")]))
    client.add_unique_constraint(t.AddUniqueConstraintRequest([uk("p", "c", name="p_uk")]))
    # the whole key, with the child's column types (generateValidPKsOrUniqueSignatures)
    with raises(t.MetaException, "Foreign key references a:int; but no corresponding primary "
                                 "key or unique key exists. Possible keys: [c:int;, a:int;b:string;]"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "a", "ch", "x")]))
    with raises(t.MetaException, "Foreign key references c:bigint; but no corresponding primary "
                                 "key or unique key exists. Possible keys: [c:int;, a:int;b:string;]"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "c", "ch", "z")]))
    with raises(t.MetaException, "Child column not found: nope"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "a", "ch", "nope")]))
    with raises(t.MetaException, "Parent column not found: nope"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "nope", "ch", "x")]))
    with raises(t.MetaException, "Child table not found: nope"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "a", "nope", "x")]))
    with raises(t.MetaException, "Parent table not found: nope"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("nope", "a", "ch", "x")]))
    # two keys in one request: each run of columns from key_seq 1 is one key
    client.add_foreign_key(t.AddForeignKeyRequest([
        fk("p", "a", "ch", "x", 1), fk("p", "b", "ch", "y", 2), fk("p", "c", "ch", "x", 1)]))
    keys = client.get_foreign_keys(t.ForeignKeysRequest("default", "p", "default", "ch")).foreignKeys
    assert [(k.pkcolumn_name, k.fkcolumn_name, k.key_seq) for k in keys] == \
        [("a", "x", 1), ("b", "y", 2), ("c", "x", 1)]
    assert keys[0].fk_name == keys[1].fk_name != keys[2].fk_name
    # pk_name: the parent's primary key at the same position (MetaStoreDirectSql joins on the
    # parent table and the position only, so a key on the unique key gets it too)
    assert [k.pk_name for k in keys] == ["p_pk", "p_pk", "p_pk"]
    # a foreign key's name is checked on the referenced table
    with raises(t.MetaException, "Constraint name already exists: default.p.p_uk"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "c", "ch", "x", name="p_uk")]))
    # a table's key cannot reference itself column for column
    with raises(t.MetaException, "Cannot be both foreign key and primary/unique key on same "
                                 "table: c:int;"):
        client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "c", "p", "c")]))
    with raises(t.MetaException, "Foreign keys cannot span catalogs"):
        client.add_foreign_key(t.AddForeignKeyRequest([
            fk("p", "c", "ch", "x", catName="hive"), fk("p", "c", "ch", "x", catName="spark")]))


def test_java_hash_set_text_is_javas():
    """Outputs of java.util.HashSet.toString() and String.hashCode() (JDK 17)."""
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("{c1,parent,id,pk}") & 0xFFFFFFF == 207495824
    assert java_hash_set_text(["id:int;", "a:string;b:int;", "x:bigint;", "name:string;"]) == \
        "[a:string;b:int;, name:string;, id:int;, x:bigint;]"
    assert java_hash_set_text(["a:int;b:string;", "c:int;"]) == "[c:int;, a:int;b:string;]"
    assert java_hash_set_text([f"c{i}:int;" for i in range(20)]) == (
        "[c6:int;, c3:int;, c14:int;, c11:int;, c15:int;, c5:int;, c2:int;, c8:int;, "
        "c18:int;, c0:int;, c13:int;, c16:int;, c1:int;, c4:int;, c7:int;, c10:int;, "
        "c19:int;, c12:int;, c9:int;, c17:int;]")


# ------------------------------------------------------------------ reads

def test_reads_of_missing_tables_are_empty(client):
    assert client.get_primary_keys(t.PrimaryKeysRequest("nodb", "t")).primaryKeys == []
    assert client.get_foreign_keys(t.ForeignKeysRequest(None, None, "default", "t")).foreignKeys == []
    assert client.get_check_constraints(
        t.CheckConstraintsRequest("hive", "default", "t")).checkConstraints == []
    assert all_of(client, "nope").primaryKeys == []


def test_foreign_keys_by_either_side(client):
    client.create_table_with_constraints(make_table("default", "p"), [pk("p", "id", name="p_pk")],
                                         [], [], [], [], [])
    client.create_table(make_table("default", "c1"))
    client.create_table(make_table("default", "c2"))
    client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "id", "c1", "id", name="k1")]))
    client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "id", "c2", "id", name="k2")]))

    def names(*args):
        return sorted(k.fk_name for k in client.get_foreign_keys(t.ForeignKeysRequest(*args)).foreignKeys)
    assert names("default", "p", None, None) == ["k1", "k2"]
    assert names(None, None, "default", "c2") == ["k2"]
    assert names("DEFAULT", "P", "default", "C1") == ["k1"]
    assert names("default", "c1", None, None) == []
    assert [k.fk_name for k in all_of(client, "c1").foreignKeys] == ["k1"]   # its own keys
    assert all_of(client, "p").foreignKeys == []


# ------------------------------------------------------------------ drop

def test_drop_constraint(client):
    client.create_table_with_constraints(make_table("default", "p"), [pk("p", "id", name="p_pk")],
                                         [], [], [], [], [])
    client.create_table(make_table("default", "c"))
    client.add_foreign_key(t.AddForeignKeyRequest([fk("p", "id", "c", "id", name="c_fk")]))
    start = current(client)
    # a foreign key is found from its own table (ObjectStore: parent or child table)
    client.drop_constraint(t.DropConstraintRequest("DEFAULT", "C", "C_FK"))
    assert all_of(client, "c").foreignKeys == []
    (event,) = events_since(client, start)
    message = json.loads(event.message)
    assert (event.eventType, event.dbName, event.tableName) == ("DROP_CONSTRAINT", "DEFAULT", "C")
    assert (message["dbName"], message["tableName"], message["constraintName"]) == \
        ("DEFAULT", "C", "C_FK")
    # Hive: NoSuchObjectException turned into an undeclared InvalidObjectException; here
    # the declared NoSuchObjectException with the store's text
    with raises(t.NoSuchObjectException, "The constraint: c_fk does not exist for the "
                                         "associated table: default.c"):
        client.drop_constraint(t.DropConstraintRequest("default", "c", "c_fk"))
    with raises(t.NoSuchObjectException, "The constraint: x does not exist for the "
                                         "associated table: default.nope"):
        client.drop_constraint(t.DropConstraintRequest("default", "nope", "x"))
    client.drop_constraint(t.DropConstraintRequest("default", "p", "p_pk", catName="hive"))
    assert all_of(client, "p").primaryKeys == []


def test_constraints_follow_their_tables(client):
    client.create_database(t.Database(name="d"))
    client.create_table_with_constraints(make_table("d", "p"), [pk("p", "id", name="p_pk", db="d")],
                                         [], [], [], [], [])
    client.create_table_with_constraints(
        make_table("d", "c"), [], [fk("p", "id", "c", "id", name="c_fk", db="d")], [],
        [nn("c", "name", name="c_nn", db="d")], [], [])
    # a renamed table keeps them, under its new name
    table = client.get_table("d", "c")
    table.tableName = "c2"
    client.alter_table("d", "c", table)
    assert [(k.fktable_name, k.fk_name) for k in all_of(client, "c2", "d").foreignKeys] == \
        [("c2", "c_fk")]
    # dropping the referenced table drops the foreign keys that reference it
    client.drop_table("d", "p", True)
    got = all_of(client, "c2", "d")
    assert got.foreignKeys == [] and [c.nn_name for c in got.notNullConstraints] == ["c_nn"]
    # a table created again under the name starts without any
    client.drop_database("d", True, True)
    client.create_database(t.Database(name="d"))
    client.create_table(make_table("d", "c2"))
    assert all_of(client, "c2", "d").notNullConstraints == []


# ============================================================ against the Java metastore 2.3

DIFF_DB = "cons_diff"


def _outcome(fn):
    try:
        value = fn()
    except TApplicationException as err:
        return ("TApplicationException", err.type, err.message)
    except Exception as err:  # noqa: BLE001 - the outcome is what is compared
        return (type(err).__name__, getattr(err, "message", str(err)))
    if isinstance(value, (t.PrimaryKeysResponse, t.ForeignKeysResponse)):
        keys = value.primaryKeys if isinstance(value, t.PrimaryKeysResponse) else value.foreignKeys
        out = []
        for key in keys:
            doc = to_doc(key)
            doc.pop("catName", None)        # Hive 3+ (2.3 has no such field)
            for field in ("pk_name", "fk_name"):
                found = GENERATED.match(doc.get(field) or "")
                if found:   # the time in a generated name is each server's clock; Hive 4
                    # masks the hash to 28 bits (generateConstraintName), 2.3 does not
                    doc[field] = (f"{found.group(1)}_{int(found.group(2)) & 0xFFFFFFF}_<ms>_"
                                  f"{found.group(4)}")
            out.append(sorted(doc.items()))
        return sorted(out)
    return value


def run_keys(client) -> list[tuple[str, object]]:
    out = []

    def step(name, fn):
        out.append((name, _outcome(fn)))

    db = DIFF_DB

    def table(name, cols):
        return make_table(db, name, cols=cols)

    def keys_of(table_name):
        return client.get_primary_keys(t.PrimaryKeysRequest(db, table_name))

    def fks(*args):
        return client.get_foreign_keys(t.ForeignKeysRequest(*args))

    client.create_database(t.Database(name=db, parameters={}))
    step("create parent", lambda: client.create_table_with_constraints(
        table("parent", (("id", "int"), ("b", "string"))), [pk("parent", "id", name="parent_pk", db=db)],
        [], [], [], [], []))
    step("primary key", lambda: keys_of("parent"))
    step("missing table", lambda: keys_of("nope"))
    step("missing database", lambda: client.get_primary_keys(t.PrimaryKeysRequest("nodb", "t")))
    step("second primary key", lambda: client.add_primary_key(t.AddPrimaryKeyRequest(
        [pk("parent", "b", name="pk2", db=db)])))
    step("key on missing column", lambda: client.add_primary_key(t.AddPrimaryKeyRequest(
        [pk("parent", "zz", name="pk3", db=db)])))
    step("empty list", lambda: client.add_primary_key(t.AddPrimaryKeyRequest([])))
    client.create_table(table("child", (("pid", "int"), ("s", "string"))))
    step("add foreign key", lambda: client.add_foreign_key(t.AddForeignKeyRequest(
        [fk("parent", "id", "child", "pid", name="child_fk", db=db)])))
    step("foreign keys of child", lambda: fks(None, None, db, "child"))
    step("foreign keys between", lambda: fks(db, "parent", db, "child"))
    step("foreign keys of parent", lambda: fks(db, "parent", None, None))
    step("drop foreign key", lambda: client.drop_constraint(t.DropConstraintRequest(db, "child", "child_fk")))
    step("after drop", lambda: fks(None, None, db, "child"))
    step("drop missing", lambda: client.drop_constraint(t.DropConstraintRequest(db, "child", "nope")))
    step("foreign key of other type", lambda: client.add_foreign_key(t.AddForeignKeyRequest(
        [fk("parent", "id", "child", "s", name="fk2", db=db)])))
    step("unnamed key", lambda: client.create_table_with_constraints(
        table("multi", (("a", "int"), ("b", "int"))), [pk("multi", "a", 1, db=db), pk("multi", "b", 2, db=db)],
        [], [], [], [], []))
    step("generated names", lambda: keys_of("multi"))
    step("self reference", lambda: client.create_table_with_constraints(
        table("emp", (("id", "int"), ("boss", "int"))), [pk("emp", "id", name="emp_pk", db=db)],
        [fk("emp", "id", "emp", "boss", name="emp_fk", db=db)], [], [], [], []))
    step("self reference read", lambda: fks(db, "emp", db, "emp"))
    step("bad key column", lambda: client.create_table_with_constraints(
        table("bad", (("a", "int"),)), [pk("bad", "zz", name="bad_pk", db=db)], [], [], [], [], []))
    step("no table made", lambda: sorted(client.get_all_tables(db)))
    client.create_table_with_constraints(
        table("other", (("a", "int"),)), [pk("other", "a", name="other_pk", db=db)], [], [], [], [], [])
    client.create_table(table("c3", (("x", "int"),)))
    step("reference other", lambda: client.add_foreign_key(t.AddForeignKeyRequest(
        [fk("other", "a", "c3", "x", name="c3_fk", db=db)])))
    step("drop referenced table", lambda: client.drop_table(db, "other", True))
    step("references gone", lambda: fks(None, None, db, "c3"))
    step("rename keeps keys", lambda: client.alter_table(
        db, "emp", (lambda tb: (setattr(tb, "tableName", "emp2"), tb)[1])(client.get_table(db, "emp"))))
    step("keys after rename", lambda: fks(None, None, db, "emp2"))
    step("primary key after rename", lambda: keys_of("emp2"))
    step("key name of another table", lambda: client.create_table_with_constraints(
        table("dup", (("a", "int"),)), [pk("dup", "a", name="parent_pk", db=db)], [], [], [], [], []))
    client.drop_database(db, True, True)
    return out


INTERNAL = TApplicationException.INTERNAL_ERROR

# Steps where Hive 4 answers otherwise than the Java metastore 2.3, or hms-txn otherwise
# than both: (what 2.3 answers, what we answer).
EXPECTED_DIFFERENCES = {
    # 2.3 keys KEY_CONSTRAINTS by (name, position), so a name is taken in every table (its
    # store fails); Hive 4 checks names per table (constraintNameAlreadyExists(table, name)).
    "key name of another table": (("MetaException", "One or more instances could not be made persistent"),
                                  None),
    # Hive 4 names the table with its catalog (TableName.getQualified).
    "second primary key": (("MetaException", f" Primary key already exists for: {DIFF_DB}.parent"),
                           ("MetaException", f" Primary key already exists for: hive.{DIFF_DB}.parent")),
    # Hive 2.3 and 4 let the store's InvalidObjectException escape: INTERNAL_ERROR without
    # the text (and Hive's RetryingMetaStoreClient retries it). We answer the declared
    # MetaException with the text.
    "key on missing column": (("TApplicationException", INTERNAL, "Internal error processing add_primary_key"),
                              ("MetaException", "Parent column not found: zz")),
    # 2.3 fails on the unset referencing side (a NullPointerException); Hive 4 reads the
    # foreign keys of the referenced table.
    "foreign keys of parent": (lambda java: java[0] == "MetaException" and "NullPointerException" in java[1],
                               [[("catName", None)]]),
    # 2.3 does not check what a foreign key references; Hive 4 does (addForeignKeys).
    "foreign key of other type": (None, ("MetaException",
                                         "Foreign key references id:string; but no corresponding "
                                         "primary key or unique key exists. Possible keys: [id:int;]")),
    # Hive 2.3 and 4 turn the missing constraint into an undeclared InvalidObjectException
    # (INTERNAL_ERROR); we answer the declared NoSuchObjectException with the store's text.
    "drop missing": (("TApplicationException", INTERNAL, "Internal error processing drop_constraint"),
                     ("NoSuchObjectException",
                      f"The constraint: nope does not exist for the associated table: {DIFF_DB}.child")),
}


@pytest.mark.javahms
@pytest.mark.parametrize("backend", ["sqlite"])
def test_same_answers_as_the_java_metastore(java_metastore, hms):
    ours, theirs = hms.client(), connect(java_metastore.port)
    try:
        got, want = run_keys(ours), run_keys(theirs)
    finally:
        ours.close()
        theirs.close()
    assert [name for name, _ in got] == [name for name, _ in want]
    ours_by_step = dict(got)
    mismatches = []
    for (name, mine), (_, java) in zip(got, want):
        if name in EXPECTED_DIFFERENCES:
            java_want, ours_want = EXPECTED_DIFFERENCES[name]
            java_ok = java_want(java) if callable(java_want) else java == java_want
            if name == "foreign keys of parent":   # the same keys as read from the child
                ours_want = ours_by_step["foreign keys of child"]
            if not java_ok or mine != ours_want:
                mismatches.append(f"{name}: ours={mine!r} java={java!r}, expected "
                                  f"{EXPECTED_DIFFERENCES[name]!r}")
        elif mine != java:
            mismatches.append(f"{name}: ours={mine!r} java={java!r}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.javahms
@pytest.mark.parametrize("backend", ["sqlite"])
def test_extension_mode_forwards_constraints(java_metastore, hms_factory):
    """Extension mode (docs/extension-mode.md) keeps constraints in the upstream: a
    create_table_req with constraints goes there as create_table_with_constraints, and a
    Hive 2.3 upstream, which has no get_all_table_constraints, is asked for the table's
    primary and foreign keys instead (DESCRIBE FORMATTED needs the call)."""
    ext = hms_factory({"hms_txn.upstream.uris": java_metastore.uri,
                       "hms_txn.upstream.retries": "1"})
    c, direct = ext.client(), connect(java_metastore.port)
    db = "cons_ext"
    try:
        c.create_database(t.Database(name=db, parameters={}))
        c.create_table_req(t.CreateTableRequest(
            table=make_table(db, "p"), primaryKeys=[pk("p", "id", name="p_pk", db=db)]))
        c.create_table_req(t.CreateTableRequest(
            table=make_table(db, "c"), foreignKeys=[fk("p", "id", "c", "id", name="c_fk", db=db)]))
        # stored upstream
        assert [k.pk_name for k in direct.get_primary_keys(
            t.PrimaryKeysRequest(db, "p")).primaryKeys] == ["p_pk"]
        parent, child = all_of(c, "p", db), all_of(c, "c", db)
        assert [k.pk_name for k in parent.primaryKeys] == ["p_pk"] and parent.foreignKeys == []
        assert [(k.fk_name, k.pktable_name) for k in child.foreignKeys] == [("c_fk", "p")]
        assert (child.uniqueConstraints, child.notNullConstraints, child.defaultConstraints,
                child.checkConstraints) == ([], [], [], [])
    finally:
        direct.drop_database(db, True, True)
        c.close()
        direct.close()
