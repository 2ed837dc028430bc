"""ACID tables and clients that have not declared they understand them (issue 33).

The PyPI clients ``hmsclient`` (Hive 2.3 IDL: ``get_table``, ``get_table_req`` with Hive 3's
``ClientCapabilities`` only) and ``pymetastore`` (plain ``get_table``) stand for every Hive 2
client. Rules (``hms_txn.domain.capabilities``): an insert-only table needs
``INSERT_ONLY_TABLES`` on every call (Hive 3/4, HMSHandler.getTableInternal and
getTableObjectsInternal); a full-ACID table needs some declared capability on ``get_table``
and ``get_table_req`` (ours; Hive serves it); names, columns (``get_fields``,
``get_schema``) and partitions stay readable. ``hive.metastore.client.capability.check``
false gives today's answers. Extension mode applies the same rules to the upstream's tables.
"""

from __future__ import annotations

import copy
import os

import pyarrow as pa
import pytest
from hmsclient import hmsclient as hmsclient_mod
from hmsclient.genthrift.hive_metastore import ttypes as ht
from pymetastore.hive_metastore import ttypes as pt
from pymetastore.metastore import HMS
from thrift.Thrift import TApplicationException

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
REFUSED = {"full": "a full-ACID transactional table", "full_part": "a full-ACID transactional table",
           "io": "an insert-only transactional table", "io_part": "an insert-only transactional table"}


def _table(name: str, db: str = "acid_db") -> t.Table:
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("id", "int", ""), t.FieldSchema("name", "string", "")],
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=t.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                              parameters={}),
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


def _message(name: str, db: str = "acid_db") -> str:
    return f"{db}.{name} is {REFUSED[name]}"


@pytest.fixture
def populated(hms, client):
    _populate(client)
    return hms


def test_hmsclient_gets_no_acid_table_but_its_names_columns_and_partitions(populated):
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=populated.port) as c:
        for name in REFUSED:
            with pytest.raises(ht.MetaException) as err:
                c.get_table("acid_db", name)
            message = err.value.message
            assert _message(name) in message
            assert 'spark.read.format("hive_acid").load("acid_db.' + name + '")' in message
            assert "metastore.client.capability.check" in message
            # get_table_req without capabilities: the same
            with pytest.raises(ht.MetaException, match=_message(name)):
                c.get_table_req(ht.GetTableRequest(dbName="acid_db", tblName=name))
            # declaring Hive 3's INSERT_ONLY_TABLES is enough for both kinds
            got = c.get_table_req(ht.GetTableRequest(
                dbName="acid_db", tblName=name,
                capabilities=ht.ClientCapabilities([INSERT_ONLY_TABLES]))).table
            assert got.tableName == name and got.parameters["transactional"] == "true"
            # metadata that does not let anybody read the data: names, columns, partitions
            assert [f.name for f in c.get_fields("acid_db", name)] == ["id", "name"]
            assert [f.name for f in c.get_schema("acid_db", name)][:2] == ["id", "name"]
        assert c.get_all_tables("acid_db") == sorted(KINDS)
        assert c.get_tables("acid_db", "full*") == ["full", "full_part"]
        assert c.get_partition_names("acid_db", "io_part", -1) == ["p=a"]
        assert c.get_table("acid_db", "plain").tableName == "plain"
        # the listing call: full-ACID tables are listed, insert-only ones refused (as Hive)
        listed = c.get_table_objects_by_name("acid_db", ["plain", "full", "full_part"])
        assert sorted(x.tableName for x in listed) == ["full", "full_part", "plain"]
        with pytest.raises(TApplicationException, match=_message("io")):
            c.get_table_objects_by_name("acid_db", ["plain", "io"])
        listed = c.get_table_objects_by_name_req(ht.GetTablesRequest(
            dbName="acid_db", tblNames=sorted(KINDS),
            capabilities=ht.ClientCapabilities([INSERT_ONLY_TABLES]))).tables
        assert len(listed) == len(KINDS)


def test_pymetastore_gets_no_acid_table(populated):
    with HMS.create(host="127.0.0.1", port=populated.port) as hms:
        assert hms.list_tables("acid_db") == sorted(KINDS)
        assert hms.list_partitions("acid_db", "full_part") == ["p=a"]
        for name in REFUSED:
            with pytest.raises(pt.MetaException, match=_message(name)):
                hms.get_table("acid_db", name)
            with pytest.raises(pt.MetaException, match=_message(name)):
                hms.list_columns("acid_db", name)       # it reads the table object
        assert hms.get_table("acid_db", "plain").name == "plain"


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


def test_hive2_clients_leave_acid_tables_and_their_rows_as_they_were(populated, client):
    """Every table call hmsclient and pymetastore make on ACID tables holding rows is refused
    before the client learns where the files are; afterwards the files, the table and its
    partitions, the notification log and the rows an ACID reader sees are as before."""
    from tests.hms_txn.test_catalog import local
    locations = {}
    for name in REFUSED:
        table = client.get_table_acid_aware("acid_db", name)
        locations[name] = local(client.get_partition("acid_db", name, ["a"]).sd.location
                                if table.partitionKeys else table.sd.location)
        _write_rows(client, name, locations[name], [1, 2, 3])

    def state():
        return {name: (_files(loc), _acid_rows(client, name, loc),
                       client.get_table_acid_aware("acid_db", name),
                       client.get_partitions("acid_db", name, -1))
                for name, loc in locations.items()}

    before, event = state(), client.get_current_notificationEventId().eventId
    assert all(rows == [1, 2, 3] for _, rows, _, _ in before.values())
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=populated.port) as c, \
            HMS.create(host="127.0.0.1", port=populated.port) as p:
        for name in REFUSED:
            for call in (lambda: c.get_table("acid_db", name),
                         lambda: c.get_table_req(ht.GetTableRequest(dbName="acid_db",
                                                                    tblName=name)),
                         lambda: p.get_table("acid_db", name),
                         lambda: p.list_columns("acid_db", name)):
                with pytest.raises((ht.MetaException, pt.MetaException), match=_message(name)):
                    call()
    assert state() == before
    assert client.get_current_notificationEventId().eventId == event


def test_our_clients_declare_and_get_every_table(populated, client):
    for name in KINDS:
        assert client.get_table_acid_aware("acid_db", name).tableName == name
    assert client.get_table_req(t.GetTableRequest(
        dbName="acid_db", tblName="full", processorCapabilities=["HIVEFULLACIDREAD"])).table \
        .accessType == 2          # Hive 4's translation (test_capabilities), not refused


def test_check_off_gives_todays_answers(hms_factory):
    hms = hms_factory({"metastore.client.capability.check": "false"})   # Hive's own key name
    with hms.client() as ours:
        _populate(ours)
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=hms.port) as c:
        for name in KINDS:
            assert c.get_table("acid_db", name).tableName == name
        assert len(c.get_table_objects_by_name("acid_db", sorted(KINDS))) == len(KINDS)
    with HMS.create(host="127.0.0.1", port=hms.port) as p:
        assert p.list_columns("acid_db", "io") == ["id", "name"]


# ---------------------------------------------------------------- extension mode

def _server(root, name: str, conf: dict) -> InProcessServer:
    base = os.path.join(str(root), name)
    return InProcessServer(os.path.join(base, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{base}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(base, "warehouse"), **conf})


def _check_forwarded(ext_port: int, kinds) -> None:
    """The extension-mode server refuses the upstream's ACID tables as its own."""
    with hmsclient_mod.HMSClient(host="127.0.0.1", port=ext_port) as c:
        for name in set(REFUSED) & set(kinds):
            with pytest.raises(ht.MetaException, match=_message(name)):
                c.get_table("acid_db", name)
            assert [f.name for f in c.get_fields("acid_db", name)] == ["id", "name"]
        assert c.get_table("acid_db", "plain").tableName == "plain"
        assert sorted(x.tableName for x in c.get_table_objects_by_name(
            "acid_db", ["full", "plain"])) == ["full", "plain"]
        if "io" in kinds:
            with pytest.raises(TApplicationException, match=_message("io")):
                c.get_table_objects_by_name("acid_db", ["io"])


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
