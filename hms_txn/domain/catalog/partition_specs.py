"""Partition specs (``PartitionSpec``): partitions grouped the way Hive's metastore answers
``get_partitions_pspec``, ``get_part_specs_by_filter`` and ``get_partitions_with_specs``,
and read back for ``add_partitions_pspec``; and the field projection of
``get_partitions_with_specs``.

A spec is either a ``partitionList`` (whole partitions) or a ``sharedSDPartitionSpec``: one
storage descriptor, at the table's location, shared by partitions that differ from it only
by their location, each partition then carrying its location relative to the table's
(``PartitionWithoutSD.relativePath``). Hive groups so (``MetaStoreServerUtils
.getPartitionspecsGroupedByStorageDescriptor``) for every partition under the table's
directory; ``get_partitions_pspec`` does it only when the table's parameter
``hive.hcatalog.partition.spec.grouping.enabled`` is true, and otherwise answers one list.
Documents are plain dicts with the Thrift field names.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Iterable

from hms_txn.common.errors import InvalidObject
from hms_txn.domain.model.catalog import Doc, is_true

GROUPING_PARAM = "hive.hcatalog.partition.spec.grouping.enabled"


def grouping_enabled(table: Doc) -> bool:
    return is_true((table.get("parameters") or {}).get(GROUPING_PARAM, "false"))


def _spec(table: Doc, **body: Any) -> Doc:
    return {"dbName": table["dbName"], "tableName": table["tableName"],
            "catName": table.get("catName") or "hive", **body}


def as_list(table: Doc, parts: list[Doc]) -> list[Doc]:
    """One ``partitionList`` spec rooted at the table's location (no spec for none)."""
    if not parts:
        return []
    return [_spec(table, rootPath=(table.get("sd") or {}).get("location"),
                  partitionList={"partitions": parts})]


def _sd_key(sd: Doc) -> str:
    rest = {k: v for k, v in sd.items() if k != "location"}
    return json.dumps(rest, sort_keys=True)


def grouped(table: Doc, parts: list[Doc]) -> list[Doc]:
    """Hive's grouping by storage descriptor (see the module docstring): one shared-SD spec
    per distinct descriptor among the partitions under the table's directory, then one
    list of the others (partitions elsewhere, or without a descriptor after projection)."""
    root = ((table.get("sd") or {}).get("location") or "").rstrip("/")
    shared: dict[str, tuple[Doc, list[Doc]]] = {}
    others: list[Doc] = []
    for part in parts:
        sd = part.get("sd")
        location = (sd or {}).get("location") or ""
        if not sd or not root or not location.startswith(root):
            others.append(part)
            continue
        key = _sd_key(sd)
        if key not in shared:
            common = copy.deepcopy(sd)
            common["location"] = root
            shared[key] = (common, [])
        shared[key][1].append({
            "values": part.get("values"), "createTime": part.get("createTime"),
            "lastAccessTime": part.get("lastAccessTime"),
            "relativePath": location[len(root):], "parameters": part.get("parameters"),
            **({"privileges": part["privileges"]} if part.get("privileges") else {})})
    specs = [_spec(table, rootPath=root, sharedSDPartitionSpec={"sd": sd, "partitions": group})
             for sd, group in shared.values()]
    return specs + as_list(table, others)


def for_pspec(table: Doc, parts: list[Doc]) -> list[Doc]:
    """What ``get_partitions_pspec`` and ``get_part_specs_by_filter`` answer."""
    return grouped(table, parts) if grouping_enabled(table) else as_list(table, parts)


def expand(spec: Doc) -> list[Doc]:
    """The partitions of a spec sent to ``add_partitions_pspec``: a shared descriptor is
    copied into each partition, at the root path plus the partition's relative path."""
    listed = (spec.get("partitionList") or {}).get("partitions")
    if listed is not None:
        return [dict(p) for p in listed]
    shared = spec.get("sharedSDPartitionSpec")
    if shared is None:
        raise InvalidObject("the partition spec has neither a partition list nor a shared "
                            "storage descriptor")
    sd = shared.get("sd") or {}
    root = (spec.get("rootPath") or sd.get("location") or "").rstrip("/")
    out = []
    for part in shared.get("partitions") or []:
        own = copy.deepcopy(sd)
        relative = part.get("relativePath")
        own["location"] = root + relative if relative else None
        out.append({"dbName": spec.get("dbName"), "tableName": spec.get("tableName"),
                    "values": part.get("values"), "createTime": part.get("createTime"),
                    "lastAccessTime": part.get("lastAccessTime"),
                    "parameters": part.get("parameters") or {}, "sd": own})
    return out


# ---------------------------------------------------------------- projection


def _like(pattern: str) -> re.Pattern:
    """A parameter-key pattern of GetProjectionsSpec: SQL LIKE (``%``, ``_``)."""
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.compile(f"^{regex}$", re.DOTALL)


def project(parts: Iterable[Doc], fields: list[str] | None, include: str | None,
            exclude: str | None) -> list[Doc]:
    """``get_partitions_with_specs``' projection: only the dotted ``fields`` (all when
    none; e.g. ``values``, ``sd.location``, ``parameters``), and of the parameters only the
    keys matching ``include`` and not ``exclude`` (SQL LIKE patterns)."""
    keep = _like(include) if include else None
    drop = _like(exclude) if exclude else None
    out = []
    for part in parts:
        doc = _select(part, fields) if fields else copy.deepcopy(part)
        params = doc.get("parameters")
        if params is not None and (keep or drop):
            doc["parameters"] = {k: v for k, v in params.items()
                                 if (keep is None or keep.match(k))
                                 and (drop is None or not drop.match(k))}
        out.append(doc)
    return out


# The fields of Partition (hive_metastore.thrift) a projection may name at the top.
PARTITION_FIELDS = frozenset({
    "values", "dbName", "tableName", "createTime", "lastAccessTime", "sd", "parameters",
    "privileges", "catName", "writeId", "isStatsCompliant", "colStats", "fileMetadata"})


def _select(doc: Doc, fields: list[str], top: bool = True) -> Doc:
    out: Doc = {}
    for path in fields:
        head, _, rest = path.partition(".")
        if top and head not in PARTITION_FIELDS:
            raise InvalidObject(f"Invalid field name {path} in the projection")
        if head not in doc:
            continue
        value = doc[head]
        if rest and isinstance(value, dict):
            inner = out.get(head) if isinstance(out.get(head), dict) else {}
            out[head] = {**inner, **_select(value, [rest], top=False)}
        else:
            out[head] = copy.deepcopy(value)
    return out
