"""Hive 4's capability model: the tables a Hive 4-style client gets, field by field.

Expected answers are derived by hand from Hive 4's metastore, not from our code:

* ``MetastoreDefaultTransformer.transform`` (standalone-metastore/metastore-server, Hive 4)
  decides ``accessType`` and ``requiredRead/WriteCapabilities`` per table type, transactional
  kind and processor capability (the branch of each expectation is named next to it);
* ``HMSHandler.getTableInternal`` runs it on ``get_table_req`` only when
  ``processorCapabilities`` is non-empty and lacks ``MANAGERAWMETADATA``, after the
  ``INSERT_ONLY_TABLES`` check of Hive 3 (``assertClientHasCapability``);
* ``HMSHandler.get_tables_ext`` answers nothing without processor capabilities, and copies
  ``accessType`` (requestedFields bit 1) and the required capabilities (bit 2) of each
  translated table (``convertTableToExtendedTable``).

The wire tests use the Hive 4 bindings pyiceberg ships (``hive_metastore``), so the
requests and answers are Hive 4's own IDL, not ours.
"""

from __future__ import annotations

import pytest
from hive_metastore import ttypes as h4
from pyiceberg.catalog.hive import _HiveClient

from hms_txn.domain.catalog import capabilities as caps
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t

NONE, RO, RW = 1, 2, 8        # hive_metastore.thrift ACCESSTYPE_NONE / READONLY / READWRITE
ACID_WRITES = ["HIVEFULLACIDWRITE", "HIVEMANAGESTATS", "HIVECACHEINVALIDATE", "CONNECTORWRITE"]
INSERT_ONLY_WRITES = ["HIVEMANAGEDINSERTWRITE", "HIVEMANAGESTATS", "HIVECACHEINVALIDATE",
                      "CONNECTORWRITE"]

# HiveServer2 4's hive.metastore.client.capabilities: everything
HS2 = ["EXTWRITE", "EXTREAD", "HIVEBUCKET2", "HIVEFULLACIDREAD", "HIVEFULLACIDWRITE",
       "HIVECACHEINVALIDATE", "HIVEMANAGESTATS", "HIVEMANAGEDINSERTWRITE",
       "HIVEMANAGEDINSERTREAD", "HIVESQL", "HIVEMQT", "HIVEONLYMQTWRITE"]
EXT = ["EXTREAD", "EXTWRITE"]                                  # an engine for external tables
READER = ["HIVEFULLACIDREAD", "HIVEMANAGEDINSERTREAD", "EXTREAD", "HIVESQL"]  # reads only
CONNECTOR = ["CONNECTORREAD"]

KINDS = {
    "full_acid": ("MANAGED_TABLE", {"transactional": "true"}, -1),
    "insert_only": ("MANAGED_TABLE", {"transactional": "true",
                                      "transactional_properties": "insert_only"}, -1),
    "managed": ("MANAGED_TABLE", {}, -1),
    "external": ("EXTERNAL_TABLE", {"EXTERNAL": "TRUE"}, -1),
    "external_bucketed": ("EXTERNAL_TABLE", {"EXTERNAL": "TRUE"}, 4),
    "view": ("VIRTUAL_VIEW", {}, -1),
    "mview": ("MATERIALIZED_VIEW", {}, -1),
}

# (kind, processor capabilities) -> (accessType, requiredRead, requiredWrite, numBuckets)
EXPECTED = {
    # MANAGED_TABLE, transactional=true, not insert_only ("FULL ACID MANAGED TABLE"):
    # HIVEFULLACIDWRITE|CONNECTORWRITE -> RW; HIVEFULLACIDREAD|CONNECTORREAD -> RO with
    # acidWriteList required; else NONE with [CONNECTORREAD, HIVEFULLACIDREAD] to read
    ("full_acid", "HS2"): (RW, None, None, -1),
    ("full_acid", "EXT"): (NONE, ["CONNECTORREAD", "HIVEFULLACIDREAD"], ACID_WRITES, -1),
    ("full_acid", "READER"): (RO, None, ACID_WRITES, -1),
    ("full_acid", "CONNECTOR"): (RO, None, ACID_WRITES, -1),
    # insert_only ("MICRO_MANAGED Tables"): the same with HIVEMANAGEDINSERT*, insertOnlyWriteList
    ("insert_only", "HS2"): (RW, None, None, -1),
    ("insert_only", "EXT"): (NONE, ["CONNECTORREAD", "HIVEMANAGEDINSERTREAD"],
                             INSERT_ONLY_WRITES, -1),
    ("insert_only", "READER"): (RO, None, INSERT_ONLY_WRITES, -1),
    ("insert_only", "CONNECTOR"): (RO, None, INSERT_ONLY_WRITES, -1),
    # non-ACID MANAGED table: RW for everybody
    ("managed", "HS2"): (RW, None, None, -1),
    ("managed", "EXT"): (RW, None, None, -1),
    ("managed", "READER"): (RW, None, None, -1),
    ("managed", "CONNECTOR"): (RW, None, None, -1),
    # EXTERNAL_TABLE unbucketed: EXTREAD+EXTWRITE -> RW; EXTREAD -> RO needing EXTWRITE;
    # else NONE needing EXTREAD / EXTWRITE
    ("external", "HS2"): (RW, None, None, -1),
    ("external", "EXT"): (RW, None, None, -1),
    ("external", "READER"): (RO, None, ["EXTWRITE"], -1),
    ("external", "CONNECTOR"): (NONE, ["EXTREAD"], ["EXTWRITE"], -1),
    # EXTERNAL_TABLE bucketed: HIVEBUCKET2 -> RW; else RO needing HIVEBUCKET2, and the
    # bucketing removed (numBuckets -1) unless ACCEPTS_UNMODIFIED_METADATA
    ("external_bucketed", "HS2"): (RW, None, None, 4),
    ("external_bucketed", "EXT"): (RO, None, ["HIVEBUCKET2"], -1),
    ("external_bucketed", "READER"): (RO, None, ["HIVEBUCKET2"], -1),
    ("external_bucketed", "CONNECTOR"): (RO, None, ["HIVEBUCKET2"], -1),
    # VIRTUAL_VIEW: HIVESQL|CONNECTORREAD -> RO; else NONE, the required reads being the
    # hint list it appends HIVESQL and CONNECTORREAD to afterwards
    ("view", "HS2"): (RO, None, None, -1),
    ("view", "EXT"): (NONE, ["HIVESQL", "CONNECTORREAD"], None, -1),
    ("view", "READER"): (RO, None, None, -1),
    ("view", "CONNECTOR"): (RO, None, None, -1),
    # MATERIALIZED_VIEW: (CONNECTORREAD|HIVEFULLACIDREAD) and HIVEMQT -> RO; else NONE
    ("mview", "HS2"): (RO, None, None, -1),
    ("mview", "EXT"): (NONE, ["CONNECTORREAD", "HIVEMQT"], None, -1),
    ("mview", "READER"): (NONE, ["CONNECTORREAD", "HIVEMQT"], None, -1),
    ("mview", "CONNECTOR"): (NONE, ["CONNECTORREAD", "HIVEMQT"], None, -1),
}
CAPS = {"HS2": HS2, "EXT": EXT, "READER": READER, "CONNECTOR": CONNECTOR}


def _doc(kind: str, name: str | None = None, params: dict | None = None) -> dict:
    ttype, base_params, buckets = KINDS[kind]
    return {"dbName": "caps", "tableName": name or kind, "tableType": ttype, "catName": "hive",
            "parameters": {**base_params, **(params or {})},
            "sd": {"cols": [{"name": "id", "type": "int"}], "numBuckets": buckets,
                   "bucketCols": ["id"] if buckets > 0 else []},
            "partitionKeys": []}


def _expected_doc(doc: dict, expected) -> dict:
    access, reads, writes, buckets = expected
    out = {**doc, "accessType": access, "sd": {**doc["sd"], "numBuckets": buckets}}
    if reads is not None:
        out["requiredReadCapabilities"] = reads
    if writes is not None:
        out["requiredWriteCapabilities"] = writes
    return out


@pytest.mark.parametrize("kind,caps_name", sorted(EXPECTED))
def test_transform_follows_hive4_default_transformer(kind, caps_name):
    doc = _doc(kind)
    before = _doc(kind)
    [got] = caps.transform([doc], CAPS[caps_name])
    assert got == _expected_doc(doc, EXPECTED[kind, caps_name])
    assert doc == before                     # the stored (cached) document is not touched


def test_one_call_narrows_the_capabilities_from_table_to_table():
    # transform() retainAll()s the request's list: after the full-ACID table (RO, keeps
    # getReads(acidList) = HIVEFULLACIDREAD) the insert-only table no longer sees
    # HIVEMANAGEDINSERTREAD, as in one Hive 4 get_tables_ext call.
    alone = caps.transform([_doc("insert_only")], READER)[0]
    assert alone["accessType"] == RO
    first, second = caps.transform([_doc("full_acid"), _doc("insert_only")], READER)
    assert first["accessType"] == RO
    assert second["accessType"] == NONE
    assert second["requiredReadCapabilities"] == ["CONNECTORREAD", "HIVEMANAGEDINSERTREAD"]


def test_table_capabilities_decide_when_the_table_names_them():
    # "WITH CAPABLITIES ON TABLE": OBJCAPABILITIES, spaces removed and upper-cased
    ext = _doc("external", params={"OBJCAPABILITIES": "extread, EXTWRITE"})
    assert caps.transform([ext], EXT)[0]["accessType"] == RW          # containsAll -> RW
    ro = caps.transform([ext], ["EXTREAD"])[0]                         # EXTREAD matches -> RO
    assert (ro["accessType"], ro["requiredWriteCapabilities"]) == (RO, ["EXTWRITE"])
    none = caps.transform([ext], CONNECTOR)[0]                         # no match -> NONE
    assert (none["accessType"], none["requiredReadCapabilities"],
            none["requiredWriteCapabilities"]) == (NONE, ["EXTREAD"], ["EXTWRITE"])

    acid = _doc("full_acid", params={
        "OBJCAPABILITIES": "HIVEFULLACIDREAD, hivefullacidwrite,HIVEMANAGESTATS"})
    ro = caps.transform([acid], READER)[0]     # HIVEFULLACIDREAD -> RO, writes still missing
    assert (ro["accessType"], ro["requiredWriteCapabilities"]) == (
        RO, ["HIVEFULLACIDWRITE", "HIVEMANAGESTATS"])
    none = caps.transform([acid], ["HIVEMANAGESTATS", "EXTREAD"])[0]   # diff() of each list
    assert (none["accessType"], none["requiredReadCapabilities"],
            none["requiredWriteCapabilities"]) == (NONE, ["HIVEFULLACIDREAD"],
                                                   ["HIVEFULLACIDWRITE"])


def test_other_catalogs_and_raw_metadata_are_not_translated():
    other = {**_doc("full_acid"), "catName": "spark"}
    assert caps.transform([other], CONNECTOR) == [other]
    assert not caps.translates(["HIVEFULLACIDREAD", "MANAGERAWMETADATA"])
    assert not caps.translates([]) and not caps.translates(None)
    assert caps.translates(["EXTREAD"])


def test_stored_form_drops_what_is_computed_per_client():
    doc = _expected_doc(_doc("full_acid"), EXPECTED["full_acid", "EXT"])
    assert caps.stored_form(doc) == _doc("full_acid")


# ------------------------------------------------------------------ over the wire, Hive 4 IDL

def _plain(value):
    """A Thrift struct of either IDL as nested dicts, for field-by-field comparison."""
    if hasattr(value, "thrift_spec"):
        return {k: _plain(v) for k, v in vars(value).items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _create(client, kind: str) -> None:
    ttype, params, buckets = KINDS[kind]
    sd = t.StorageDescriptor(
        cols=[t.FieldSchema("id", "int", "")], numBuckets=buckets,
        bucketCols=["id"] if buckets > 0 else [], sortCols=[], parameters={},
        inputFormat="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
        serdeInfo=t.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.orc.OrcSerde",
                              parameters={}))
    view = {"viewOriginalText": "SELECT 1", "viewExpandedText": "SELECT 1"} \
        if ttype.endswith("VIEW") else {}
    client.create_table(t.Table(tableName=kind, dbName="caps", owner="me", sd=sd,
                                tableType=ttype, parameters=dict(params), partitionKeys=[],
                                **view))


@pytest.fixture
def hive4(hms, client):
    """The database ``caps`` with a table of every kind; a Hive 4 client (pyiceberg's
    bindings) on the server."""
    client.create_database(t.Database(name="caps", parameters={}))
    for kind in KINDS:
        _create(client, kind)
    with _HiveClient(hms.uri) as h4client:
        yield h4client


def _raw(client, kind: str) -> dict:
    """The stored table, as our own (declaring, untranslated) client reads it."""
    return _plain(client.get_table_acid_aware("caps", kind))


@pytest.mark.parametrize("caps_name", sorted(CAPS))
def test_hive4_client_gets_each_table_as_hive4_gives_it(hive4, client, caps_name):
    for kind in KINDS:
        got = hive4.get_table_req(h4.GetTableRequest(
            dbName="caps", tblName=kind, processorCapabilities=CAPS[caps_name],
            capabilities=h4.ClientCapabilities([h4.ClientCapability.INSERT_ONLY_TABLES]),
            processorIdentifier="test")).table
        raw = _raw(client, kind)
        access, reads, writes, buckets = EXPECTED[kind, caps_name]
        expected = {**raw, "accessType": access, "requiredReadCapabilities": reads,
                    "requiredWriteCapabilities": writes,
                    "sd": {**raw["sd"], "numBuckets": buckets}}
        got = _plain(got)
        assert set(got) == set(expected)
        for field in expected:                      # field by field, for a readable failure
            assert got[field] == expected[field], (kind, caps_name, field)


def test_hive4_client_without_processor_capabilities_gets_the_stored_tables(hive4, client):
    # getTableInternal: no processor capabilities (or MANAGERAWMETADATA) -> no translation
    for processor in (None, [], ["HIVEFULLACIDREAD", "MANAGERAWMETADATA"]):
        for kind in KINDS:
            got = hive4.get_table_req(h4.GetTableRequest(
                dbName="caps", tblName=kind, processorCapabilities=processor,
                capabilities=h4.ClientCapabilities([h4.ClientCapability.INSERT_ONLY_TABLES])))
            assert _plain(got.table) == _raw(client, kind)
            assert got.table.accessType is None


def test_insert_only_tables_need_insert_only_tables_capability(hive4):
    # Hive 3/4 refuse the table here (HMSHandler.getTableInternal: isInsertOnlyTableParam ->
    # assertClientHasCapability(INSERT_ONLY_TABLES), before and whatever the processor
    # capabilities); hms-txn hands it in the plain form (domain/catalog/plain_form.py), with the
    # access type and required capabilities the transformer gives a client holding none
    got = hive4.get_table_req(h4.GetTableRequest(dbName="caps", tblName="insert_only",
                                                 processorCapabilities=HS2)).table
    assert (got.accessType, got.requiredReadCapabilities) == (
        1, ["CONNECTORREAD", "HIVEMANAGEDINSERTREAD"])
    assert (got.sd.inputFormat, got.sd.serdeInfo.serializationLib, got.tableType) == (
        "ACID.table.use.spark.hive_acid", "", "EXTERNAL_TABLE")
    # a full-ACID table goes to a client that declared processor capabilities (translated)
    got = hive4.get_table_req(h4.GetTableRequest(dbName="caps", tblName="full_acid",
                                                 processorCapabilities=READER)).table
    assert got.accessType == RO


def test_get_tables_ext_as_hive4(hive4):
    def ext(processor, fields=3, pattern="*", limit=None):
        return hive4.get_tables_ext(h4.GetTablesExtRequest(
            catalog="hive", database="caps", tableNamePattern=pattern, requestedFields=fields,
            limit=limit, processorCapabilities=processor, processorIdentifier="test"))

    # no processor capabilities, or MANAGERAWMETADATA: "Skipping translation", empty answer
    assert ext(None) == [] and ext([]) == [] and ext(["MANAGERAWMETADATA", "EXTREAD"]) == []
    for kind in KINDS:                          # one table per call: as get_table_req
        [info] = ext(HS2, pattern=kind)
        access, reads, writes, _ = EXPECTED[kind, "HS2"]
        assert (info.tblName, info.accessType, info.requiredReadCapabilities,
                info.requiredWriteCapabilities) == (kind, access, reads, writes)
    # one call for all: the list is narrowed from table to table (retainAll on the
    # request's list, see the unit test above). In name order full_acid (RW) leaves
    # [HIVEFULLACIDWRITE, HIVECACHEINVALIDATE, HIVEMANAGESTATS] (retainAll(acidWriteList)),
    # so the insert-only table and the views after it find no capability of theirs.
    every = [(e.tblName, e.accessType, e.requiredReadCapabilities,
              e.requiredWriteCapabilities) for e in ext(HS2)]
    assert every == [
        ("external", RW, None, None), ("external_bucketed", RW, None, None),
        ("full_acid", RW, None, None),
        ("insert_only", NONE, ["CONNECTORREAD", "HIVEMANAGEDINSERTREAD"], INSERT_ONLY_WRITES),
        ("managed", RW, None, None), ("mview", NONE, ["CONNECTORREAD", "HIVEMQT"], None),
        ("view", NONE, ["HIVESQL", "CONNECTORREAD"], None)]
    # requestedFields: ACCESS_TYPE (1) only, PROCESSOR_CAPABILITIES (2) only
    only_access = ext(EXT, fields=1, pattern="external*")
    assert [(e.tblName, e.accessType, e.requiredWriteCapabilities) for e in only_access] == [
        ("external", RW, None), ("external_bucketed", RO, None)]
    only_caps = ext(EXT, fields=2, pattern="external_bucketed")
    assert [(e.accessType, e.requiredWriteCapabilities) for e in only_caps] == [
        (None, ["HIVEBUCKET2"])]
    assert [e.tblName for e in ext(HS2, limit=2)] == ["external", "external_bucketed"]
    # one call narrows the list from table to table (see the unit test above); in name
    # order full_acid (RO for READER) comes before insert_only, which then gets NONE
    narrowed = {e.tblName: e.accessType for e in ext(READER, pattern="full_acid|insert_only")}
    assert narrowed == {"full_acid": RO, "insert_only": NONE}


def test_translated_fields_are_never_stored(hive4, client):
    # a Hive 4 client alters the table it got: accessType & co. are not kept
    got = hive4.get_table_req(h4.GetTableRequest(
        dbName="caps", tblName="external_bucketed", processorCapabilities=EXT)).table
    assert got.accessType == RO and got.sd.numBuckets == -1
    got.sd.numBuckets = 4
    got.parameters["touched"] = "yes"
    hive4.alter_table("caps", "external_bucketed", got)
    stored = client.get_table("caps", "external_bucketed")
    assert stored.parameters["touched"] == "yes"
    assert (stored.accessType, stored.requiredReadCapabilities,
            stored.requiredWriteCapabilities) == (None, None, None)
