"""The metastore features hms-txn keeps off, answered as Hive 4's metastore answers when
there is nothing of them: workload management, scheduled queries, change management, the
file-metadata cache, the schema registry, the property store.

Hive's answers with nothing stored: no active resource plan and an empty plan list; a poll
for scheduled queries with nothing due; ``cm_recycle`` doing nothing (change management is
off by default); file metadata "not supported" (ObjectStore's own answer); empty schema
searches. A call about an object (a resource plan, a scheduled query, a schema, a serde)
finds none: NoSuchObjectException with Hive's text. Creating one is refused with a
MetaException saying so: these need components hms-txn does not run (HiveServer2's
workload manager and LLAP, the scheduled-query executor's cron rules, Hive's property
managers), and a store that accepted them and did nothing would mislead. Each method's
answer is listed in docs/compatibility.md (``service.compat_notes``).
"""

from __future__ import annotations

from typing import Any

from thrift.Thrift import TApplicationException

from hms_txn.common.errors import InvalidOperation, NoSuchObject, Refused
from hms_txn.wire.thrift_gen.hive_metastore import ttypes as t


def java_text(obj: Any) -> str:
    """A Thrift struct as Hive's Java code prints it into messages (``toString``):
    ``ISchemaName(catName:hive, dbName:default, schemaName:s)``."""
    if obj is None:
        return "null"
    if not hasattr(obj, "thrift_spec"):
        return str(obj)
    fields = [f"{spec[2]}:{java_text(getattr(obj, spec[2]))}"
              for spec in obj.thrift_spec if spec is not None]
    return f"{type(obj).__name__}({', '.join(fields)})"


def _plan_name(request: Any) -> str | None:
    """The resource plan a workload-management request names (directly or in its trigger,
    pool or mapping)."""
    for holder in (request, getattr(request, "trigger", None), getattr(request, "pool", None),
                   getattr(request, "mapping", None)):
        name = getattr(holder, "resourcePlanName", None)
        if name is not None:
            return name
    return None


def _no_plan(request: Any) -> NoSuchObject:
    return NoSuchObject(f"There is no resource plan named: {_plan_name(request)}")


_NO_WM = ("hms-txn stores no workload management resource plans: HiveServer2's workload "
          "manager (with LLAP) is not supported")
_NO_SCHEDULES = ("hms-txn stores no scheduled queries: the scheduled-query executor is "
                 "not supported")
_NO_SCHEMAS = "hms-txn has no schema registry (ISchema, schema versions, SerDes)"


class FeaturesOff:
    """The calls of the features hms-txn keeps off (see the module docstring)."""

    # ---------------------------------------------------------------- workload management

    def create_resource_plan(self, request):
        raise Refused(_NO_WM)

    def get_active_resource_plan(self, request):
        return t.WMGetActiveResourcePlanResponse()

    def get_all_resource_plans(self, request):
        return t.WMGetAllResourcePlanResponse(resourcePlans=[])

    def get_resource_plan(self, request):
        raise _no_plan(request)

    def alter_resource_plan(self, request):
        raise _no_plan(request)

    def validate_resource_plan(self, request):
        raise _no_plan(request)

    def drop_resource_plan(self, request):
        raise _no_plan(request)

    def create_wm_trigger(self, request):
        raise _no_plan(request)

    def alter_wm_trigger(self, request):
        raise _no_plan(request)

    def drop_wm_trigger(self, request):
        raise _no_plan(request)

    def get_triggers_for_resourceplan(self, request):
        raise _no_plan(request)

    def create_wm_pool(self, request):
        raise _no_plan(request)

    def alter_wm_pool(self, request):
        raise _no_plan(request)

    def drop_wm_pool(self, request):
        raise _no_plan(request)

    def create_or_update_wm_mapping(self, request):
        raise _no_plan(request)

    def drop_wm_mapping(self, request):
        raise _no_plan(request)

    def create_or_drop_wm_trigger_to_pool_mapping(self, request):
        raise _no_plan(request)

    # ---------------------------------------------------------------- scheduled queries

    def scheduled_query_poll(self, request):
        return t.ScheduledQueryPollResponse()

    def scheduled_query_maintenance(self, request):
        if request.type == t.ScheduledQueryMaintenanceRequestType.CREATE:
            raise Refused(_NO_SCHEDULES)
        key = request.scheduledQuery.scheduleKey if request.scheduledQuery else None
        raise NoSuchObject(f"Scheduled query {java_text(key)} not found")

    def scheduled_query_progress(self, info):
        raise InvalidOperation(f"invalid executionId: {info.scheduledExecutionId}")

    def get_scheduled_query(self, scheduleKey):
        raise NoSuchObject(f"Scheduled query {java_text(scheduleKey)} not found")

    # ---------------------------------------------------------------- change management

    def cm_recycle(self, request):
        return t.CmRecycleResponse()

    # ---------------------------------------------------------------- file metadata

    def get_file_metadata_by_expr(self, req):
        return t.GetFileMetadataByExprResult(metadata={}, isSupported=False)

    def get_file_metadata(self, req):
        return t.GetFileMetadataResult(metadata={}, isSupported=False)

    def put_file_metadata(self, req):
        return t.PutFileMetadataResult()

    def clear_file_metadata(self, req):
        """Hive's handler calls ObjectStore.putFileMetadata, which throws
        UnsupportedOperationException, unchecked: the Java processor answers
        INTERNAL_ERROR (the Java metastore 2.3 does; test_catalog_differential)."""
        raise TApplicationException(TApplicationException.INTERNAL_ERROR,
                                    "Internal error processing clear_file_metadata")

    def cache_file_metadata(self, req):
        return t.CacheFileMetadataResult(isSupported=False)

    # ---------------------------------------------------------------- schema registry

    def create_ischema(self, schema):
        raise Refused(_NO_SCHEMAS)

    def alter_ischema(self, rqst):
        raise NoSuchObject(f"Could not find schema {java_text(rqst.name)}")

    def get_ischema(self, name):
        raise NoSuchObject(f"No schema named {java_text(name)} exists")

    def drop_ischema(self, name):
        raise NoSuchObject(f"No schema named {java_text(name)} exists")

    def add_schema_version(self, schemaVersion):
        raise NoSuchObject(f"No schema named {java_text(schemaVersion.schema)}")

    def get_schema_version(self, schemaVersion):
        raise NoSuchObject(f"No schema version {java_text(schemaVersion)}exists")

    def get_schema_latest_version(self, schemaName):
        raise NoSuchObject(f"No versions of schema {java_text(schemaName)}exist")

    def get_schema_all_versions(self, schemaName):
        raise NoSuchObject(f"No versions of schema {java_text(schemaName)}exist")

    def drop_schema_version(self, schemaVersion):
        raise NoSuchObject(f"No schema version {java_text(schemaVersion)}")

    def get_schemas_by_cols(self, rqst):
        return t.FindSchemasByColsResp(schemaVersions=[])

    def map_schema_version_to_serde(self, rqst):
        raise NoSuchObject(f"No schema version {java_text(rqst.schemaVersion)}")

    def set_schema_version_state(self, rqst):
        raise NoSuchObject(f"No schema version {java_text(rqst.schemaVersion)}")

    def add_serde(self, serde):
        raise Refused(_NO_SCHEMAS)

    def get_serde(self, rqst):
        raise NoSuchObject(f"No serde named {rqst.serdeName} exists")

    # ---------------------------------------------------------------- property store

    def get_properties(self, req):
        raise Refused(f"No property manager for namespace {req.nameSpace}: hms-txn has no "
                      "property store")

    def set_properties(self, req):
        raise Refused(f"No property manager for namespace {req.nameSpace}: hms-txn has no "
                      "property store")
