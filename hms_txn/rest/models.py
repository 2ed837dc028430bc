"""The Iceberg REST catalog's request and response bodies (the spec's
``rest-catalog-open-api.yaml`` schemas, as far as this server reads and writes them).

Requests are checked here for their shape (a malformed body is the spec's 400); what is
inside a schema, a partition spec, a requirement or an update is pyiceberg's to check, in
the service layer. Field names are the spec's (``metadata-location``, ``stage-create``...).
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Namespace = list[str]
Properties = dict[str, str]


class Body(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="allow")


class TableIdentifier(Body):
    namespace: Namespace
    name: str


class CreateNamespaceRequest(Body):
    namespace: Namespace
    properties: Properties = Field(default_factory=dict)


class UpdateNamespacePropertiesRequest(Body):
    removals: Optional[list[str]] = None
    updates: Optional[Properties] = None


class RenameTableRequest(Body):
    source: TableIdentifier
    destination: TableIdentifier


class CreateTableRequest(Body):
    name: str
    location: Optional[str] = None
    table_schema: dict[str, Any] = Field(alias="schema")
    partition_spec: Optional[dict[str, Any]] = Field(default=None, alias="partition-spec")
    write_order: Optional[dict[str, Any]] = Field(default=None, alias="write-order")
    stage_create: Optional[bool] = Field(default=None, alias="stage-create")
    properties: Optional[Properties] = None


class RegisterTableRequest(Body):
    name: str
    metadata_location: str = Field(alias="metadata-location")
    overwrite: bool = False


class TableRequirement(Body):
    type: str


class TableUpdate(Body):
    action: str


class CommitTableRequest(Body):
    identifier: Optional[TableIdentifier] = None
    requirements: list[TableRequirement]
    updates: list[TableUpdate]


class CommitTransactionRequest(Body):
    table_changes: list[CommitTableRequest] = Field(alias="table-changes")


class ReportMetricsRequest(Body):
    report_type: str = Field(alias="report-type")


# -- responses (for the OpenAPI document; handlers write the JSON themselves) ----------------

class ErrorModel(BaseModel):
    message: str
    type: str
    code: int = Field(ge=400, le=600)


class IcebergErrorResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: ErrorModel


class CatalogConfig(BaseModel):
    defaults: Properties
    overrides: Properties
    endpoints: Optional[list[str]] = None


class ListNamespacesResponse(BaseModel):
    namespaces: list[Namespace]
    next_page_token: Optional[str] = Field(default=None, alias="next-page-token")


class CreateNamespaceResponse(BaseModel):
    namespace: Namespace
    properties: Properties = Field(default_factory=dict)


class GetNamespaceResponse(BaseModel):
    namespace: Namespace
    properties: Optional[Properties] = None


class UpdateNamespacePropertiesResponse(BaseModel):
    updated: list[str]
    removed: list[str]
    missing: Optional[list[str]] = None


class ListTablesResponse(BaseModel):
    identifiers: list[TableIdentifier]
    next_page_token: Optional[str] = Field(default=None, alias="next-page-token")


class LoadTableResult(BaseModel):
    metadata_location: Optional[str] = Field(default=None, alias="metadata-location")
    metadata: dict[str, Any]
    config: Optional[Properties] = None


class CommitTableResponse(BaseModel):
    metadata_location: str = Field(alias="metadata-location")
    metadata: dict[str, Any]


SnapshotsMode = Literal["all", "refs"]
