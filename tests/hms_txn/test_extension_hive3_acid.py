"""Extension mode: Hive 3/4 ACID tables on a Hive 2.x upstream (docs/extension-mode.md,
"Hive 3/4 ACID tables on a Hive 2.x upstream"; domain/extension/upstream_table_form.py).

Against the real Java metastore 2.3 (PySpark's jars). Its TransactionalValidationListener
(apache/hive branch-2.3, metastore/.../TransactionalValidationListener.java,
handleCreateTableTransactionalProp / conformToAcid / validateTransactionalProperties)
refuses ``transactional=true`` tables that are not bucketed ORC ("The table must be
bucketed and stored using an ACID compliant format (such as ORC)") and every
``transactional_properties`` but ``default``/``legacy`` (so insert-only tables). Through us
a Hive 4 client (pyiceberg's Hive 4 Thrift bindings, ``hive_metastore``) creates, alters,
reads and drops such tables, and gets them exactly as our standalone server answers.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import time

import pyarrow as pa
import pytest

import orc_acid
from thrift.protocol import TBinaryProtocol
from thrift.transport import TSocket, TTransport

from hms_txn.domain.extension import upstream_table_form as form
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.hms_txn.test_catalog import make_table
from tests.hms_txn.test_compactor import FAST, MAJOR, Engine, rows
from tests.support.postgres import free_port
from tests.support.requirements import require_module
from tests.support.servers import InProcessServer, connect
from hive_metastore import ThriftHiveMetastore as hive4   # pyiceberg's Hive 4 bindings (test extra)
from hive_metastore import ttypes as h4


ORC = ("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
       "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat", "org.apache.hadoop.hive.ql.io.orc.OrcSerde")
TEXT = ("org.apache.hadoop.mapred.TextInputFormat",
        "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe")
PARQUET = ("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
           "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
           "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
FULL_ACID = {"transactional": "true"}
FULL_ACID_DEFAULT = {"transactional": "true", "transactional_properties": "default"}
INSERT_ONLY = {"transactional": "true", "transactional_properties": "insert_only"}
SCHEMA = pa.schema([("id", pa.int32()), ("name", pa.string())])

# (name, parameters, formats, partition keys, bucket columns)
KINDS = [
    ("full_acid", FULL_ACID, ORC, (), ()),
    ("full_acid_parted", FULL_ACID_DEFAULT, ORC, ("dt",), ()),
    ("insert_only_text", INSERT_ONLY, TEXT, (), ()),
    ("insert_only_parquet_parted", INSERT_ONLY, PARQUET, ("dt",), ()),
    ("insert_only_orc_bucketed", INSERT_ONLY, ORC, (), ("id",)),
]


# what Hive 3/4's HiveMetaStoreClient declares in its table requests
H4_CAPS = h4.ClientCapabilities([h4.ClientCapability.INSERT_ONLY_TABLES])


class Hive4Client:
    """pyiceberg's Hive 4 bindings over a buffered binary socket (as Hive 4 clients talk)."""

    def __init__(self, port: int):
        self.transport = TTransport.TBufferedTransport(TSocket.TSocket("127.0.0.1", port))
        self.transport.open()
        self.c = hive4.Client(TBinaryProtocol.TBinaryProtocol(self.transport))

    def __getattr__(self, name):
        return getattr(self.c, name)

    def get_table(self, db, name):
        """As Hive 3/4's HiveMetaStoreClient.getTable asks: get_table_req with the client's
        capabilities (INSERT_ONLY_TABLES)."""
        return self.c.get_table_req(h4.GetTableRequest(
            dbName=db, tblName=name, catName="hive", capabilities=H4_CAPS)).table

    def close(self):
        self.transport.close()


def _h4_table(db, name, params, formats, keys, buckets, location=None):
    inp, out, serde = formats
    sd = h4.StorageDescriptor(
        cols=[h4.FieldSchema("id", "int", None), h4.FieldSchema("name", "string", None)],
        location=location, inputFormat=inp, outputFormat=out, compressed=False,
        numBuckets=2 if buckets else -1, bucketCols=list(buckets), sortCols=[], parameters={},
        serdeInfo=h4.SerDeInfo(name=None, serializationLib=serde,
                               parameters={"serialization.format": "1"}))
    return h4.Table(tableName=name, dbName=db, owner="hive4", sd=sd, tableType="MANAGED_TABLE",
                    partitionKeys=[h4.FieldSchema(k, "string", None) for k in keys],
                    parameters={**params, "created_by": "hive4"}, catName="hive")


def _fields(obj, path=""):
    """A Thrift struct as {path: leaf value}."""
    if hasattr(obj, "thrift_spec"):
        out = {}
        for k, v in vars(obj).items():
            out.update(_fields(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(_fields(v, f"{path}[{k}]"))
        return out or {path: {}}
    if isinstance(obj, list):
        out = {}
        for i, v in enumerate(obj):
            out.update(_fields(v, f"{path}[{i}]"))
        return out or {path: []}
    return {path: obj}


# What differs between any two metastores holding the same table: when it was made and
# where (each has its own warehouse), the id our database gives it. The Java 2.3 upstream
# does not have Hive 4's fields (catName, ownerType, id, ...): a Hive 2.x answer lacks them.
PER_SERVER = {"createTime", "sd.location", "parameters[transient_lastDdlTime]", "id",
              "ownerType", "catName", "writeId", "isStatsCompliant", "accessType", "lastAccessTime"}


# Fields the Java 2.3 metastore fills with Hive's defaults where our standalone server
# leaves them unset (for every table, ACID or not: its ObjectStore builds them).
UPSTREAM_DEFAULTS = {"sd.skewedInfo.skewedColNames": [], "sd.skewedInfo.skewedColValues": [],
                     "sd.skewedInfo.skewedColValueLocationMaps": {},
                     "sd.storedAsSubDirectories": False, "rewriteEnabled": False}


def _differences(ours, standalone) -> dict[str, tuple]:
    """The fields in which the table through us differs from the standalone server's, but
    for PER_SERVER ones and the upstream's defaults (checked to be exactly those)."""
    a, b = _fields(ours), _fields(standalone)
    diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b)
            if a.get(k) != b.get(k) and k not in PER_SERVER}
    for key, value in UPSTREAM_DEFAULTS.items():
        if key in diff and diff[key] == (value, None):
            del diff[key]
    return diff


def _server(root, name: str, conf: dict) -> InProcessServer:
    base = os.path.join(str(root), name)
    return InProcessServer(os.path.join(base, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{base}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(base, "warehouse"), **conf})


def _ext_conf(uri: str) -> dict:
    # compaction requests (compact2) run by our worker and cleaner on the upstream's tables
    return {"hms_txn.upstream.uris": uri, "hms_txn.upstream.retries": "1",
            "hms_txn.upstream.retry.delay": "50ms", "hms_txn.upstream.socket.timeout": "30s",
            "hms_txn.upstream.cache.ttl": "2s", **FAST, "hive.compactor.initiator.on": "false"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The Java metastore 2.3, one hms-txn in front of it (``env.ext``; ``env.restart``
    starts a new one, optionally on a new, empty database) and a standalone hms-txn."""
    from hms_bench.javahms import start_java_metastore
    root = tmp_path_factory.mktemp("hive3-acid")
    port = free_port()
    java = start_java_metastore(port, str(root / "hms"))

    class Env:
        root_dir = str(root)
        upstream = java
        ext = _server(root, "ext", _ext_conf(java.uri))
        standalone = _server(root, "standalone", {})

        def restart(self, lose_database: bool) -> None:
            self.ext.stop()
            if lose_database:
                shutil.rmtree(os.path.join(str(root), "ext"))
            self.ext = _server(root, "ext", _ext_conf(java.uri))

    e = Env()
    yield e
    e.ext.stop()
    e.standalone.stop()
    java.stop()


def _db(client, name, root):
    client.create_database(h4.Database(name=name, locationUri=f"file:{root}/{name}.db",
                                       parameters={}))


def _create_both(env, db, kind):
    """The table of ``kind`` made by a Hive 4 client through us and on the standalone server;
    (client through us, client of the standalone)."""
    name, params, formats, keys, buckets = kind
    ours, alone = Hive4Client(env.ext.port), Hive4Client(env.standalone.port)
    for c in (ours, alone):
        c.create_table_req(h4.CreateTableRequest(table=_h4_table(db, name, params, formats, keys,
                                                                 buckets)))
    return ours, alone


@pytest.mark.javahms
def test_each_kind_is_created_altered_read_and_dropped_as_the_standalone_server_does(env):
    db = "h3_ddl"
    for server in (env.ext, env.standalone):
        c = Hive4Client(server.port)
        _db(c, db, os.path.join(env.root_dir, "ext" if server is env.ext else "standalone"))
        c.close()
    direct = connect(env.upstream.port)
    for kind in KINDS:
        name = kind[0]
        ours, alone = _create_both(env, db, kind)
        try:
            for read in (lambda c: c.get_table(db, name),
                         lambda c: c.get_table_req(h4.GetTableRequest(
                             dbName=db, tblName=name, capabilities=H4_CAPS)).table,
                         lambda c: c.get_table_objects_by_name_req(h4.GetTablesRequest(
                             dbName=db, tblNames=[name], capabilities=H4_CAPS)).tables[0]):
                got, want = read(ours), read(alone)
                assert _differences(got, want) == {}, name
                assert got.parameters["transactional"] == "true"
            # what the upstream stores: a form it takes (its listener refuses these as sent)
            there = direct.get_table(db, name)
            assert "transactional" not in there.parameters
            assert there.parameters["storage_handler"] == form.GUARD_HANDLER
            moved = json.loads(there.parameters[form.FORM_KEY])
            assert moved == {k: v for k, v in kind[1].items()}
            assert there.sd.inputFormat == kind[2][0] and there.sd.bucketCols == list(kind[4])

            # alter through each: new parameter and a new column, as a Hive 4 client does
            for c in (ours, alone):
                table = c.get_table(db, name)
                table.parameters["comment"] = "altered"
                table.sd.cols.append(h4.FieldSchema("extra", "string", None))
                c.alter_table_req(h4.AlterTableRequest(dbName=db, tableName=name, table=table))
            got, want = ours.get_table(db, name), alone.get_table(db, name)
            assert _differences(got, want) == {}, name
            assert got.parameters["comment"] == "altered" and got.sd.cols[-1].name == "extra"
            assert form.FORM_KEY in direct.get_table(db, name).parameters   # still in form

            # making it non-transactional is refused, as Hive refuses it
            table = ours.get_table(db, name)
            del table.parameters["transactional"]
            with pytest.raises(h4.MetaException, match="'transactional'='true' cannot be unset"):
                ours.alter_table_with_environment_context(db, name, table, None)
            assert ours.get_table(db, name).parameters["transactional"] == "true"

            dirs = [c.get_table(db, name).sd.location[len("file:"):] for c in (ours, alone)]
            assert all(os.path.isdir(d) for d in dirs), dirs
            for c in (ours, alone):
                c.drop_table_with_environment_context(db, name, True, None)
            assert not any(os.path.exists(d) for d in dirs), dirs     # data dropped by both
            with pytest.raises(t.NoSuchObjectException):
                direct.get_table(db, name)
            with pytest.raises(h4.NoSuchObjectException):
                ours.get_table(db, name)
        finally:
            ours.close()
            alone.close()
    direct.close()


@pytest.mark.javahms
def test_hive2_acid_tables_keep_their_hive2_form(env):
    """A bucketed full-ACID ORC table, which Hive 2.x takes as it is, is stored unchanged
    (Hive 2 clients keep using it as a Hive 2 ACID table, as before)."""
    c = Hive4Client(env.ext.port)
    c.create_table_req(h4.CreateTableRequest(table=_h4_table(
        "default", "hive2_acid", FULL_ACID, ORC, (), ("id",))))
    direct = connect(env.upstream.port)
    try:
        there = direct.get_table("default", "hive2_acid")
        assert there.parameters["transactional"] == "true"
        assert form.FORM_KEY not in there.parameters and "storage_handler" not in there.parameters
        assert c.get_table("default", "hive2_acid").parameters["transactional"] == "true"
    finally:
        c.drop_table_with_environment_context("default", "hive2_acid", True, None)
        c.close()
        direct.close()


def _wait_for(read, done, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


@pytest.mark.javahms
def test_a_plain_table_converted_to_insert_only_takes_the_form(env):
    """Hive 3's ALTER TABLE ... SET TBLPROPERTIES ('transactional'='true',
    'transactional_properties'='insert_only') on a plain upstream table, through us."""
    c = Hive4Client(env.ext.port)
    direct = connect(env.upstream.port)
    try:
        c.create_table_req(h4.CreateTableRequest(table=_h4_table(
            "default", "converted", {}, TEXT, (), ())))
        assert form.FORM_KEY not in direct.get_table("default", "converted").parameters
        table = c.get_table("default", "converted")
        table.parameters.update(INSERT_ONLY)
        c.alter_table_req(h4.AlterTableRequest(dbName="default", tableName="converted",
                                               table=table))
        there = direct.get_table("default", "converted").parameters
        assert json.loads(there[form.FORM_KEY]) == INSERT_ONLY
        assert there["storage_handler"] == form.GUARD_HANDLER
        got = c.get_table("default", "converted").parameters
        assert {k: got[k] for k in INSERT_ONLY} == INSERT_ONLY and "storage_handler" not in got
    finally:
        c.drop_table_with_environment_context("default", "converted", True, None)
        c.close()
        direct.close()


@pytest.mark.javahms
def test_the_upstream_refuses_them_as_sent(env):
    """Why the form exists: the Java 2.3 metastore's TransactionalValidationListener
    (conformToAcid, validateTransactionalProperties) refuses both kinds as sent."""
    direct = connect(env.upstream.port)
    try:
        unbucketed = make_table("default", "refused", params=FULL_ACID)
        with pytest.raises(t.MetaException, match="must be bucketed and stored using an ACID"):
            direct.create_table(unbucketed)
        insert_only = make_table("default", "refused", params=INSERT_ONLY)
        insert_only.sd.bucketCols, insert_only.sd.numBuckets = ["id"], 2
        with pytest.raises(t.MetaException, match="unknown value insert_only for transactional_pr"):
            direct.create_table(insert_only)
    finally:
        direct.close()


def _ids(engine, table, part=None):
    return sorted(i for _, i, _ in engine.read(table, part))


@pytest.mark.javahms
def test_write_ids_locks_rows_compaction_and_recovery_from_the_upstream_form(env):
    """Rows written and read with orc_acid under our write ids and locks in a Hive 3 full-ACID
    table (unbucketed; partitioned and not) and an insert-only one that live upstream in
    their upstream form; a major compaction by our worker; then our server restarted, and
    again on a new, empty database: the tables are served from the upstream form alone."""
    db = "h3_data"
    h4c = Hive4Client(env.ext.port)
    _db(h4c, db, os.path.join(env.root_dir, "data"))
    for name, params, formats, keys in (("events", FULL_ACID, ORC, ()),
                                        ("parted", FULL_ACID, ORC, ("dt",)),
                                        ("io", INSERT_ONLY, ORC, ())):
        h4c.create_table_req(h4.CreateTableRequest(table=_h4_table(db, name, params, formats,
                                                                   keys, ())))
    created = {n: h4c.get_table(db, n) for n in ("events", "parted", "io")}
    h4c.close()
    c = connect(env.ext.port)
    e = Engine(c, db)
    # full ACID, unpartitioned: two writes, each under a write id and a SHARED_WRITE lock
    # (Engine.begin_write checks the lock is acquired)
    assert e.insert("events", rows([1, 2, 3])) == 1
    txn, wid = e.begin_write("events")
    assert wid == 2
    shown = c.show_locks(t.ShowLocksRequest(dbname=db, tablename="events")).locks
    assert [x.txnid for x in shown] == [txn]
    orc_acid.write_delta(e.location("events"), wid, 0, 0, rows([4, 5]))
    assert _ids(e, "events") == [1, 2, 3]           # not committed: not in the snapshot
    e.commit(txn, "events", wid)
    assert _ids(e, "events") == [1, 2, 3, 4, 5]
    assert c.show_locks(t.ShowLocksRequest(dbname=db, tablename="events")).locks == []
    # partitioned: a partition added through us, written and read
    table = c.get_table_acid_aware(db, "parted")
    sd = copy.deepcopy(table.sd)
    sd.location = None
    c.add_partition(t.Partition(values=["a"], dbName=db, tableName="parted", sd=sd))
    e.insert("parted", rows([7, 8]), part="dt=a")
    assert _ids(e, "parted", "dt=a") == [7, 8]
    # insert-only: plain ORC files in delta directories, read under the write ids
    txn, wid = e.begin_write("io")
    orc_acid.write_insert_only(e.location("io"), wid, rows([10, 11]))
    e.commit(txn, "io", wid)
    vt, wl = e.snapshot("io")
    assert sorted(orc_acid.read_table(e.location("io"), wl, valid_txns=vt, insert_only=True)
                  .column("id").to_pylist()) == [10, 11]
    # get_table_req with the reader's ValidWriteIdList: our cache, the Hive 3 form
    got = c.get_table_req(t.GetTableRequest(
        dbName=db, tblName="events", validWriteIdList=str(e.snapshot("events")[1]),
        capabilities=t.ClientCapabilities([t.ClientCapability.INSERT_ONLY_TABLES])))
    assert got.table.parameters["transactional"] == "true"
    # a major compaction, run by our worker on the upstream's table, cleaned by our cleaner
    cid = e.compact("events", MAJOR)
    done = e.wait_state(cid, {"succeeded"}, timeout=60)
    assert done.dbname == db and done.tablename == "events"
    left = os.listdir(e.location("events"))        # the deltas are gone, one base left
    assert len(left) == 1 and left[0].startswith("base_0000002"), left
    assert _ids(e, "events") == [1, 2, 3, 4, 5]
    c.close()

    def served_as_created(client):
        for n, before in created.items():
            assert _differences(client.get_table(db, n), before) == {}, n
        client.close()

    env.restart(lose_database=False)
    c = connect(env.ext.port)
    served_as_created(Hive4Client(env.ext.port))
    assert _ids(Engine(c, db), "events") == [1, 2, 3, 4, 5]
    assert _ids(Engine(c, db), "parted", "dt=a") == [7, 8]
    assert Engine(c, db).insert("events", rows([6])) == 3    # our database kept the write ids
    c.close()

    env.restart(lose_database=True)
    served_as_created(Hive4Client(env.ext.port))
    c = connect(env.ext.port)
    assert c.get_table_acid_aware(db, "io").parameters["transactional_properties"] == "insert_only"
    assert c.get_all_tables(db) == ["events", "io", "parted"]
    # the write-id state, lost with the database, is rebuilt from the directories: every
    # file reads as committed (the compacted base's _v transaction too), and new writes
    # get write ids above those on disk
    e = Engine(c, db)
    assert _ids(e, "events") == [1, 2, 3, 4, 5, 6]
    assert _ids(e, "parted", "dt=a") == [7, 8]
    assert e.insert("events", rows([12])) == 4
    assert e.insert("parted", rows([9]), part="dt=a") == 2
    assert _ids(e, "events") == [1, 2, 3, 4, 5, 6, 12]
    assert _ids(e, "parted", "dt=a") == [7, 8, 9]
    vt, wl = e.snapshot("io")
    assert sorted(orc_acid.read_table(e.location("io"), wl, valid_txns=vt, insert_only=True)
                  .column("id").to_pylist()) == [10, 11]
    c.close()


@pytest.mark.javahms
def test_what_a_hive2_client_sees_on_the_upstream(env):
    """hmsclient (Hive 2.3's IDL) straight on the upstream: the table is there, with no
    ``transactional`` and a storage handler Hive 2.x clients cannot load, which makes Hive
    2.x's Table.getStorageHandler (ql/metadata/Table.java) fail for any client that loads
    the table through Hive's ql layer (Spark's Hive 2.3 client, Hive 2's CLI)."""
    from hmsclient import hmsclient as hmsclient_mod
    h4c = Hive4Client(env.ext.port)
    h4c.create_table_req(h4.CreateTableRequest(table=_h4_table(
        "default", "seen_by_hive2", INSERT_ONLY, PARQUET, ("dt",), ())))
    h4c.close()
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=env.upstream.port) as hc:
        table = hc.get_table("default", "seen_by_hive2")
        assert table.parameters["storage_handler"] == form.GUARD_HANDLER
        assert "transactional" not in table.parameters
        assert json.loads(table.parameters[form.FORM_KEY]) == INSERT_ONLY
        assert table.sd.inputFormat == PARQUET[0]
        assert "seen_by_hive2" in hc.get_all_tables("default")
        # a raw Thrift client can still edit the metadata; the table stays a Hive 3 table
        table.parameters["edited_by"] = "hive2"
        hc.alter_table("default", "seen_by_hive2", table)
    c = Hive4Client(env.ext.port)
    seen = _wait_for(lambda: c.get_table("default", "seen_by_hive2").parameters,
                     lambda p: p.get("edited_by") == "hive2")      # our cache's TTL
    assert {k: seen[k] for k in INSERT_ONLY} == INSERT_ONLY and "storage_handler" not in seen
    c.drop_table_with_environment_context("default", "seen_by_hive2", True, None)
    c.close()


@pytest.mark.javahms
@pytest.mark.spark
def test_spark_hive_acid_through_us_and_spark_hive2_client_on_the_upstream(env, monkeypatch):
    """One Spark session: ``spark.hive_acid`` writes and reads a Hive 3 full-ACID table
    (unbucketed ORC) through us; Spark's own Hive 2.3 client, straight on the upstream,
    lists the table but refuses to describe, read, write or drop it: its
    HiveClientImpl.convertHiveTableToCatalogTable (sql/hive/.../client/HiveClientImpl.scala)
    calls Hive's Table.getStorageHandler, which loads the guard class and fails."""
    require_module("pyspark.sql.datasource")
    from tests.support.spark import run_scenario
    h4c = Hive4Client(env.ext.port)
    h4c.create_table_req(h4.CreateTableRequest(table=_h4_table(
        "default", "sparked", FULL_ACID, ORC, (), ())))
    h4c.close()
    monkeypatch.setenv("HIVE3_ACID_UPSTREAM", env.upstream.uri)
    monkeypatch.setenv("HIVE3_ACID_TABLE", "default.sparked")
    workdir = os.path.join(env.root_dir, "spark")
    got = {r["what"]: r for r in run_scenario(
        env.ext.uri, workdir, script=os.path.join(os.path.dirname(__file__), "..", "spark",
                                                  "ext_hive3_acid_job.py"), timeout=600)}
    assert got["hive_acid append"]["ok"] and got["hive_acid append 2"]["ok"], got
    assert got["hive_acid read"]["result"] == [[1, "a"], [2, "b"], [3, "c"]]
    assert got["show tables"]["result"] == sorted(
        connect(env.upstream.port).get_all_tables("default"))
    assert "sparked" in got["show tables"]["result"]
    for refused in ("describe", "select", "insert", "drop"):
        assert not got[refused]["ok"], got[refused]
        assert form.GUARD_HANDLER in got[refused]["error"], got[refused]
    assert got["hive_acid read after"]["result"] == [[1, "a"], [2, "b"], [3, "c"]]
    # tables hive_acid created through us: partitioned full ACID (with a DELETE) and
    # insert-only Parquet; both in the upstream form, both refused by Spark's own client
    for step in ("create parted", "append parted", "delete parted", "create io", "append io"):
        assert got[step]["ok"], got[step]
    assert got["read parted"]["result"] == [[1, "a", "x"], [2, "b", "y"]]
    assert got["read io"]["result"] == [[1, "a"], [2, "b"]]
    for refused in ("select parted", "select io"):
        assert not got[refused]["ok"] and form.GUARD_HANDLER in got[refused]["error"], got[refused]
    direct = connect(env.upstream.port)
    for name, kind in (("sparked_parted", {"transactional": "true"}), ("sparked_io", INSERT_ONLY)):
        stored = json.loads(direct.get_table("default", name).parameters[form.FORM_KEY])
        assert {k: stored[k] for k in kind} == kind, stored
    direct.close()
    c = connect(env.ext.port)
    e = Engine(c, "default")
    assert _ids(e, "sparked") == [1, 2, 3]     # orc_acid reads what hive_acid wrote
    assert c.get_table_acid_aware("default", "sparked").parameters["transactional"] == "true"
    for name in ("sparked", "sparked_parted", "sparked_io"):
        c.drop_table("default", name, True)
    c.close()


def test_a_hive3_upstream_gets_the_tables_as_sent(tmp_path):
    """An upstream that has catalogs (Hive 3 and later; here another hms-txn) takes Hive 3/4
    ACID tables as they are: no upstream form."""
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", _ext_conf(upstream.uri))
    try:
        c = Hive4Client(ext.port)
        c.create_table_req(h4.CreateTableRequest(table=_h4_table(
            "default", "as_sent", INSERT_ONLY, TEXT, (), ())))
        c.close()
        there = upstream.client().get_table_acid_aware("default", "as_sent")
        assert there.parameters["transactional_properties"] == "insert_only"
        assert form.FORM_KEY not in there.parameters and "storage_handler" not in there.parameters
    finally:
        ext.stop()
        upstream.stop()
