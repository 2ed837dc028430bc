"""What Hive 2.3's deserializer must make of a message, checked on the JVM harness's
results (``jvm.run_harness``): every getter of the message class works and returns the
objects the event was about, reduced to the fields Hive 2.3's Thrift classes have.

A ``Case`` (``workload.Case``) carries the event's entry (type, message, row columns), the
Thrift struct of each object key of its message (``objects``) and the objects it is about
(``inputs``: ``database``, ``before``/``after``, ``table``, ``partitions``, ``partition``,
``function``, as wire documents or plain dicts).
"""

from __future__ import annotations

import json
from typing import Any

from hms_txn.wire.codec import object_json
from tests.support.hive_messages.workload import Case, project, wire_doc

# The event types Hive 2.3's EventMessage.EventType knows (and that Hive 4 still writes).
HIVE23_TYPES = frozenset({"CREATE_DATABASE", "DROP_DATABASE", "CREATE_TABLE", "ALTER_TABLE",
                          "DROP_TABLE", "ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION",
                          "INSERT", "CREATE_FUNCTION", "DROP_FUNCTION"})

# The input object behind each TJSON key of a message (Case.inputs).
OBJECT_INPUT = {"dbJson": "database", "dbObjBeforeJson": "before", "dbObjAfterJson": "after",
                "tableObjJson": "table", "tableObjBeforeJson": "before",
                "tableObjAfterJson": "after", "partitionListJson": "partitions",
                "partitionObjBeforeJson": "before", "partitionObjAfterJson": "after",
                "ptnObjJson": "partition", "partitionObjJson": "partition",
                "functionObjJson": "function", "colStatsJson": "stats"}


def harness_errors(node: Any, path: str = "") -> list[str]:
    """Every {"error": ...} the harness recorded under ``node``."""
    if isinstance(node, dict):
        if "error" in node:
            return [f"{path}: {node['error']} {node.get('cause', '')}"]
        return [e for k, v in node.items() for e in harness_errors(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [e for i, v in enumerate(node) for e in harness_errors(v, f"{path}[{i}]")]
    return []


def partition_key_names(table: dict) -> list[str]:
    return [k["name"] for k in table.get("partitionKeys") or []]


def control_input(case: Case) -> dict:
    """The input of ControlMessages (Hive 2.3's JSONMessageFactory builds the message): the
    same objects, as TJSON text."""
    m, i, t = case.entry.message, case.inputs, case.entry.event_type
    kinds = {"database": "Database", "table": "Table", "function": "Function",
             "before": "Partition" if t == "ALTER_PARTITION" else "Table",
             "after": "Partition" if t == "ALTER_PARTITION" else "Table"}
    c: dict = {"eventType": t}
    for key, kind in kinds.items():
        if i.get(key) is not None:
            c[key] = object_json(kind, i[key])
    if "partitions" in i:
        c["partitions"] = [object_json("Partition", p) for p in i["partitions"]]
    if t == "CREATE_TABLE":
        c["files"] = m["files"]
    if t == "ADD_PARTITION":
        c["partitionFiles"] = m["partitionFiles"]
    if t == "INSERT":          # Hive 2.3's builder takes names, not objects
        c.update(db=m["db"], table=m["table"], partKeyVals=m["partKeyVals"], files=m["files"])
    return c


def expected_getters(case: Case, known: dict, head: tuple[str, str, int] | None) -> dict:
    """What Hive 2.3's getters must return for ``case``: the objects it is about, reduced
    to the fields Hive 2.3's classes have (``known``, from the harness). ``head``: the
    (server, servicePrincipal, timestamp) of our message; None for Hive 2.3's own message,
    whose factory writes its own."""
    m, i, t = case.entry.message, case.inputs, case.entry.event_type

    def obj(kind, doc):
        return project(kind, wire_doc(kind, doc), known)

    out: dict[str, Any] = {"getEventType": t}
    if head is not None:
        out.update(getServer=head[0], getServicePrincipal=head[1], getTimestamp=head[2])
    if t in ("CREATE_DATABASE", "DROP_DATABASE"):
        out["getDB"] = i["database"]["name"]
    elif t == "CREATE_TABLE":
        out.update(getDB=i["table"]["dbName"], getTable=i["table"]["tableName"],
                   getTableObj=obj("Table", i["table"]), getFiles=m["files"])
    elif t == "ALTER_TABLE":
        out.update(getDB=i["before"]["dbName"], getTable=i["before"]["tableName"],
                   getTableObjBefore=obj("Table", i["before"]),
                   getTableObjAfter=obj("Table", i["after"]))
    elif t == "DROP_TABLE":
        out.update(getDB=i["table"]["dbName"], getTable=i["table"]["tableName"])
    elif t == "ADD_PARTITION":
        keys = partition_key_names(i["table"])
        out.update(getDB=i["table"]["dbName"], getTable=i["table"]["tableName"],
                   getTableObj=obj("Table", i["table"]),
                   getPartitionObjs=[obj("Partition", p) for p in i["partitions"]],
                   getPartitions=[dict(zip(keys, p["values"])) for p in i["partitions"]],
                   getPartitionFilesIter=[{"getPartitionName": pf["partitionName"],
                                           "getFiles": pf["files"], "_class": "PartitionFiles"}
                                          for pf in m["partitionFiles"]])
    elif t == "ALTER_PARTITION":
        out.update(getDB=i["table"]["dbName"], getTable=i["table"]["tableName"],
                   getTableObj=obj("Table", i["table"]),
                   getPtnObjBefore=obj("Partition", i["before"]),
                   getPtnObjAfter=obj("Partition", i["after"]),
                   getKeyValues=dict(zip(partition_key_names(i["table"]), i["before"]["values"])))
    elif t == "DROP_PARTITION":
        keys = partition_key_names(i["table"])
        out.update(getDB=i["table"]["dbName"], getTable=i["table"]["tableName"],
                   getTableObj=obj("Table", i["table"]),
                   getPartitions=[dict(zip(keys, p["values"])) for p in i["partitions"]])
    elif t == "INSERT":
        part = i.get("partition")
        out.update(getDB=i["table"]["dbName"], getTable=i["table"]["tableName"],
                   getFiles=m["files"],
                   getPartitionKeyValues=dict(zip(partition_key_names(i["table"]),
                                                  part["values"])) if part else {})
    elif t == "CREATE_FUNCTION":
        out.update(getDB=i["function"]["dbName"], getFunctionObj=obj("Function", i["function"]))
    elif t == "DROP_FUNCTION":
        out.update(getDB=i["function"]["dbName"], getFunctionName=i["function"]["functionName"])
    return out


def check_decoded(case: Case, result: dict, head: tuple[str, str, int] | None) -> None:
    """The harness's result for a message Hive 2.3 knows: dispatched to the typed class,
    every getter works and returns ``expected_getters``."""
    assert "failure" not in result, result.get("failure")
    assert result["known"] is True
    assert result["dispatch"] == result["messageClass"]     # getEventMessage agrees
    getters = result["getters"]
    assert harness_errors(getters) == []          # every getter of the message works
    expected = expected_getters(case, result["fields"], head)
    assert {k: getters[k] for k in expected} == expected
    if head is None:
        assert isinstance(getters["getTimestamp"], int)


def check_objects(case: Case, result: dict) -> None:
    """Every Thrift object of the message, read by TDeserializer(TJSONProtocol) into Hive
    2.3's classes (MessageBuilder.getTObj), equals the object it is about."""
    assert harness_errors(result["objects"]) == []
    known = result["fields"]
    for key, kind in case.objects.items():
        source = case.inputs[OBJECT_INPUT.get(key, "list")]
        got = result["objects"][key]
        if source is None:
            assert got is None
        elif isinstance(source, list):
            assert got == [project(kind, wire_doc(kind, d), known) for d in source]
        else:
            assert got == project(kind, wire_doc(kind, source), known)


def check_control(case: Case, result: dict) -> None:
    """The control: Hive 2.3's own message for the same objects passes the same checks
    (so they test the decoding, not our format), and its keys are a subset of ours."""
    check_decoded(case, result, None)
    assert set(json.loads(result["message"])) <= set(case.entry.message)
