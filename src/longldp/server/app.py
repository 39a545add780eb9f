"""The HTTP face of the collection server: a FastAPI application over :class:`Service`.

Authentication is ``Authorization: Bearer <token>``; the dashboard also takes ``?token=``, read
only when the request has no ``Authorization`` header (the header always wins). An unknown
collection and a wrong token get the same answer (401 ``invalid token, or no such
collection.``) after the same work (:meth:`Service.authenticate`); only the admin learns that a
collection does not exist (404). Every error is a JSON object ``{"error": message}`` (plus
``"item"``, the index of the first bad item of a batch); a database that cannot be reached
answers 503 with ``Retry-After``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import FastAPI, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import ClientDisconnect

import longldp
from longldp.server import db
from longldp.server.dashboard import render_dashboard
from longldp.server.service import (
    MAX_EPOCH,
    ClientError,
    Collection,
    Service,
    resolve_postprocess,
)

#: Seconds a client is asked to wait when the database is unavailable.
RETRY_AFTER_S = 5
#: The one answer to a wrong token and to an unknown collection (names cannot be probed).
INVALID = "invalid token, or no such collection."
#: Roles that may read a collection's description.
ANY_ROLE = {"admin", "read", "ingest", "enroll", "device"}

Epoch = Annotated[int, Path(ge=0, le=MAX_EPOCH, description="Epoch number.")]
Name = Annotated[str, Path(min_length=1, max_length=64, description="Collection name.")]
Offset = Annotated[
    int | None, Query(ge=0, le=2**31, description="First value of the answer (default 0).")
]
Count = Annotated[
    int | None,
    Query(ge=1, le=2**31, description="Values in the answer (default: all, up to the cap)."),
]
PostprocessQuery = Annotated[
    str | None,
    Query(
        max_length=32,
        description="'none' for the unbiased estimates, a post-processing method name "
        "(norm-sub, base-pos, ...), or absent for the collection's default.",
    ),
]


class ProtocolSpec(BaseModel):
    """A protocol by name and constructor parameters, e.g. {"name": "L-GRR", "params": {...}}."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=32)
    params: dict[str, Any] = Field(default_factory=dict)


class CollectionIn(BaseModel):
    """A new collection."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=64, description="Letters, digits, '_', '.', '-'.")
    protocol: ProtocolSpec
    first_epoch: int = Field(0, ge=0, le=MAX_EPOCH)
    last_epoch: int | None = Field(None, ge=0, le=MAX_EPOCH)
    epoch_seconds: float | None = Field(None, gt=0, description="Wall-clock epoch length.")
    start_time: float | None = Field(None, description="Unix time when first_epoch begins.")
    epoch_window: int | None = Field(
        None, ge=1, description="Epochs open at once (default 8): see docs/server.md."
    )
    auth: str | None = Field(
        None, description="'device' (default: devices enroll) or 'shared' (one ingest token)."
    )
    reports_per_epoch: int | None = Field(
        None, ge=1, description="Quota of reports per device and epoch (default 1)."
    )
    postprocess: str | None = Field(None, max_length=32, description="Default method.")
    description: str = Field("", max_length=2000)


_BATCH_JSON = {
    "type": "object",
    "required": ["reports"],
    "additionalProperties": False,
    "properties": {
        "reports": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["id", "epoch", "report"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"},
                    "epoch": {"type": "integer", "minimum": 0, "maximum": MAX_EPOCH},
                    "report": {"type": "string", "format": "byte"},
                    "cohort": {"type": "integer", "minimum": 0},
                },
            },
        }
    },
}
_INGEST_OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            "application/octet-stream": {
                "schema": {
                    "type": "string",
                    "format": "binary",
                    "description": "Concatenated upload records: 16-byte report id, "
                    "4-byte big-endian epoch, one wire-format report.",
                }
            },
            "application/json": {"schema": _BATCH_JSON},
        },
    }
}


def _error(status: int, message: str, item: int | None = None, **headers: str) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if item is not None:
        body["item"] = item
    return JSONResponse(body, status_code=status, headers=headers or None)


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization")
    if auth is None:
        return None
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


#: Request headers a cross-origin page may send (the clients send these two), and response
#: headers its script may read (the uploader honours Retry-After).
CORS_REQUEST_HEADERS = ("Authorization", "Content-Type")
CORS_EXPOSED_HEADERS = ("Retry-After",)
#: Seconds a browser may cache a preflight answer.
CORS_MAX_AGE = 600


def create_app(service: Service, *, cors_origins: tuple[str, ...] = ()) -> FastAPI:
    """The FastAPI application serving ``service`` (its database already migrated).

    With ``cors_origins`` (checked by `longldp.server.check_origins`), pages of those origins
    may call the API: Starlette's CORS middleware answers preflight requests and adds
    ``Access-Control-Allow-Origin`` to the answers (docs/server.md, "Pages on another origin").
    """
    app = FastAPI(
        title="longldp collection server",
        version=longldp.__version__,
        description="Collects locally randomized reports, stores them, serves estimates. "
        "See docs/server.md.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=list(CORS_REQUEST_HEADERS),
            expose_headers=list(CORS_EXPOSED_HEADERS),
            max_age=CORS_MAX_AGE,
        )

    @app.exception_handler(ClientError)
    async def _client_error(_request: Request, exc: ClientError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.item)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(422, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(sa.exc.IntegrityError)
    async def _integrity(_request: Request, _exc: Exception) -> JSONResponse:
        return _error(409, "conflicting write; the resource already exists.")

    @app.exception_handler(sa.exc.DBAPIError)
    async def _db_down(_request: Request, _exc: Exception) -> JSONResponse:
        return _db_unavailable()

    @app.exception_handler(db.DatabaseUnavailableError)
    async def _db_down2(_request: Request, _exc: Exception) -> JSONResponse:
        return _db_unavailable()

    def _db_unavailable() -> JSONResponse:
        return _error(
            503,
            "the database is unavailable; retry later.",
            **{"Retry-After": str(RETRY_AFTER_S)},
        )

    def _require_admin(request: Request) -> None:
        token = _bearer(request)
        if token is None:
            raise ClientError(401, "missing bearer token.")
        if not service.is_admin(token):
            raise ClientError(403, "this operation needs the admin token.")

    async def _access(
        request: Request, name: str, roles: set[str], token: str | None = None
    ) -> tuple[Collection, int]:
        """The collection and device of an authenticated request whose role is in ``roles``."""
        token = token if token is not None else _bearer(request)
        if token is None:
            raise ClientError(401, "missing bearer token.")
        access = await run_in_threadpool(service.authenticate, name, token)
        if access.collection is None:
            if access.role == "admin":
                raise ClientError(404, f"no collection named {name!r}.")
            raise ClientError(401, INVALID)
        if access.role is None:
            raise ClientError(401, INVALID)
        if access.role not in roles:
            raise ClientError(
                403, f"a {access.role} token cannot do this; it needs {sorted(roles)}."
            )
        return access.collection, access.device

    async def _collection(
        request: Request, name: str, roles: set[str], token: str | None = None
    ) -> Collection:
        return (await _access(request, name, roles, token))[0]

    @app.get("/healthz", tags=["server"], summary="Liveness and database check")
    def healthz() -> dict[str, Any]:
        with db.transaction(service.engine, write=False) as conn:
            version = db.schema_version(conn)
        return {"status": "ok", "schema_version": version}

    @app.post(
        "/v1/collections",
        status_code=201,
        tags=["collections"],
        summary="Create a collection (admin); returns its ingest and read tokens once",
    )
    def create_collection(body: CollectionIn, request: Request) -> dict[str, Any]:
        _require_admin(request)
        return service.create_collection(body.model_dump(exclude_unset=True))

    @app.get("/v1/collections", tags=["collections"], summary="List collections (admin)")
    def list_collections(request: Request) -> list[dict[str, Any]]:
        _require_admin(request)
        return service.list_collections()

    @app.get("/v1/collections/{name}", tags=["collections"], summary="One collection")
    async def get_collection(name: Name, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, ANY_ROLE)
        return col.public()

    @app.get(
        "/v1/collections/{name}/privacy",
        tags=["queries"],
        summary="Local and central (shuffled) privacy of the collection at its current counts",
    )
    async def central_privacy(name: Name, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"admin", "read"})
        return await run_in_threadpool(service.central_privacy, col)

    @app.post(
        "/v1/collections/{name}/devices",
        status_code=201,
        tags=["ingest"],
        summary="Enroll a device (enrollment or admin token); returns its credential once",
    )
    async def enroll(name: Name, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"enroll", "admin"})
        return await run_in_threadpool(service.enroll, col)

    @app.post(
        "/v1/collections/{name}/reports",
        tags=["ingest"],
        summary="Ingest one report or a batch (device credential, or the shared ingest token); "
        "200 after commit",
        openapi_extra=_INGEST_OPENAPI,
    )
    async def ingest(name: Name, request: Request) -> dict[str, int]:
        col, device = await _access(request, name, {"ingest", "device"})
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind not in ("application/octet-stream", "application/json"):
            raise ClientError(
                415, "Content-Type must be application/octet-stream or application/json."
            )
        data = await _read_body(request, service.limits.max_body_bytes)
        if kind == "application/json":
            try:
                body = json.loads(data)
            except (ValueError, RecursionError):
                raise ClientError(422, "the body is not valid JSON.") from None
            batch = await run_in_threadpool(service.parse_json, col, body)
        else:
            batch = await run_in_threadpool(service.parse_binary, col, data)
        return await run_in_threadpool(service.ingest, col, batch, device)

    @app.get(
        "/v1/collections/{name}/epochs",
        tags=["queries"],
        summary="Epochs with their counts, a page at a time (next_start: the next page)",
    )
    async def epochs(
        name: Name,
        request: Request,
        start: Annotated[int | None, Query(ge=0, le=MAX_EPOCH)] = None,
        limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    ) -> dict[str, Any]:
        col = await _collection(request, name, {"admin", "read"})
        return await run_in_threadpool(service.epochs, col, start, limit)

    @app.post(
        "/v1/collections/{name}/epochs/{epoch}/close",
        tags=["collections"],
        summary="Close an epoch (admin): later reports for it are refused",
    )
    async def close_epoch(name: Name, epoch: Epoch, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"admin"})
        return await run_in_threadpool(service.close_epoch, col, epoch)

    @app.get(
        "/v1/collections/{name}/epochs/{epoch}/estimate",
        tags=["queries"],
        summary="Estimates of one epoch with standard errors and 95% intervals",
    )
    async def estimate(
        name: Name,
        epoch: Epoch,
        request: Request,
        postprocess: PostprocessQuery = None,
        offset: Offset = None,
        count: Count = None,
    ) -> dict[str, Any]:
        col = await _collection(request, name, {"admin", "read"})
        method = resolve_postprocess(col, postprocess)
        return await run_in_threadpool(service.estimate, col, epoch, method, offset, count)

    @app.get(
        "/v1/collections/{name}/epochs/{epoch}/discovered",
        tags=["queries"],
        summary="Items discovered in one epoch (discovery protocols: PEM), with 95% intervals",
    )
    async def discovered(name: Name, epoch: Epoch, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"admin", "read"})
        return await run_in_threadpool(service.discovered, col, epoch)

    @app.get(
        "/v1/collections/{name}/series",
        tags=["queries"],
        summary="Estimates of the epochs with reports in [start, stop], a page at a time",
    )
    async def series(
        name: Name,
        request: Request,
        postprocess: PostprocessQuery = None,
        start: Annotated[int | None, Query(ge=0, le=MAX_EPOCH)] = None,
        stop: Annotated[int | None, Query(ge=0, le=MAX_EPOCH)] = None,
        limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
        offset: Offset = None,
        count: Count = None,
    ) -> dict[str, Any]:
        col = await _collection(request, name, {"admin", "read"})
        method = resolve_postprocess(col, postprocess)
        return await run_in_threadpool(
            service.series, col, method, start, stop, limit, offset, count
        )

    @app.get(
        "/v1/collections/{name}/epochs/{epoch}/reports.parquet",
        tags=["queries"],
        summary="Export one epoch's reports as Parquet (devices=true, admin: with device ids)",
        response_class=Response,
        responses={200: {"content": {"application/vnd.apache.parquet": {}}}},
    )
    async def export(name: Name, epoch: Epoch, request: Request, devices: bool = False) -> Response:
        col = await _collection(request, name, {"admin"} if devices else {"admin", "read"})
        data = await run_in_threadpool(service.export_parquet, col, epoch, devices)
        return Response(
            data,
            media_type="application/vnd.apache.parquet",
            headers={"Content-Disposition": f'attachment; filename="{col.name}-{epoch}.parquet"'},
        )

    @app.get(
        "/collections/{name}/dashboard",
        tags=["dashboard"],
        summary="Dashboard page (read token as Bearer, or ?token= when there is no header)",
        response_class=HTMLResponse,
    )
    async def dashboard(
        name: Name,
        request: Request,
        token: Annotated[str | None, Query(max_length=200)] = None,
        postprocess: PostprocessQuery = None,
    ) -> HTMLResponse:
        # The Authorization header, when present, alone authenticates: a ?token= in a shared
        # link can never replace the credentials the client sends.
        presented = _bearer(request) if "authorization" in request.headers else token
        if presented is None and "authorization" in request.headers:
            raise ClientError(401, "the Authorization header is not a bearer token.")
        col = await _collection(request, name, {"admin", "read"}, token=presented)
        method = resolve_postprocess(col, postprocess)
        view = await run_in_threadpool(service.dashboard_view, col, method)
        page = render_dashboard(col.public(), view, method)
        return HTMLResponse(
            page,
            headers={
                # Nothing may be fetched: scripts and styles are inline, images are data: URIs.
                "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
                "style-src 'unsafe-inline'; img-src data:",
                "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
            },
        )

    return app


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it exceeds ``limit`` bytes; 400 if the
    client goes away (or the server's body timeout closes the connection) before its end."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ClientError(400, "Content-Length is not an integer.") from None
        if size > limit:
            raise ClientError(413, f"the body has {size} bytes; at most {limit} allowed.")
    chunks: list[bytes] = []
    total = 0
    try:
        async for chunk in request.stream():
            total += len(chunk)
            if total > limit:
                raise ClientError(413, f"the body exceeds {limit} bytes.")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientError(400, "the connection closed before the end of the body.") from None
    return b"".join(chunks)
