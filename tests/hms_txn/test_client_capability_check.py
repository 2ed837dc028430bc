"""ACID tables and clients that have not declared they understand them (issues 33, 41).

The PyPI clients ``hmsclient`` (Hive 2.3 IDL: ``get_table``, ``get_table_req`` with Hive 3's
``ClientCapabilities`` only) and ``pymetastore`` (plain ``get_table``) stand for every Hive 2
client. Rules (``hms_txn.domain.catalog.plain_form``): an insert-only table needs
``INSERT_ONLY_TABLES`` (Hive 3/4 refuse it otherwise: HMSHandler.getTableInternal and
getTableObjectsInternal), a full-ACID table some declared capability (Hive serves it as
stored); a client without gets the table in the plain form, on every table call: its
columns, partition keys, location and parameters as stored, an input and output format that
exists nowhere and names ``spark.hive_acid``, an empty serde name, an external table type, and Hive 4's
access type NONE. What such a client sends back (the table altered, a partition copied from
it) is stored with the table's own formats. ``hive.metastore.client.capability.check``
false gives the stored tables. Extension mode applies the same rules to the upstream's
tables.
"""

from __future__ import annotations

import copy
import os

import pyarrow as pa
import pytest
from hmsclient import hmsclient as hmsclient_mod
from hmsclient.genthrift.hive_metastore import ttypes as ht
from pymetastore.metastore import HMS

from hms_txn.domain.catalog.plain_form import PLAIN_FORMAT
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.servers import InProcessServer

KINDS = {
    "full": {"transactional": "true"},
    "full_part": {"transactional": "true"},
    "io": {"transactional": "true", "transactional_properties": "insert_only"},
    "io_part": {"transactional": "true", "transactional_properties": "INSERT_ONLY"},
    "plain": {},
}
# Hive 3's ClientCapability.INSERT_ONLY_TABLES: hmsclient's Hive 2.3 IDL knows only
# TEST_CAPABILITY (1), so a Hive 2.3 client cannot even name it
INSERT_ONLY_TABLES = 2
JAVA_KINDS = ("full", "full_part", "plain")
ACID = ("full", "full_part", "io", "io_part")
ORC = ("org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
       "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
       "org.apache.hadoop.hive.ql.io.orc.OrcSerde")


def _table(name: str, db: str = "acid_db") -> t.Table:
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("id", "int", ""), t.FieldSchema("name", "string", "")],
        inputFormat=ORC[0], outputFormat=ORC[1],
        serdeInfo=t.SerDeInfo(serializationLib=ORC[2], parameters={}),
        bucketCols=[], sortCols=[], parameters={}, numBuckets=-1)
    keys = [t.FieldSchema("p", "string", "")] if name.endswith("_part") else []
    return t.Table(tableName=name, dbName=db, owner="me", sd=sd, tableType="MANAGED_TABLE",
                   partitionKeys=keys, parameters=dict(KINDS[name]))


def _populate(client, db: str = "acid_db") -> None:
    client.create_database(t.Database(name=db, parameters={}))
    for name in KINDS:
        client.create_table(_table(name, db))
        if name.endswith("_part"):
            client.add_partitions([t.Partition(values=["a"], dbName=db, tableName=name)])


def _storage(table) -> tuple:
    return (table.sd.inputFormat, table.sd.outputFormat, table.sd.serdeInfo.serializationLib)


def assert_plain_form(got, stored) -> None:
    """``got`` (a Table of any client's IDL) is the plain form of ``stored``."""
    assert _storage(got) == (PLAIN_FORMAT, PLAIN_FORMAT, "")
    assert got.tableType == "EXTERNAL_TABLE"
    assert got.parameters == {**stored.parameters, "EXTERNAL": "TRUE"}
    assert [(c.name, c.type) for c in got.sd.cols] == [(c.name, c.type) for c in stored.sd.cols]
    assert [k.name for k in got.partitionKeys or []] == [k.name for k in stored.partitionKeys]
    assert (got.tableName, got.dbName, got.sd.location) == (
        stored.tableName, stored.dbName, stored.sd.location)


@pytest.fixture
def populated(hms, client):
    _populate(client)
    return hms


def test_hmsclient_gets_the_plain_form_of_acid_tables(populated, client):
    stored = {n: client.get_table_acid_aware("acid_db", n) for n in KINDS}
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=populated.port) as c:
        for name in ACID:
            assert_plain_form(c.get_table("acid_db", name), stored[name])
            # get_table_req without capabilities, or with Hive 2.3's only one: the same
            for caps in (None, ht.ClientCapabilities([ht.ClientCapability.TEST_CAPABILITY])):
                assert_plain_form(c.get_table_req(ht.GetTableRequest(
                    dbName="acid_db", tblName=name, capabilities=caps)).table, stored[name])
            # declaring Hive 3's INSERT_ONLY_TABLES is enough for both kinds: as stored
            got = c.get_table_req(ht.GetTableRequest(
                dbName="acid_db", tblName=name,
                capabilities=ht.ClientCapabilities([INSERT_ONLY_TABLES]))).table
            assert (_storage(got), got.tableType) == (ORC, "MANAGED_TABLE")
            assert [f.name for f in c.get_fields("acid_db", name)] == ["id", "name"]
            assert [f.name for f in c.get_schema("acid_db", name)][:2] == ["id", "name"]
        assert c.get_all_tables("acid_db") == sorted(KINDS)
        assert c.get_partition_names("acid_db", "io_part", -1) == ["p=a"]
        assert _storage(c.get_table("acid_db", "plain")) == ORC
        # the listing calls: the same form, the plain table as stored
        for listed in (c.get_table_objects_by_name("acid_db", sorted(KINDS)),
                       c.get_table_objects_by_name_req(ht.GetTablesRequest(
                           dbName="acid_db", tblNames=sorted(KINDS))).tables):
            by_name = {x.tableName: x for x in listed}
            assert sorted(by_name) == sorted(KINDS)
            for name in ACID:
                assert_plain_form(by_name[name], stored[name])
            assert _storage(by_name["plain"]) == ORC
        listed = c.get_table_objects_by_name_req(ht.GetTablesRequest(
            dbName="acid_db", tblNames=sorted(KINDS),
            capabilities=ht.ClientCapabilities([INSERT_ONLY_TABLES]))).tables
        assert {_storage(x) for x in listed} == {ORC}


def test_the_plain_form_carries_hive4_access_type(populated, client):
    # our own client's IDL has Hive 4's fields: a plain get_table shows what the plain form
    # adds for Hive 4 clients (MetastoreDefaultTransformer, no processor capabilities)
    full, io = client.get_table("acid_db", "full"), client.get_table("acid_db", "io")
    assert (full.accessType, full.requiredReadCapabilities, full.requiredWriteCapabilities) == (
        1, ["CONNECTORREAD", "HIVEFULLACIDREAD"],
        ["HIVEFULLACIDWRITE", "HIVEMANAGESTATS", "HIVECACHEINVALIDATE", "CONNECTORWRITE"])
    assert io.requiredReadCapabilities == ["CONNECTORREAD", "HIVEMANAGEDINSERTREAD"]
    assert client.get_table("acid_db", "plain").accessType is None


def test_pymetastore_gets_the_plain_form(populated, client):
    with HMS.create(host="127.0.0.1", port=populated.port) as hms:
        assert hms.list_tables("acid_db") == sorted(KINDS)
        assert hms.list_partitions("acid_db", "full_part") == ["p=a"]
        for name in ACID:
            got = hms.get_table("acid_db", name)
            assert (got.name, got.table_type) == (name, "EXTERNAL_TABLE")
            assert got.storage.storage_format.input_format == PLAIN_FORMAT
            assert hms.list_columns("acid_db", name) == ["id", "name"]
        assert hms.get_table("acid_db", "plain").table_type == "MANAGED_TABLE"


def _files(location: str) -> dict[str, tuple[int, int]]:
    """Every file under a directory with its size and modification time."""
    out = {}
    for root, _, names in os.walk(location):
        for n in names:
            st = os.stat(os.path.join(root, n))
            out[os.path.relpath(os.path.join(root, n), location)] = (st.st_size, st.st_mtime_ns)
    return out


def _write_rows(client, name: str, location: str, ids: list[int]) -> None:
    """One committed transaction writing ``ids`` as Hive does for the table's kind."""
    import orc_acid
    txn = client.open_txns(t.OpenTxnRequest(num_txns=1, user="u", hostname="h")).txn_ids[0]
    wid = client.allocate_table_write_ids(t.AllocateTableWriteIdsRequest(
        dbName="acid_db", tableName=name, txnIds=[txn])).txnToWriteIds[0].writeId
    data = pa.table({"id": pa.array(ids, pa.int32()), "name": [f"n{i}" for i in ids]})
    if name.startswith("io"):
        orc_acid.write_insert_only(location, wid, data)
    else:
        orc_acid.write_delta(location, wid, 0, 0, data)
    client.commit_txn(t.CommitTxnRequest(txnid=txn))


def _acid_rows(client, name: str, location: str) -> list[int]:
    """The rows an ACID reader sees now (orc_acid with the metastore's snapshot)."""
    import orc_acid
    from orc_acid.valid_ids import ValidTxnList, ValidWriteIdList
    r = client.get_open_txns()
    vt = ValidTxnList(r.txn_high_water_mark, open_ids=list(r.open_txns))
    tw = client.get_valid_write_ids(t.GetValidWriteIdsRequest(
        fullTableNames=[f"acid_db.{name}"], validTxnList=str(vt))).tblValidWriteIds[0]
    wl = ValidWriteIdList(tw.fullTableName, tw.writeIdHighWaterMark,
                          open_ids=list(tw.invalidWriteIds), min_open=tw.minOpenWriteId)
    got = orc_acid.read_table(location, wl, valid_txns=vt, insert_only=name.startswith("io"))
    return sorted(got.column("id").to_pylist())


def test_what_a_hive2_client_sends_back_keeps_the_stored_form(populated, client):
    """A Hive 2 client alters the table it got (hmsclient's alter_table of the plain form)
    and adds a partition with the table's storage descriptor, as Hive's ``Partition``
    copies it (Spark's ADD PARTITION, MSCK REPAIR TABLE): the metastore stores the table's
    own formats, serde and type; the files and the rows an ACID reader sees are unchanged.
    A new table in the plain form is refused."""
    from tests.hms_txn.test_catalog import local
    locations = {}
    for name in ACID:
        table = client.get_table_acid_aware("acid_db", name)
        locations[name] = local(client.get_partition("acid_db", name, ["a"]).sd.location
                                if table.partitionKeys else table.sd.location)
        _write_rows(client, name, locations[name], [1, 2, 3])
    before = {name: (_files(loc), _acid_rows(client, name, loc))
              for name, loc in locations.items()}
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=populated.port) as c:
        for name in ACID:
            got = c.get_table("acid_db", name)
            got.parameters["comment"] = "altered by a Hive 2 client"
            c.alter_table("acid_db", name, got)
            if name.endswith("_part"):
                c.add_partitions([ht.Partition(values=["b"], dbName="acid_db", tableName=name,
                                               sd=copy.deepcopy(got.sd), parameters={})])
            copied = copy.deepcopy(got)
            copied.tableName = f"copy_of_{name}"
            copied.sd.location = None
            with pytest.raises(ht.InvalidObjectException, match=PLAIN_FORMAT):
                c.create_table(copied)
    for name in ACID:
        stored = client.get_table_acid_aware("acid_db", name)
        assert (_storage(stored), stored.tableType) == (ORC, "MANAGED_TABLE"), name
        assert "EXTERNAL" not in stored.parameters
        assert stored.parameters["comment"] == "altered by a Hive 2 client"
        assert {_storage(p) for p in client.get_partitions("acid_db", name, -1)} <= {ORC}
        assert (_files(locations[name]), _acid_rows(client, name, locations[name])) == \
            before[name], name
    assert len(client.get_partitions("acid_db", "full_part", -1)) == 2


def test_our_clients_declare_and_get_every_table(populated, client):
    for name in KINDS:
        assert _storage(client.get_table_acid_aware("acid_db", name)) == ORC
    assert client.get_table_req(t.GetTableRequest(
        dbName="acid_db", tblName="full", processorCapabilities=["HIVEFULLACIDREAD"])).table \
        .accessType == 2          # Hive 4's translation (test_capabilities), not the plain form


def test_check_off_gives_the_stored_tables(hms_factory):
    hms = hms_factory({"metastore.client.capability.check": "false"})   # Hive's own key name
    with hms.client() as ours:
        _populate(ours)
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=hms.port) as c:
        for name in KINDS:
            assert _storage(c.get_table("acid_db", name)) == ORC
        assert {_storage(x) for x in c.get_table_objects_by_name("acid_db", sorted(KINDS))} \
            == {ORC}


# ---------------------------------------------------------------- extension mode

def _server(root, name: str, conf: dict) -> InProcessServer:
    base = os.path.join(str(root), name)
    return InProcessServer(os.path.join(base, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{base}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(base, "warehouse"), **conf})


def _check_forwarded(ext_port: int, kinds) -> None:
    """The extension-mode server hands the upstream's ACID tables in the plain form, as its
    own, and stores what a Hive 2 client sends back in the table's own form."""
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=ext_port) as c:
        for name in set(ACID) & set(kinds):
            got = c.get_table("acid_db", name)
            assert (_storage(got), got.tableType) == (
                (PLAIN_FORMAT, PLAIN_FORMAT, ""), "EXTERNAL_TABLE")
            assert [f.name for f in c.get_fields("acid_db", name)] == ["id", "name"]
            got.parameters["comment"] = "altered by a Hive 2 client"
            c.alter_table("acid_db", name, got)
            if name.endswith("_part"):
                c.add_partitions([ht.Partition(values=["b"], dbName="acid_db", tableName=name,
                                               sd=copy.deepcopy(got.sd), parameters={})])
        assert _storage(c.get_table("acid_db", "plain"))[0] == ORC[0]
        listed = {x.tableName: x for x in c.get_table_objects_by_name("acid_db", list(kinds))}
        assert {n: _storage(x)[0] for n, x in listed.items()} == {
            n: PLAIN_FORMAT if n in ACID else ORC[0] for n in kinds}
        declared = ht.ClientCapabilities([INSERT_ONLY_TABLES])
        for name in set(ACID) & set(kinds):
            stored = c.get_table_req(ht.GetTableRequest(
                dbName="acid_db", tblName=name, capabilities=declared)).table
            assert (stored.sd.inputFormat, stored.tableType) == (ORC[0], "MANAGED_TABLE")
            assert stored.parameters["comment"] == "altered by a Hive 2 client"
            if name.endswith("_part"):
                assert {p.sd.inputFormat for p in c.get_partitions("acid_db", name, -1)} == \
                    {ORC[0]}


def test_extension_mode_applies_the_rules_to_forwarded_tables(tmp_path):
    upstream = _server(tmp_path, "upstream", {})
    ext = _server(tmp_path, "ext", {"hms_txn.upstream.uris": upstream.uri,
                                    "hms_txn.upstream.retries": "1",
                                    "hms_txn.upstream.retry.delay": "50ms"})
    try:
        with ext.client() as c:
            _populate(c)               # created through extension mode, in the upstream
            for name in KINDS:         # our declared read goes through; so does the pool's
                assert c.get_table_acid_aware("acid_db", name).tableName == name
        _check_forwarded(ext.port, KINDS)
    finally:
        ext.stop()
        upstream.stop()


@pytest.mark.javahms
def test_extension_mode_in_front_of_the_java_metastore(tmp_path):
    """The Java metastore 2.3 hands full-ACID tables to everybody (it knows no insert-only
    tables: "unknown value insert_only for transactional_properties"); in front of it,
    hms-txn does not."""
    from hms_bench.javahms import start_java_metastore
    from tests.support.postgres import free_port
    port = free_port()
    java = start_java_metastore(port, str(tmp_path / "hms"))
    ext = _server(tmp_path, "ext", {"hms_txn.upstream.uris": f"thrift://127.0.0.1:{port}",
                                    "hms_txn.upstream.retries": "1"})
    try:
        with ext.client() as c:
            c.create_database(t.Database(name="acid_db", parameters={},
                                         locationUri=f"file:{tmp_path}/acid_db.db"))
            for name in JAVA_KINDS:
                table = _table(name)
                if "transactional" in KINDS[name]:      # Hive 2.3: ACID tables are bucketed
                    table.sd.bucketCols, table.sd.numBuckets = ["id"], 1
                c.create_table(table)
                if name.endswith("_part"):       # Hive 2.3 needs the partition's sd
                    c.add_partitions([t.Partition(values=["a"], dbName="acid_db", tableName=name,
                                                  sd=copy.deepcopy(table.sd), parameters={})])
        with hmsclient_mod.HMSClient(host="127.0.0.1", port=port) as direct:
            assert direct.get_table("acid_db", "full").tableName == "full"   # Hive 2.3 serves it
        _check_forwarded(ext.port, JAVA_KINDS)
    finally:
        ext.stop()
        java.stop()
