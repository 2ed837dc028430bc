"""The Iceberg REST catalog as an ASGI application (FastAPI): the spec's routes over the
services of ``hms_txn.service.iceberg``, under ``/<path>/v1`` with or without the
catalog's prefix.

``GET /v1/config`` names the prefix (``overrides.prefix``: the metastore's catalog, ``hive``)
and the endpoints served; ``?warehouse=`` is accepted and ignored (DuckDB always sends it:
this server has one catalog). Routes answer under ``/v1/<prefix>/...`` and, for clients
that send no prefix, ``/v1/...``; another prefix is a 400. The ``X-Iceberg-Access-Delegation``
header is accepted and ignored: tables are read with the client's own storage credentials,
none are vended.

Every failure leaves as the spec's error body (``rest.errors``); request bodies that do not
have the spec's shape are 400s, not FastAPI's 422.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Optional

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from hms_txn.rest import models as m
from hms_txn.rest.auth import Authenticator
from hms_txn.rest.errors import (DROP_NAMESPACE, NAMESPACE, TABLE, ErrorContext, IcebergError,
                                 error_body, translate)
from hms_txn.service.iceberg.iceberg_catalog import (IcebergNamespaces, IcebergTables, database_of,
                                                     referenced_only)
from hms_txn.service.iceberg.iceberg_commits import Change, Committed, IcebergCommits

log = logging.getLogger("hms_txn.rest")
SEPARATOR = "\x1f"
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}", "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename", "POST /v1/{prefix}/transactions/commit",
]


@dataclass
class CatalogServices:
    """What the REST catalog serves: the Iceberg services over one metastore."""
    namespaces: IcebergNamespaces
    tables: IcebergTables
    commits: IcebergCommits
    name: str = "hive"


def _errors(description: str, *codes: int) -> dict[int, dict]:
    return {code: {"model": m.IcebergErrorResponse, "description": description}
            for code in codes}


COMMON = {**_errors("The spec's error", 400, 401, 403, 419, 503),
          500: {"model": m.IcebergErrorResponse, "description": "Server error"}}
NoBody = {"description": "Success, no content"}


def json_response(content: Any, status: int = 200) -> Response:
    return Response(json.dumps(content).encode(), status, media_type="application/json")


def table_response(done: Committed, *, with_config: bool = True,
                   refs_only: bool = False) -> Response:
    """LoadTableResult / CommitTableResponse with the metadata file's own bytes."""
    raw = referenced_only(done.file) if refs_only else done.file.raw
    parts = [b'{"metadata-location":', json.dumps(done.location).encode(), b',"metadata":', raw]
    if with_config:
        parts.append(b',"config":{}')
    parts.append(b"}")
    return Response(b"".join(parts), 200, media_type="application/json")


def namespace_of(text: str) -> list[str]:
    return text.split(SEPARATOR)


def paginate(names: list[str], token: Optional[str], size: Optional[int]) -> tuple[list, Any]:
    """The spec's paging: everything when no pageToken was sent; else the names after the
    token (the last name of the previous page), ``pageSize`` of them."""
    if token is None:
        return names, None
    rest = [n for n in names if n > token] if token else names
    if size is None or len(rest) <= size:
        return rest, None
    return rest[:size], rest[size - 1]


def current_user(request: Request) -> str:
    """Who is calling (``rest.auth``; a 401 when the check refuses the request)."""
    return request.app.state.authenticate(request.headers)


# Parameters of the routes (module-level: FastAPI resolves the annotations here).
User = Annotated[str, Depends(current_user)]
Delegation = Annotated[Optional[str], Header(alias="X-Iceberg-Access-Delegation")]
Ns = Annotated[str, Path(description="namespace levels separated by %1F")]
Tbl = Annotated[str, Path()]
PageToken = Annotated[Optional[str], Query(alias="pageToken")]
PageSize = Annotated[Optional[int], Query(alias="pageSize", ge=1)]
Purge = Annotated[bool, Query(alias="purgeRequested")]


def served(context: ErrorContext) -> Callable:
    """A handler whose failures are translated to the spec's errors."""
    def wrap(handler: Callable) -> Callable:
        @functools.wraps(handler)
        def run(*args, **kwargs):
            try:
                return handler(*args, **kwargs)
            except Exception as err:
                raise translate(err, context) from None
        return run
    return wrap


def build_app(services: CatalogServices, authenticate: Authenticator, path: str) -> FastAPI:
    base = "/" + path.strip("/") + "/v1" if path.strip("/") else "/v1"
    app = FastAPI(title="hms-txn Iceberg REST catalog", version="1",
                  openapi_url=f"{base}/openapi.json", docs_url=None, redoc_url=None)

    app.state.authenticate = authenticate
    app.state.services = services
    router = APIRouter()
    nss, tables, commits = services.namespaces, services.tables, services.commits

    @app.exception_handler(IcebergError)
    def iceberg_error(_request: Request, err: IcebergError) -> Response:
        return Response(err.body(), err.code, media_type="application/json")

    @app.exception_handler(RequestValidationError)
    def bad_request(_request: Request, err: RequestValidationError) -> Response:
        detail = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}"
                           for e in err.errors()[:5])
        return Response(error_body(400, "BadRequestException", f"Malformed request: {detail}"),
                        400, media_type="application/json")

    @app.exception_handler(StarletteHTTPException)
    def http_error(_request: Request, err: StarletteHTTPException) -> Response:
        kind = {404: "NoSuchRouteException", 405: "MethodNotAllowed"}.get(
            err.status_code, "BadRequestException")
        return Response(error_body(err.status_code, kind, str(err.detail)), err.status_code,
                        media_type="application/json", headers=getattr(err, "headers", None))

    @app.get(f"{base}/config", response_model=m.CatalogConfig, responses=COMMON,
             operation_id="getConfig")
    def get_config(_user: User, warehouse: Optional[str] = None) -> Response:
        if warehouse is not None:
            log.debug("config: warehouse %r accepted and ignored (one catalog: %s)", warehouse,
                      services.name)
        return json_response({"defaults": {}, "overrides": {"prefix": services.name},
                              "endpoints": ENDPOINTS})

    # -- namespaces ---------------------------------------------------------------------

    @router.get("/namespaces", response_model=m.ListNamespacesResponse,
                responses={**COMMON, **_errors("Not Found", 404)}, operation_id="listNamespaces")
    @served(NAMESPACE)
    def list_namespaces(_user: User, page_token: PageToken = None, page_size: PageSize = None,
                        parent: Optional[str] = None) -> Response:
        names, token = paginate(nss.list(namespace_of(parent) if parent else None),
                                page_token, page_size)
        return json_response({"namespaces": [[n] for n in names], "next-page-token": token})

    @router.post("/namespaces", response_model=m.CreateNamespaceResponse,
                 responses={**COMMON, **_errors("Conflict", 406, 409)},
                 operation_id="createNamespace")
    @served(NAMESPACE)
    def create_namespace(body: m.CreateNamespaceRequest, who: User) -> Response:
        props = nss.create(body.namespace, body.properties, who)
        return json_response({"namespace": [body.namespace[0].lower()], "properties": props})

    @router.get("/namespaces/{namespace}", response_model=m.GetNamespaceResponse,
                responses={**COMMON, **_errors("Not Found", 404)},
                operation_id="loadNamespaceMetadata")
    @served(NAMESPACE)
    def load_namespace(namespace: Ns, _user: User) -> Response:
        levels = namespace_of(namespace)
        props = nss.load(levels)
        return json_response({"namespace": [levels[0].lower()], "properties": props})

    @router.head("/namespaces/{namespace}", status_code=204,
                 responses={204: NoBody, **COMMON, **_errors("Not Found", 404)},
                 operation_id="namespaceExists")
    @served(NAMESPACE)
    def namespace_exists(namespace: Ns, _user: User) -> Response:
        nss.load(namespace_of(namespace))
        return Response(status_code=204)

    @router.delete("/namespaces/{namespace}", status_code=204,
                   responses={204: NoBody, **COMMON, **_errors("Not Found, Not Empty", 404, 409)},
                   operation_id="dropNamespace")
    @served(DROP_NAMESPACE)
    def drop_namespace(namespace: Ns, _user: User) -> Response:
        nss.drop(namespace_of(namespace))
        return Response(status_code=204)

    @router.post("/namespaces/{namespace}/properties",
                 response_model=m.UpdateNamespacePropertiesResponse,
                 responses={**COMMON, **_errors("Not Found, Unprocessable", 404, 406, 422)},
                 operation_id="updateProperties")
    @served(NAMESPACE)
    def update_properties(namespace: Ns, body: m.UpdateNamespacePropertiesRequest,
                          _user: User) -> Response:
        removals, updates = body.removals or [], body.updates or {}
        overlap = sorted(set(removals) & set(updates))
        if overlap:
            raise IcebergError(422, "UnprocessableEntityException",
                               f"properties both updated and removed: {', '.join(overlap)}")
        updated, removed, missing = nss.update(namespace_of(namespace), updates, removals)
        return json_response({"updated": updated, "removed": removed, "missing": missing})

    # -- tables ---------------------------------------------------------------------------

    @router.get("/namespaces/{namespace}/tables", response_model=m.ListTablesResponse,
                responses={**COMMON, **_errors("Not Found", 404)}, operation_id="listTables")
    @served(NAMESPACE)
    def list_tables(namespace: Ns, _user: User, page_token: PageToken = None,
                    page_size: PageSize = None) -> Response:
        levels = namespace_of(namespace)
        names, token = paginate(tables.list(levels), page_token, page_size)
        db = levels[0].lower()
        return json_response({"identifiers": [{"namespace": [db], "name": n} for n in names],
                              "next-page-token": token})

    @router.post("/namespaces/{namespace}/tables", response_model=m.LoadTableResult,
                 responses={**COMMON, **_errors("Not Found, Conflict", 404, 409)},
                 operation_id="createTable")
    @served(NAMESPACE)
    def create_table(namespace: Ns, body: m.CreateTableRequest, who: User,
                     _delegation: Delegation = None) -> Response:
        levels = namespace_of(namespace)
        done = commits.create((database_of(levels), body.name.lower()),
                              body.model_dump(by_alias=True), who)
        return table_response(done)

    @router.post("/namespaces/{namespace}/register", response_model=m.LoadTableResult,
                 responses={**COMMON, **_errors("Not Found, Conflict", 404, 409)},
                 operation_id="registerTable")
    @served(NAMESPACE)
    def register_table(namespace: Ns, body: m.RegisterTableRequest, who: User,
                       _delegation: Delegation = None) -> Response:
        return table_response(tables.register(namespace_of(namespace), body.name,
                                              body.metadata_location, body.overwrite, who))

    @router.get("/namespaces/{namespace}/tables/{table}", response_model=m.LoadTableResult,
                responses={**COMMON, **_errors("Not Found", 404)}, operation_id="loadTable")
    @served(TABLE)
    def load_table(namespace: Ns, table: Tbl, _user: User,
                   snapshots: Optional[m.SnapshotsMode] = None,
                   delegation: Delegation = None) -> Response:
        if delegation:
            log.debug("loadTable: X-Iceberg-Access-Delegation %r accepted and ignored (no "
                      "credentials are vended)", delegation)
        return table_response(tables.load(namespace_of(namespace), table),
                              refs_only=snapshots == "refs")

    @router.head("/namespaces/{namespace}/tables/{table}", status_code=204,
                 responses={204: NoBody, **COMMON, **_errors("Not Found", 404)},
                 operation_id="tableExists")
    @served(TABLE)
    def table_exists(namespace: Ns, table: Tbl, _user: User) -> Response:
        tables.exists(namespace_of(namespace), table)
        return Response(status_code=204)

    @router.post("/namespaces/{namespace}/tables/{table}", response_model=m.CommitTableResponse,
                 responses={**COMMON, **_errors("Not Found, Conflict", 404, 409)},
                 operation_id="updateTable")
    @served(TABLE)
    def update_table(namespace: Ns, table: Tbl, body: m.CommitTableRequest, who: User) -> Response:
        change = Change((database_of(namespace_of(namespace)), table.lower()),
                        *_parts(body))
        return table_response(commits.commit(change, who), with_config=False)

    @router.delete("/namespaces/{namespace}/tables/{table}", status_code=204,
                   responses={204: NoBody, **COMMON, **_errors("Not Found", 404)},
                   operation_id="dropTable")
    @served(TABLE)
    def drop_table(namespace: Ns, table: Tbl, _user: User,
                   purge: Purge = False) -> Response:
        tables.drop(namespace_of(namespace), table, purge)
        return Response(status_code=204)

    @router.post("/tables/rename", status_code=204,
                 responses={204: NoBody, **COMMON, **_errors("Not Found, Conflict", 404, 406, 409)},
                 operation_id="renameTable")
    @served(TABLE)
    def rename_table(body: m.RenameTableRequest, _user: User) -> Response:
        tables.rename((body.source.namespace, body.source.name),
                      (body.destination.namespace, body.destination.name))
        return Response(status_code=204)

    @router.post("/namespaces/{namespace}/tables/{table}/metrics", status_code=204,
                 responses={204: NoBody, **COMMON, **_errors("Not Found", 404)},
                 operation_id="reportMetrics")
    @served(TABLE)
    def report_metrics(namespace: Ns, table: Tbl, body: m.ReportMetricsRequest,
                       _user: User) -> Response:
        tables.report_metrics(namespace_of(namespace), table, body.model_dump(by_alias=True))
        return Response(status_code=204)

    @router.post("/transactions/commit", status_code=204,
                 responses={204: NoBody, **COMMON, **_errors("Not Found, Conflict", 404, 409)},
                 operation_id="commitTransaction")
    @served(TABLE)
    def commit_transaction(body: m.CommitTransactionRequest, who: User) -> Response:
        changes = []
        for part in body.table_changes:
            if part.identifier is None:
                raise IcebergError(400, "BadRequestException",
                                   "every table change of a transaction names its table")
            changes.append(Change((database_of(part.identifier.namespace),
                                   part.identifier.name.lower()), *_parts(part)))
        commits.commit_all(changes, who)
        return Response(status_code=204)

    def check_prefix(prefix: str = Path(pattern=f"^{services.name}$")) -> None:
        """Only this server's catalog (its one prefix)."""

    app.include_router(router, prefix=base, include_in_schema=False)
    app.include_router(router, prefix=base + "/{prefix}", dependencies=[Depends(check_prefix)])
    return app


def _parts(body: m.CommitTableRequest) -> tuple[list[dict], list[dict]]:
    return ([r.model_dump(by_alias=True) for r in body.requirements],
            [u.model_dump(by_alias=True) for u in body.updates])
