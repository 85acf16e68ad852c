"""The HTTP face of the emulator: routes, auth, JSON in and out, error mapping and injected faults."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from together_clusters.provider.models import (
    Cluster,
    ClusterCreateRequest,
    ClusterDeleteResponse,
    ClusterList,
    ClusterUpdateRequest,
    RegionList,
)

from . import admin
from .auth import Caller, caller_for_key
from .errors import EmulatorError
from .faults import FaultRule
from .http_errors import (
    ErrorResponse,
    describe_validation_error,
    error_response,
    from_emulator_error,
    internal_error,
)
from .state import Platform

_log = logging.getLogger("together_clusters.emulator")
_bearer = HTTPBearer(auto_error=False, description="A Together API key; each key is its own project.")
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 404, 409, 429, 500, 503)
}
# Paths the fault injector never touches, so tests can always steer the emulator.
_NEVER_FAULTED = ("/_emulator", "/healthz", "/openapi.json", "/docs")


def _json(model: BaseModel) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", exclude_none=True))


def _caller(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Caller:
    if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials.strip():
        raise EmulatorError(
            "authentication_error", "missing or empty API key: send 'Authorization: Bearer <key>'"
        )
    return caller_for_key(creds.credentials.strip())


CallerDep = Annotated[Caller, Depends(_caller)]


def create_app(platform: Platform) -> FastAPI:
    """A FastAPI app serving ``platform`` over the compute API, plus the admin API under ``/_emulator``."""
    app = FastAPI(
        title="Together compute API (emulator)",
        version="1.0.0",
        description="A local emulator of Together's GPU cluster compute API (/v1/compute).",
    )
    app.state.platform = platform
    _install_error_handlers(app)
    _install_middleware(app, platform)
    app.include_router(admin.router(platform))
    if (twin_router := getattr(platform, "twin_admin_router", None)) is not None:
        app.include_router(twin_router())

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/compute/regions", response_model=RegionList, responses=_ERRORS, tags=["clusters"])
    def list_regions(caller: CallerDep) -> JSONResponse:
        return _json(platform.list_regions())

    @app.get("/v1/compute/clusters", response_model=ClusterList, responses=_ERRORS, tags=["clusters"])
    def list_clusters(
        caller: CallerDep,
        project_id: Annotated[
            str | None,
            Query(alias="projectId", description="Only clusters of this project (the SDK's spelling)."),
        ] = None,
        project_id_snake: Annotated[str | None, Query(alias="project_id", include_in_schema=False)] = None,
    ) -> JSONResponse:
        return _json(platform.list_clusters(caller.owner, project_id or project_id_snake))

    @app.post("/v1/compute/clusters", response_model=Cluster, responses=_ERRORS, tags=["clusters"])
    def create_cluster(caller: CallerDep, body: ClusterCreateRequest) -> JSONResponse:
        return _json(platform.create_cluster(caller.owner, caller.default_project_id, body))

    @app.get(
        "/v1/compute/clusters/{cluster_id}", response_model=Cluster, responses=_ERRORS, tags=["clusters"]
    )
    def get_cluster(caller: CallerDep, cluster_id: str) -> JSONResponse:
        return _json(platform.get_cluster(caller.owner, cluster_id))

    @app.put(
        "/v1/compute/clusters/{cluster_id}", response_model=Cluster, responses=_ERRORS, tags=["clusters"]
    )
    def update_cluster(caller: CallerDep, cluster_id: str, body: ClusterUpdateRequest) -> JSONResponse:
        return _json(platform.update_cluster(caller.owner, cluster_id, body))

    @app.delete(
        "/v1/compute/clusters/{cluster_id}",
        response_model=ClusterDeleteResponse,
        responses=_ERRORS,
        tags=["clusters"],
    )
    def delete_cluster(caller: CallerDep, cluster_id: str) -> JSONResponse:
        return _json(platform.delete_cluster(caller.owner, cluster_id))

    _document_400_not_422(app)
    return app


def _document_400_not_422(app: FastAPI) -> None:
    """FastAPI documents 422 for invalid bodies; this API answers 400 (with ErrorResponse) instead."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            for operations in schema["paths"].values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema["components"]["schemas"].pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _install_error_handlers(app: FastAPI) -> None:
    async def on_emulator_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, EmulatorError)
        return from_emulator_error(exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        message, param = describe_validation_error(list(exc.errors()))
        return error_response(400, message, param)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        return error_response(exc.status_code, str(exc.detail), None, headers=dict(exc.headers or {}))

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        return internal_error(exc)

    app.add_exception_handler(EmulatorError, on_emulator_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)


def _install_middleware(app: FastAPI, platform: Platform) -> None:
    @app.middleware("http")
    async def request_id_and_faults(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        request_id = f"req_{secrets.token_hex(12)}"
        fault = None
        if not request.url.path.startswith(_NEVER_FAULTED):
            fault = await asyncio.to_thread(platform.take_fault, request.method, request.url.path)
        # An unhandled error is answered here: Starlette would answer outside this middleware, without an id.
        try:
            response = await _with_fault(request, call_next, fault)
        except Exception as exc:
            _log.exception("unhandled error in %s %s", request.method, request.url.path)
            response = internal_error(exc)
        response.headers["x-request-id"] = request_id
        return response


async def _with_fault(
    request: Request, call_next: Callable[[Request], Awaitable[Response]], fault: FaultRule | None
) -> Response:
    if fault is None:
        return await call_next(request)
    if fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault.status is None:
        return await call_next(request)
    if fault.after_commit:
        # The request takes effect, but its reply is lost: read and drop it, then fail.
        committed = await call_next(request)
        async for _ in committed.body_iterator:  # type: ignore[attr-defined]
            pass
    headers = {"retry-after": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
    message = fault.message or f"injected fault: HTTP {fault.status}"
    return error_response(fault.status, message, None, headers=headers)
