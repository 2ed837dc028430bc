"""Iceberg tables and namespaces as the metastore stores them (what Iceberg's ``HiveCatalog``
writes, so its Thrift clients and the Iceberg REST catalog see one table).

An Iceberg table is an external metastore table whose parameters say ``table_type=ICEBERG``
and point at its current metadata file (``metadata_location``, and the one before it,
``previous_metadata_location``). The metadata file is the table's truth; the metastore row
mirrors what Hive and other Thrift readers look at: the columns of the current schema (as
Hive type strings), the location, the table properties, and the summary parameters Iceberg's
``HMSTablePropertyHelper`` sets (current schema, snapshot, partition spec and sort order as
JSON, snapshot count, basic statistics).

An Iceberg namespace is a database (one level only, as in Hive): its properties are the
database's parameters plus ``location`` (the location URI), ``comment`` (the description)
and the owner keys of Iceberg's ``HiveCatalog``.

Everything here works on plain JSON documents: the metadata file's JSON and the
metastore's table and database documents (no pyiceberg, no Thrift).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Iterable

from hms_txn.common.errors import InvalidInput
from hms_txn.domain.model.catalog import Doc, now_s

TABLE_TYPE = "table_type"
ICEBERG = "ICEBERG"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
EXTERNAL_TABLE = "EXTERNAL_TABLE"
VIRTUAL_VIEW = "VIRTUAL_VIEW"
# Iceberg's TableProperties / HiveCatalog keys mirrored into the metastore's parameters.
TABLE_OWNER = "hive.metastore.table.owner"
DB_OWNER = "hive.metastore.database.owner"
DB_OWNER_TYPE = "hive.metastore.database.owner-type"
# iceberg.hive.table-property-max-size's default: longer JSON summaries are left out.
MAX_PROPERTY_SIZE = 32672

_PRIMITIVES = {
    "boolean": "boolean", "int": "int", "long": "bigint", "float": "float",
    "double": "double", "date": "date", "time": "string", "timestamp": "timestamp",
    "timestamptz": "timestamp with local time zone", "string": "string", "uuid": "string",
    "binary": "binary",
}
_OWNER_TYPES = {"USER": 1, "ROLE": 2, "GROUP": 3}


def is_iceberg_table(doc: Doc) -> bool:
    """Whether a metastore table is an Iceberg table (not an Iceberg view, not Hive's)."""
    params = doc.get("parameters") or {}
    return (str(params.get(TABLE_TYPE, "")).upper() == ICEBERG
            and doc.get("tableType") != VIRTUAL_VIEW)


def metadata_location(doc: Doc) -> str | None:
    return (doc.get("parameters") or {}).get(METADATA_LOCATION)


# ------------------------------------------------------------------ columns

def hive_type(iceberg_type: Any) -> str:
    """The Hive type string of an Iceberg type (its JSON form), as Iceberg's
    ``HiveSchemaUtil`` writes it."""
    if isinstance(iceberg_type, str):
        found = _PRIMITIVES.get(iceberg_type)
        if found is not None:
            return found
        if iceberg_type.startswith("fixed["):
            return "binary"
        if iceberg_type.startswith("decimal("):
            return iceberg_type.replace(" ", "")
        raise InvalidInput(f"Iceberg type {iceberg_type!r} has no Hive column type")
    kind = iceberg_type.get("type") if isinstance(iceberg_type, dict) else None
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{hive_type(f['type'])}"
                                    for f in iceberg_type.get("fields") or []) + ">"
    if kind == "list":
        return f"array<{hive_type(iceberg_type['element'])}>"
    if kind == "map":
        return f"map<{hive_type(iceberg_type['key'])},{hive_type(iceberg_type['value'])}>"
    raise InvalidInput(f"not an Iceberg type: {iceberg_type!r}")


def current_schema(metadata: Doc) -> Doc:
    schema_id = metadata.get("current-schema-id")
    for schema in metadata.get("schemas") or []:
        if schema.get("schema-id") == schema_id:
            return schema
    if metadata.get("schema"):                      # format version 1
        return metadata["schema"]
    raise InvalidInput("table metadata has no current schema")


def storage_descriptor(metadata: Doc) -> Doc:
    """The storage descriptor Iceberg's HiveCatalog writes (Hive's engine off): the current
    schema's columns, the table location, Hadoop's generic formats."""
    cols = []
    for field in current_schema(metadata).get("fields") or []:
        col = {"name": field["name"], "type": hive_type(field["type"])}
        if field.get("doc"):
            col["comment"] = field["doc"]
        cols.append(col)
    return {"cols": cols, "location": metadata.get("location"),
            "inputFormat": "org.apache.hadoop.mapred.FileInputFormat",
            "outputFormat": "org.apache.hadoop.mapred.FileOutputFormat",
            "compressed": False, "numBuckets": 0,
            "serdeInfo": {"serializationLib": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                          "parameters": {}},
            "bucketCols": [], "sortCols": [], "parameters": {}}


# ------------------------------------------------------------------ parameters

def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _put_bounded(params: dict, key: str, value: str) -> None:
    if len(value) <= MAX_PROPERTY_SIZE:
        params[key] = value


def _current_snapshot(metadata: Doc) -> Doc | None:
    snapshot_id = metadata.get("current-snapshot-id")
    if snapshot_id in (None, -1):
        return None
    return next((s for s in metadata.get("snapshots") or []
                 if s.get("snapshot-id") == snapshot_id), None)


def _default_spec(metadata: Doc) -> Doc | None:
    spec_id = metadata.get("default-spec-id")
    return next((s for s in metadata.get("partition-specs") or []
                 if s.get("spec-id") == spec_id), None)


def _default_sort_order(metadata: Doc) -> Doc | None:
    order_id = metadata.get("default-sort-order-id")
    return next((o for o in metadata.get("sort-orders") or []
                 if o.get("order-id") == order_id), None)


def mirror_parameters(params: dict, metadata: Doc, new_location: str,
                      previous_location: str | None, removed: Iterable[str] = ()) -> dict:
    """The table parameters after a commit, as ``HMSTablePropertyHelper`` sets them: the
    table properties pushed in (those removed by the commit taken out), the pointers to the
    metadata files, the current schema/snapshot/spec/sort order summaries, the basic
    statistics of the current snapshot, and Hive's statistics marked as not maintained."""
    out = dict(params)
    for key in removed:
        out.pop(key, None)
    for key, value in (metadata.get("properties") or {}).items():
        if key != TABLE_OWNER:
            out[key] = str(value)
    if metadata.get("table-uuid"):
        out["uuid"] = metadata["table-uuid"]
    out[TABLE_TYPE] = ICEBERG
    out["EXTERNAL"] = "TRUE"
    out[METADATA_LOCATION] = new_location
    if previous_location:
        out[PREVIOUS_METADATA_LOCATION] = previous_location
    for key in ("current-schema", "current-snapshot-id", "current-snapshot-timestamp-ms",
                "current-snapshot-summary", "default-partition-spec", "default-sort-order",
                "storage_handler", "COLUMN_STATS_ACCURATE"):
        out.pop(key, None)
    _put_bounded(out, "current-schema", _compact(current_schema(metadata)))
    snapshot = _current_snapshot(metadata)
    if snapshot is not None:
        summary = snapshot.get("summary") or {}
        for source, target in (("total-data-files", "numFiles"), ("total-records", "numRows"),
                               ("total-files-size", "totalSize")):
            if summary.get(source) is not None:
                out[target] = str(summary[source])
        out["current-snapshot-id"] = str(snapshot["snapshot-id"])
        out["current-snapshot-timestamp-ms"] = str(snapshot.get("timestamp-ms"))
        _put_bounded(out, "current-snapshot-summary", _compact(summary))
    out["snapshot-count"] = str(len(metadata.get("snapshots") or []))
    spec = _default_spec(metadata)
    if spec and spec.get("fields"):
        _put_bounded(out, "default-partition-spec", _compact(spec))
    order = _default_sort_order(metadata)
    if order and order.get("fields"):
        _put_bounded(out, "default-sort-order", _compact(order))
    out["DO_NOT_UPDATE_STATS"] = "TRUE"
    return out


def new_table_doc(db: str, name: str, owner: str, metadata: Doc, location: str) -> Doc:
    """The metastore document of a new Iceberg table whose first metadata file is at
    ``location`` (Iceberg's ``HiveOperationsBase.newHmsTable``)."""
    now = now_s()
    owner = (metadata.get("properties") or {}).get(TABLE_OWNER) or owner
    return {"dbName": db, "tableName": name, "owner": owner, "ownerType": 1,
            "createTime": now, "lastAccessTime": now, "retention": 2147483647,
            "sd": storage_descriptor(metadata), "partitionKeys": [],
            "parameters": mirror_parameters({}, metadata, location, None),
            "tableType": EXTERNAL_TABLE}


def committed_table_doc(old: Doc, base: Doc | None, metadata: Doc, location: str) -> Doc:
    """The metastore document after a commit of ``metadata`` (written at ``location``) over
    ``base``, the metadata the committer started from: the columns and location follow the
    new metadata; parameters set by others than Iceberg stay."""
    doc = copy.deepcopy(old)
    base_props = set((base or {}).get("properties") or {})
    removed = base_props - set(metadata.get("properties") or {})
    doc["sd"] = storage_descriptor(metadata)
    doc["parameters"] = mirror_parameters(old.get("parameters") or {}, metadata, location,
                                          metadata_location(old), removed)
    return doc


# ------------------------------------------------------------------ namespaces

def namespace_properties(db: Doc) -> dict[str, str]:
    """A database as Iceberg's HiveCatalog shows a namespace's properties."""
    props = {k: str(v) for k, v in (db.get("parameters") or {}).items()}
    if db.get("locationUri"):
        props["location"] = db["locationUri"]
    if db.get("description"):
        props["comment"] = db["description"]
    if db.get("ownerName"):
        props[DB_OWNER] = db["ownerName"]
        kinds = {v: k for k, v in _OWNER_TYPES.items()}
        props[DB_OWNER_TYPE] = kinds.get(db.get("ownerType") or 1, "USER")
    return props


def database_doc(name: str, properties: dict[str, str], owner: str) -> Doc:
    """The database of a namespace created with ``properties`` (Iceberg's
    ``HiveCatalog.convertToDatabase``); its location defaults to the warehouse's."""
    doc: Doc = {"name": name, "parameters": {}, "ownerName": owner, "ownerType": 1}
    _apply_properties(doc, properties)
    return doc


def apply_namespace_changes(db: Doc, updates: dict[str, str],
                            removals: Iterable[str]) -> tuple[Doc, list[str], list[str], list[str]]:
    """(new database document, updated keys, removed keys, missing keys) of an update of a
    namespace's properties. ``location`` and the owner keys can be changed, not removed."""
    removals = list(dict.fromkeys(removals))
    overlap = sorted(set(updates) & set(removals))
    if overlap:
        raise InvalidInput(f"properties both updated and removed: {', '.join(overlap)}")
    fixed = sorted(set(removals) & {"location", DB_OWNER, DB_OWNER_TYPE})
    if fixed:
        raise InvalidInput(f"namespace properties {', '.join(fixed)} can be changed, "
                           f"not removed")
    doc = copy.deepcopy(db)
    current = namespace_properties(db)
    params = dict(doc.get("parameters") or {})
    removed, missing = [], []
    for key in removals:
        if key not in current:
            missing.append(key)
            continue
        removed.append(key)
        if key == "comment":
            doc.pop("description", None)
        else:
            params.pop(key, None)
    doc["parameters"] = params
    _apply_properties(doc, updates)
    return doc, sorted(updates), removed, missing


def _apply_properties(doc: Doc, properties: dict[str, str]) -> None:
    for key, value in properties.items():
        value = str(value)
        if key == "comment":
            doc["description"] = value
        elif key == "location":
            doc["locationUri"] = value
        elif key == DB_OWNER:
            doc["ownerName"] = value
        elif key == DB_OWNER_TYPE:
            if value.upper() not in _OWNER_TYPES:
                raise InvalidInput(f"{DB_OWNER_TYPE} is one of USER, ROLE, GROUP: {value!r}")
            doc["ownerType"] = _OWNER_TYPES[value.upper()]
        else:
            doc.setdefault("parameters", {})[key] = value
