"""The HTTP face of the collection server: a FastAPI application over :class:`Service`.

Authentication is ``Authorization: Bearer <token>``; the dashboard also takes ``?token=``, read
only when the request has no ``Authorization`` header (the header always wins). An unknown
collection and a wrong token get the same answer (401 ``invalid token, or no such
collection.``) after the same work (:meth:`Service.authenticate`); only the admin learns that a
collection does not exist (404). Every error is a JSON object ``{"error": message}`` (plus
``"item"``, the index of the first bad item of a batch); a database that cannot be reached
answers 503 with ``Retry-After``.

The ingest routes (``POST /v1/collections/{name}/reports`` and ``…/reports/check``) are what
devices call, once per report: :class:`CollectionApp` serves them ahead of FastAPI's routing,
dependency and validation machinery, by :class:`LeanIngest`, a plain ASGI handler behind the
same admission control (and CORS) as every other route, doing the same checks in the same
order as the declared routes (which give the OpenAPI schema and answer identically when the
lean path is switched off; ``tests/test_server_lean.py``). docs/server.md, "Performance",
says what that saves.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import FastAPI, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

import longldp
from longldp.server import db, group
from longldp.server.admission import AdmissionMiddleware, Budget, Ticket, send_json
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
#: Ingest bodies up to this size are parsed on the serving thread (microseconds); larger ones,
#: and every JSON body, in the thread pool, so that no request stalls the others.
INLINE_PARSE_BYTES = 16 * 1024
#: The header carrying a device's attestation evidence at enrollment (docs/server.md).
ATTESTATION_HEADER = "x-device-attestation"

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
    epoch_skew: int | None = Field(
        None, ge=0, le=64, description="Future epochs a wall-clock collection accepts (1)."
    )
    open_from: int | None = Field(
        None, ge=0, le=MAX_EPOCH, description="Without a wall clock: the oldest open epoch."
    )
    max_devices: int | None = Field(None, ge=1, le=10**12, description="Device cap.")
    expected_devices: int | None = Field(
        None, ge=0, le=10**12, description="Expected population (the page's Sybil figure)."
    )
    enroll_per_minute: int | None = Field(
        None, ge=1, le=10**9, description="Enrollments a minute."
    )
    auth: str | None = Field(
        None, description="'device' (default: devices enroll) or 'shared' (one ingest token)."
    )
    reports_per_epoch: int | None = Field(
        None, ge=1, description="Quota of reports per device and epoch (default 1)."
    )
    postprocess: str | None = Field(None, max_length=32, description="Default method.")
    description: str = Field("", max_length=2000)


class SettingsIn(BaseModel):
    """A collection's operator settings (only those given change; null: the server's
    default for a device bound)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    open_from: int | None = Field(
        None, ge=0, le=MAX_EPOCH, description="Without a wall clock: the oldest open epoch."
    )
    max_devices: int | None = Field(None, ge=1, le=10**12, description="Device cap.")
    expected_devices: int | None = Field(None, ge=0, le=10**12, description="Expected devices.")
    enroll_per_minute: int | None = Field(
        None, ge=1, le=10**9, description="Enrollments a minute."
    )


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
    return bearer_token(request.headers.get("authorization"))


def bearer_token(auth: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value (None: absent or not a
    bearer token)."""
    if auth is None:
        return None
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def header(scope: dict[str, Any], name: bytes) -> str | None:
    """The first value of the request header ``name`` (lower case) in an ASGI ``scope``,
    decoded as Starlette's ``Request.headers`` decodes it (latin-1)."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def error_answer(exc: Exception) -> tuple[int, dict[str, Any], dict[str, str]] | None:
    """(status, JSON body, headers) of the answer to ``exc`` when it is one of the errors the
    server answers (None: a bug, answered 500): a :class:`ClientError` as it says, a write that
    conflicts 409, a database that cannot be reached 503 with ``Retry-After``. The FastAPI
    exception handlers and :class:`LeanIngest` both answer through it."""
    if isinstance(exc, ClientError):
        body: dict[str, Any] = {"error": exc.message}
        if exc.item is not None:
            body["item"] = exc.item
        return exc.status, body, dict(exc.headers)
    if isinstance(exc, sa.exc.IntegrityError):
        return 409, {"error": "conflicting write; the resource already exists."}, {}
    if isinstance(exc, (sa.exc.DBAPIError, db.DatabaseUnavailableError)):
        return (
            503,
            {"error": "the database is unavailable; retry later."},
            {"Retry-After": str(RETRY_AFTER_S)},
        )
    return None


def _answer_error(exc: Exception) -> JSONResponse:
    answer = error_answer(exc)
    assert answer is not None, "registered only for the errors error_answer maps"
    status, body, headers = answer
    return JSONResponse(body, status_code=status, headers=headers or None)


#: Request headers a cross-origin page may send (the clients send these two), and response
#: headers its script may read (the uploader honours Retry-After).
CORS_REQUEST_HEADERS = ("Authorization", "Content-Type")
CORS_EXPOSED_HEADERS = ("Retry-After",)
#: Seconds a browser may cache a preflight answer.
CORS_MAX_AGE = 600


#: The ingest routes :class:`CollectionApp` serves by :class:`LeanIngest` (a name as FastAPI's
#: ``Name`` admits it; any other path, or a name it refuses, goes to FastAPI).
LEAN_PATH = re.compile(r"/v1/collections/([^/]{1,64})/reports(/check)?")


class CollectionApp(FastAPI):
    """The server's FastAPI application, which serves its ingest routes by :class:`LeanIngest`
    before FastAPI's machinery (``lean`` False: by the declared FastAPI routes, for the
    tests that compare the two)."""

    lean = True
    #: The ingest and check handlers, each behind the admission control (and CORS).
    lean_stacks: tuple[Any, Any] = (None, None)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.lean and scope["type"] == "http" and scope["method"] == "POST":
            path = scope["path"]
            root = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root) :]
            found = LEAN_PATH.fullmatch(path)
            if found is not None:
                scope["path_params"] = {"name": found.group(1)}
                await self.lean_stacks[found.group(2) is not None](scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def access(
    service: Service, name: str, token: str | None, roles: set[str]
) -> tuple[Collection, int]:
    """The collection and device of a request presenting ``token`` whose role is in ``roles``.

    An unknown collection and a wrong token take the same path to the same answer: the service
    did the same work for both (:meth:`Service.authenticate`, on its authentication thread),
    and only the admin is told which it was."""
    if token is None:
        raise ClientError(401, "missing bearer token.")
    found = await service.authenticator.submit_async((name, token))
    if found.role is None or (found.collection is None and found.role != "admin"):
        raise ClientError(401, INVALID)
    if found.collection is None:
        raise ClientError(404, f"no collection named {name!r}.")
    if found.role not in roles:
        raise ClientError(403, f"a {found.role} token cannot do this; it needs {sorted(roles)}.")
    return found.collection, found.device


async def ingest_job(service: Service, scope: Any, receive: Any, name: str) -> Any:
    """Authenticate, bound, read and parse an ingest request into a job (no storage)."""
    col, device = await access(
        service, name, bearer_token(header(scope, b"authorization")), {"ingest", "device"}
    )
    kind = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
    if kind not in ("application/octet-stream", "application/json"):
        raise ClientError(
            415, "Content-Type must be application/octet-stream or application/json."
        )
    json_body = kind == "application/json"
    limit = service.json_body_limit(col) if json_body else service.limits.max_body_bytes
    declared = header(scope, b"content-length")
    size = limit if declared is None else int(declared)  # checked by the middleware
    if size > limit:
        raise ClientError(
            413,
            f"the JSON body has {size} bytes; at most {limit} for this collection "
            f"({service.limits.max_batch} items of at most "
            f"{(limit - 1024) // max(1, service.limits.max_batch)} bytes).",
        )
    _ticket(scope).need(service.ingest_bytes(col, size, json_body))
    data = await read_body(receive, limit)
    if not json_body and len(data) <= INLINE_PARSE_BYTES:
        return service.job(col, device, kind, data)
    return await run_in_threadpool(service.job, col, device, kind, data)


async def ingest_answer(
    service: Service, scope: Any, receive: Any, name: str, check: bool
) -> dict[str, int]:
    """The answer to an ingest request (``check``: to ``…/reports/check``, which stores
    nothing); a :class:`ClientError` or the database's error otherwise."""
    job = await ingest_job(service, scope, receive, name)
    if check:
        return {"received": len(job.batch), "distinct": int(job.keep.size)}
    if group.groupable(job):
        return await service.committer.submit_async(job)
    return await run_in_threadpool(service.store_job, job)


class LeanIngest:
    """The ingest routes as a plain ASGI handler: :func:`ingest_answer` (the very function
    the declared FastAPI routes call), its errors answered by :func:`error_answer`, the JSON
    written by :func:`send_json`; no routing table, request object, dependency solving or
    response validation per request."""

    def __init__(self, service: Service, check: bool):
        self.service = service
        self.check = check

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        name = scope["path_params"]["name"]
        try:
            payload = await ingest_answer(self.service, scope, receive, name, self.check)
        except Exception as exc:
            answer = error_answer(exc)
            if answer is None:
                raise
            status, body, headers = answer
            await send_json(send, status, body, headers)
            return
        await send_json(send, 200, payload)


def create_app(service: Service, *, cors_origins: tuple[str, ...] = ()) -> CollectionApp:
    """The FastAPI application serving ``service`` (its database already migrated), behind
    the admission control of :mod:`longldp.server.admission`.

    With ``cors_origins`` (checked by `longldp.server.check_origins`), pages of those origins
    may call the API: Starlette's CORS middleware answers preflight requests and adds
    ``Access-Control-Allow-Origin`` to the answers (docs/server.md, "Pages on another origin").
    """
    app = CollectionApp(
        title="longldp collection server",
        version=longldp.__version__,
        description="Collects locally randomized reports, stores them, serves estimates. "
        "See docs/server.md.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    budget = Budget(service.limits.max_inflight_bytes)

    def stack(handler: Any) -> Any:
        """``handler`` behind the layers every route has: the admission control, then (added
        last, so the outermost) CORS: a page on an allowed origin reads every answer, the
        admission control's 503 and its Retry-After included."""
        wrapped = AdmissionMiddleware(
            handler, budget=budget, max_body_bytes=service.limits.max_body_bytes
        )
        if cors_origins:
            from starlette.middleware.cors import CORSMiddleware

            wrapped = CORSMiddleware(wrapped, **cors)
        return wrapped

    cors = {
        "allow_origins": list(cors_origins),
        "allow_methods": ["GET", "POST", "PUT", "PATCH", "DELETE"],
        "allow_headers": list(CORS_REQUEST_HEADERS),
        "expose_headers": list(CORS_EXPOSED_HEADERS),
        "max_age": CORS_MAX_AGE,
    }
    app.add_middleware(
        AdmissionMiddleware, budget=budget, max_body_bytes=service.limits.max_body_bytes
    )
    if cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, **cors)
    app.lean_stacks = (stack(LeanIngest(service, False)), stack(LeanIngest(service, True)))

    @app.exception_handler(ClientError)
    async def _client_error(_request: Request, exc: ClientError) -> JSONResponse:
        return _answer_error(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return _error(422, f"{where}: {first.get('msg', 'invalid request')}")

    @app.exception_handler(sa.exc.IntegrityError)
    async def _integrity(_request: Request, exc: Exception) -> JSONResponse:
        return _answer_error(exc)

    @app.exception_handler(sa.exc.DBAPIError)
    async def _db_down(_request: Request, exc: Exception) -> JSONResponse:
        return _answer_error(exc)

    @app.exception_handler(db.DatabaseUnavailableError)
    async def _db_down2(_request: Request, exc: Exception) -> JSONResponse:
        return _answer_error(exc)

    def _require_admin(request: Request) -> None:
        token = _bearer(request)
        if token is None:
            raise ClientError(401, "missing bearer token.")
        if not service.is_admin(token):
            raise ClientError(403, "this operation needs the admin token.")

    async def _access(
        request: Request, name: str, roles: set[str], token: str | None = None
    ) -> tuple[Collection, int]:
        return await access(service, name, token if token is not None else _bearer(request), roles)

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

    @app.patch(
        "/v1/collections/{name}",
        tags=["collections"],
        summary="Change a collection's settings (admin): open_from moves the window of a "
        "collection without a wall clock; the device cap, expected population, enrollment rate",
    )
    async def update_settings(name: Name, body: SettingsIn, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"admin"})
        return await run_in_threadpool(
            service.update_settings, col, body.model_dump(exclude_unset=True)
        )

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
        tags=["devices"],
        summary="Enroll a device (enrollment or admin token); returns its credential once",
    )
    async def enroll(name: Name, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"enroll", "admin"})
        evidence = request.headers.get(ATTESTATION_HEADER)
        if evidence is not None and len(evidence) > 16384:
            raise ClientError(413, f"'{ATTESTATION_HEADER}' is longer than 16384 characters.")
        return await run_in_threadpool(service.enroll, col, evidence)

    @app.get(
        "/v1/collections/{name}/devices",
        tags=["devices"],
        summary="A page of the collection's devices (admin), with its device bounds and the "
        "largest estimate shift the devices above the expected population could cause",
    )
    async def list_devices(
        name: Name,
        request: Request,
        start: Annotated[int | None, Query(ge=0, le=2**62)] = None,
        limit: Annotated[int | None, Query(ge=1, le=10_000)] = None,
    ) -> dict[str, Any]:
        col = await _collection(request, name, {"admin"})
        return await run_in_threadpool(service.list_devices, col, start, limit)

    @app.delete(
        "/v1/collections/{name}/devices/{device}",
        tags=["devices"],
        summary="Revoke a device (admin); purge=true also removes its reports of epochs not "
        "closed",
    )
    async def revoke_device(
        name: Name,
        device: Annotated[int, Path(ge=1, le=2**62, description="Device id.")],
        request: Request,
        purge: bool = False,
    ) -> dict[str, Any]:
        col = await _collection(request, name, {"admin"})
        return await run_in_threadpool(service.revoke_device, col, device, purge)

    # The two ingest routes are served by LeanIngest (CollectionApp.__call__); declared here
    # for the OpenAPI schema, they answer the same through the same function when app.lean is
    # False.
    @app.post(
        "/v1/collections/{name}/reports",
        tags=["ingest"],
        summary="Ingest one report or a batch (device credential, or the shared ingest token); "
        "200 after commit",
        openapi_extra=_INGEST_OPENAPI,
    )
    async def ingest(name: Name, request: Request) -> dict[str, int]:
        return await ingest_answer(service, request.scope, request.receive, name, False)

    @app.post(
        "/v1/collections/{name}/reports/check",
        tags=["ingest"],
        summary="Check a batch as an ingest would before storing it (authentication, bounds, "
        "parsing), and store nothing",
        openapi_extra=_INGEST_OPENAPI,
    )
    async def check(name: Name, request: Request) -> dict[str, int]:
        return await ingest_answer(service, request.scope, request.receive, name, True)

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
        "/v1/collections/{name}/epochs/{epoch}/plan",
        tags=["ingest"],
        summary="What a device reports with at an epoch: the server's plan (planned protocols)",
    )
    async def plan(name: Name, epoch: Epoch, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, ANY_ROLE)
        return await run_in_threadpool(service.plan, col, epoch)

    @app.get(
        "/v1/collections/{name}/ledger",
        tags=["queries"],
        summary="What the collection's devices spent: median, p99 and max over its devices",
    )
    async def ledger(name: Name, request: Request) -> dict[str, Any]:
        col = await _collection(request, name, {"admin", "read"})
        return await run_in_threadpool(service.ledger, col)

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
        _ticket(request).need(service.answer_bytes(col))
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
        _ticket(request).need(service.answer_bytes(col))
        return await run_in_threadpool(
            service.series, col, method, start, stop, limit, offset, count
        )

    @app.get(
        "/v1/collections/{name}/epochs/{epoch}/reports.parquet",
        tags=["queries"],
        summary="Export one epoch's reports as Parquet, streamed (devices=true, admin: with "
        "device ids)",
        response_class=Response,
        responses={200: {"content": {"application/vnd.apache.parquet": {}}}},
    )
    async def export(name: Name, epoch: Epoch, request: Request, devices: bool = False) -> Response:
        col = await _collection(request, name, {"admin"} if devices else {"admin", "read"})
        _ticket(request).need(service.export_bytes(col))
        return StreamingResponse(
            service.export_chunks(col, epoch, devices),
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
        _ticket(request).need(service.answer_bytes(col, dashboard=True))
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


def _ticket(where: Any) -> Ticket:
    """The admission ticket of a request (its ``Request`` or ASGI scope):
    :class:`AdmissionMiddleware` gives every request one."""
    scope = where.scope if isinstance(where, Request) else where
    ticket = scope.get("state", {}).get("ticket")
    assert isinstance(ticket, Ticket), "the admission middleware must wrap the application"
    return ticket


async def read_body(receive: Any, limit: int) -> bytes:
    """The request body from an ASGI ``receive``, refused with 413 as soon as it exceeds
    ``limit`` bytes (a chunked body has no declared length); 400 if the client goes away (or
    the server's body timeout closes the connection) before its end."""
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            raise ClientError(400, "the connection closed before the end of the body.")
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            raise ClientError(413, f"the body exceeds {limit} bytes.")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
