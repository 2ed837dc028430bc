"""The notification events a running server writes, read the way Hive's and Impala's
readers read them (issue 35).

An everyday workload over Thrift (``tests/support/hive_messages/thrift_workload.py``:
every event type we write) against hms-txn in normal mode (json-0.2 and gzip(json-2.0))
and in extension mode in front of the real Java metastore 2.3; the events are fetched with
``get_next_notification`` and

* are the ones the workload's changes make, with Hive 4's row columns (DbNotificationListener);
* carry exactly the keys of Hive 4's ``JSON*Message`` class of their type, with its value
  types (``hive4_classes``, which cites the classes), and the values the workload implies;
* carry, as TJSON, exactly the objects the server answers for them (``get_table`` ...);
* decode inside the JVM with Hive 2.3's deserializer (PySpark's hive-metastore jar) where
  2.3 knows the type: every getter works and returns those objects, and every object
  decodes into Hive 2.3's Thrift classes; Hive 2.3's own JSONMessageFactory messages for
  the same objects pass the same checks (the control);
* are read by Impala's event processor as it reads them (``hive_messages.impala``),
  with ``get_all_write_event_info`` answering its COMMIT_TXN look-ups.

Also ``get_config_value`` as Hive 4 answers it, and the start-up check of Impala's event
processor (``MetastoreEventsProcessor.validateConfigs``, ``DefaultConfigValidator``).
"""

from __future__ import annotations

import os
import time

import pytest

from hms_txn.domain.events import event_messages as em
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t
from tests.support.hive_messages import jvm
from tests.support.hive_messages.hive23 import (HIVE23_TYPES, OBJECT_INPUT, check_control,
                                                 check_decoded, check_objects, control_input)
from tests.support.hive_messages.hive4_classes import HIVE4, check_message
from tests.support.hive_messages.impala import Deserializer, impala_reads
from tests.support.hive_messages.thrift_workload import run
from tests.support.hive_messages.workload import Case, read_tjson, wire_doc
from tests.support.postgres import free_port
from tests.support.servers import InProcessServer

GZIP_ENCODER = "org.apache.hadoop.hive.metastore.messaging.json.gzip.GzipJSONMessageEncoder"
# the compactor's worker, without the initiator (the workload asks for its compaction)
WORKER = {"hive.compactor.initiator.on": "false", "hive.compactor.cleaner.on": "false",
          "hive.compactor.worker.threads": "1", "hive.compactor.worker.sleep.time": "50ms"}


def _wait(predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _server(root: str, conf: dict) -> InProcessServer:
    return InProcessServer(os.path.join(root, "data"), {
        "javax.jdo.option.ConnectionURL": f"jdbc:sqlite:{root}/metastore.sqlite",
        "hive.metastore.warehouse.dir": os.path.join(root, "warehouse"), **conf})


class Served:
    """One mode's run: the server's events after the workload started, paired with what
    the workload expects, and its answers to get_all_write_event_info."""

    def __init__(self, mode: str, fmt: str, workload, events, write_infos):
        self.mode, self.format = mode, fmt
        self.run = workload
        self.events = events
        self.write_infos = write_infos

    def cases(self) -> list[Case]:
        """Each event as the message tests' ``Case``: our entry (the decoded message and
        the row's columns), its object keys and the objects it is about."""
        return [Case(f"{self.mode}#{i}:{e.eventType}",
                     em.LogEntry(e.eventType, em.formats.decode(e.message, e.messageFormat),
                                 e.dbName, e.tableName, e.catName),
                     x.objects, x.inputs)
                for i, (e, x) in enumerate(zip(self.events, self.run.expected))]


def _serve(mode: str, root: str) -> Served:
    upstream = None
    if mode == "extension":
        jvm.require_java()
        from hms_bench.javahms import start_java_metastore
        port = free_port()
        upstream = start_java_metastore(port, os.path.join(root, "hms"))
        conf = {"hms_txn.upstream.uris": f"thrift://127.0.0.1:{port}",
                "hms_txn.upstream.socket.timeout": "30s"}
    else:
        conf = dict(WORKER)
        if mode == "gzip":
            conf["hive.metastore.event.message.factory"] = GZIP_ENCODER
    server = _server(os.path.join(root, "hms-txn"), conf)
    try:
        with server.client() as c:
            done = run(c, os.path.join(root, "files"), extension=mode == "extension",
                       wait=_wait)
            events = c.get_next_notification(t.NotificationEventRequest(
                lastEvent=done.start)).events
            infos = {}
            for e in events:
                if e.eventType == "COMMIT_TXN":
                    txn = em.formats.decode(e.message, e.messageFormat)["txnid"]
                    infos[txn] = c.get_all_write_event_info(t.GetAllWriteEventInfoRequest(
                        txnId=txn))
    finally:
        server.stop()
        if upstream is not None:
            upstream.stop()
    fmt = "gzip(json-2.0)" if mode == "gzip" else "json-0.2"
    return Served(mode, fmt, done, events, infos)


@pytest.fixture(scope="module", params=[
    "normal", "gzip", pytest.param("extension", marks=pytest.mark.javahms)])
def served(request, tmp_path_factory) -> Served:
    return _serve(request.param, str(tmp_path_factory.mktemp(request.param)))


@pytest.fixture(scope="module")
def decoded(served, tmp_path_factory) -> dict[str, dict]:
    """Every event, and the control of every event Hive 2.3 knows, decoded in one JVM."""
    classes = jvm.compile_harness(str(tmp_path_factory.mktemp("harness")))
    lines = []
    for case, event in zip(served.cases(), served.events):
        lines.append({"id": case.id, "eventType": event.eventType,
                      "messageFormat": event.messageFormat, "message": event.message,
                      "objects": case.objects})
        if event.eventType in HIVE23_TYPES:
            lines.append({"id": f"{case.id}@control", "control": control_input(case),
                          "objects": case.objects})
    return jvm.run_harness(classes, lines)


def test_the_workloads_events_with_hives_row_columns(served):
    got = [(e.eventType, e.dbName, e.tableName, e.catName, e.messageFormat)
           for e in served.events]
    assert got == [(x.event_type, x.db, x.table, x.cat, served.format)
                   for x in served.run.expected]
    ids = [e.eventId for e in served.events]
    assert ids == list(range(served.run.start + 1, served.run.start + 1 + len(ids)))


def test_keys_and_values_are_those_of_hive4s_message_classes(served):
    for case, expected in zip(served.cases(), served.run.expected):
        message = case.entry.message
        check_message(case.entry.event_type, message, (em.ALTERED_TABLES_KEY,))
        assert {k: message.get(k) for k in expected.checks} == expected.checks, case.id
        assert (message["server"], message["servicePrincipal"]) == ("", ""), case.id
        assert abs(message["timestamp"] - time.time()) < 3600, case.id    # seconds


def test_objects_are_those_the_server_answers(served):
    """Every TJSON key reads back (MessageBuilder.getTObj, here with the Python Thrift
    library) as the object the server answers for it."""
    for case in served.cases():
        _cls, fields = HIVE4[case.entry.event_type]
        for key, jtype in fields:
            value = case.entry.message.get(key)
            if "tjson" not in jtype or value is None:
                continue
            kind = jtype.strip("[]").split(":")[1]
            source = case.inputs[OBJECT_INPUT[key]]
            if jtype.startswith("["):
                assert [read_tjson(kind, v) for v in value] == \
                    [wire_doc(kind, d) for d in source], (case.id, key)
            else:
                assert read_tjson(kind, value) == wire_doc(kind, source), (case.id, key)
            assert key in case.objects, (case.id, key)


def test_hive23_decodes_every_event_it_knows(served, decoded):
    """Hive 2.3's deserializer on each event (a gzip one gunzipped first, as Hive 4's gzip
    DeSerializer does): every getter works and returns the workload's objects; the types
    2.3 does not know are refused by its getEventMessage, as for Hive's own messages."""
    for case in served.cases():
        result = decoded[case.id]
        if case.entry.event_type in HIVE23_TYPES:
            message = case.entry.message
            check_decoded(case, result, ("", "", message["timestamp"]))
            check_objects(case, result)
        else:
            assert result["known"] is False and "No enum constant" in result["dispatch"]["error"]


def test_control_hive23s_own_messages_pass_the_same_checks(served, decoded):
    known = [c for c in served.cases() if c.entry.event_type in HIVE23_TYPES]
    assert {c.entry.event_type for c in known} >= {"CREATE_TABLE", "ADD_PARTITION", "INSERT"}
    for case in known:
        check_control(case, decoded[f"{case.id}@control"])


def test_impala_reads_every_event(served):
    """catalogd's reading of each event, with its own deserializer configured for the
    server's format and the server answering get_all_write_event_info."""
    de = Deserializer(served.format)
    writes = {txn: [{"writeId": i.writeId, "tableObj": i.tableObj, "partitionObj": i.partitionObj}
                    for i in infos] for txn, infos in served.write_infos.items()}
    for case, event in zip(served.cases(), served.events):
        row = {"eventType": event.eventType, "catName": event.catName, "dbName": event.dbName,
               "tableName": event.tableName, "messageFormat": event.messageFormat,
               "message": event.message}
        seen = impala_reads(row, de, lambda txn: writes[txn])
        i, etype = case.inputs, event.eventType

        def w(kind, key):
            return wire_doc(kind, i[key])

        if etype in ("CREATE_DATABASE", "DROP_DATABASE"):
            assert seen["database"] == w("Database", "database")
        elif etype == "ALTER_DATABASE":
            assert seen["database"] == w("Database", "after")
        elif etype in ("CREATE_TABLE", "DROP_TABLE"):
            assert seen["msTbl"] == w("Table", "table")
        elif etype == "ALTER_TABLE":
            assert (seen["before"], seen["after"]) == (w("Table", "before"), w("Table", "after"))
        elif etype == "ADD_PARTITION":
            assert seen["partitions"] == [wire_doc("Partition", p) for p in i["partitions"]]
        elif etype == "ALTER_PARTITION":
            assert (seen["before"], seen["after"], seen["msTbl"]) == (
                w("Partition", "before"), w("Partition", "after"), w("Table", "table"))
        elif etype == "DROP_PARTITION":
            assert seen["dropped"] == case.entry.message["partitions"]
        elif etype == "INSERT":
            assert (seen["msTbl"], seen["partition"]) == (w("Table", "table"),
                                                          w("Partition", "partition"))
        elif etype == "COMMIT_TXN":
            recorded = served.run.writes.get(seen["txnId"], [])
            assert seen["writes"] == [(wid, wire_doc("Table", tbl), part and wire_doc(
                "Partition", part)) for wid, tbl, part, _files in recorded], case.id
            assert [info.files for info in served.write_infos[seen["txnId"]]] == \
                [files for *_rest, files in recorded]
        elif etype in ("OPEN_TXN", "CREATE_FUNCTION", "DROP_FUNCTION"):
            assert seen == {"ignored": True}
        if not seen.get("ignored"):
            assert not seen["filtered"], case.id


# ------------------------------------------------------------------ get_config_value


def test_get_config_value_answers_as_hive4(client):
    """HMSHandler.get_config_value: the allow-list (hive|hdfs|mapred|metastore).* with
    ConfigValSecurityException, Hive's defaults for the keys clients ask, the caller's
    default for a key nobody set, and the caller's default for no name."""
    get = client.get_config_value
    assert get("metastore.catalog.default", "") == "hive"
    assert get("hive.metastore.dml.events", "") == "true"
    assert get("hive.metastore.event.message.factory", "") == \
        "org.apache.hadoop.hive.metastore.messaging.json.JSONMessageEncoder"
    assert get("metastore.max.event.response", "") == "1000000"
    assert get("hive.metastore.try.direct.sql", "") == "true"
    assert get("hive.unknown.key", "fallback") == "fallback"
    for name in ("javax.jdo.option.ConnectionPassword", "fs.defaultFS", " hive.x", "Hive.x"):
        with pytest.raises(t.ConfigValSecurityException) as err:
            get(name, "")
        assert err.value.message == \
            f"For security reasons, the config key {name} cannot be accessed"


def test_impala_event_processor_start_up_check_passes(client):
    """MetastoreEventsProcessor.validateConfigs (impala.md section 1): each key's value
    through DefaultConfigValidator (equalsIgnoreCase) must be the expected one; blank is
    "unavailable in Hive Metastore"."""
    expected = {"hive.metastore.dml.events": "true", "metastore.catalog.default": "hive"}
    failures = [key for key, want in expected.items()
                if client.get_config_value(key, "").strip().lower() != want]
    assert failures == []
