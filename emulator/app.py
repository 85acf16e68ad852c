"""The HTTP face of the emulator: routes, auth, JSON in and out, error mapping (faults: see injector)."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from . import admin
from .auth import Caller, WhoamiProjectAPIKey, caller_for_key, whoami
from .errors import EmulatorError
from .http_errors import (
    ErrorResponse,
    describe_validation_error,
    error_response,
    from_emulator_error,
    internal_error,
)
from .injector import FaultInjector
from .shapes import (
    Cluster,
    ClusterCreateRequest,
    ClusterDeleteResponse,
    ClusterList,
    ClusterStorage,
    ClusterUpdateRequest,
    RegionList,
    Remediation,
    RemediationApproveRequest,
    RemediationCreateRequest,
    RemediationList,
    RemediationRejectRequest,
    StorageCreateRequest,
    StorageDeleteResponse,
    StorageList,
    StorageUpdateRequest,
)
from .state import Platform

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 404, 409, 429, 500, 503)
}


def _json(body: BaseModel | dict[str, Any]) -> JSONResponse:
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json", exclude_none=True)
    return JSONResponse(body)


_Body = TypeVar("_Body", bound=BaseModel)


def _noted(platform: Platform, method: str, route: str, body: _Body) -> _Body:
    """``body``, once the fields it sent that the API does not define (and that were ignored) are recorded."""
    platform.record_ignored_fields(method, route, getattr(body, "ignored_fields", []))
    return body


class _BearerCaller(HTTPBearer):
    """The Bearer scheme, resolved straight to the caller: one dependency per request where two were.

    OpenAPI documents it as before (``HTTPBearer``: FastAPI takes the scheme from the instance).
    """

    async def __call__(self, request: Request) -> Caller:  # type: ignore[override]
        creds = await super().__call__(request)
        if creds is None or creds.scheme.lower() != "bearer" or not creds.credentials.strip():
            raise EmulatorError(
                "authentication_error", "missing or empty API key: send 'Authorization: Bearer <key>'"
            )
        return caller_for_key(creds.credentials.strip())


CallerDep = Annotated[
    Caller,
    Depends(
        _BearerCaller(
            auto_error=False,
            scheme_name="HTTPBearer",
            description="A Together API key; each key is its own project.",
        )
    ),
]


# A list filter of the remediations listing: the SDK sends it comma-separated (``state=A,B``); repeated
# (``state=A&state=B``) works too.
_Filter = Annotated[list[str] | None, Query(description="Any of these values; comma-separated or repeated.")]


def asgi_app(platform: Platform) -> ASGIApp:
    """What the server runs: the app behind the fault injector (request ids, injected HTTP faults)."""
    return FaultInjector(create_app(platform), platform)


def create_app(platform: Platform) -> FastAPI:
    """A FastAPI app serving ``platform`` over the compute API, plus the admin API under ``/_emulator``.

    The API handlers are coroutines: each platform operation is short and holds the platform's lock, so it
    runs on the event loop rather than paying a thread hand-off per request.
    """
    app = FastAPI(
        title="Together compute API (emulator)",
        version="1.0.0",
        description="A local emulator of Together's GPU cluster compute API (/v1/compute).",
    )
    app.state.platform = platform
    _install_error_handlers(app)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v3/whoami", response_model=WhoamiProjectAPIKey, responses=_ERRORS, tags=["identity"])
    async def who_am_i(caller: CallerDep) -> JSONResponse:
        return _json(whoami(caller))

    @app.get("/v1/compute/regions", response_model=RegionList, responses=_ERRORS, tags=["clusters"])
    async def list_regions(caller: CallerDep) -> JSONResponse:
        return _json(platform.list_regions())

    @app.get("/v1/compute/clusters", response_model=ClusterList, responses=_ERRORS, tags=["clusters"])
    async def list_clusters(
        caller: CallerDep,
        project_id: Annotated[
            str | None,
            Query(alias="projectId", description="Only clusters of this project (the SDK's spelling)."),
        ] = None,
        project_id_snake: Annotated[str | None, Query(alias="project_id", include_in_schema=False)] = None,
    ) -> JSONResponse:
        return _json(platform.list_clusters(caller.owner, project_id or project_id_snake))

    @app.post("/v1/compute/clusters", response_model=Cluster, responses=_ERRORS, tags=["clusters"])
    async def create_cluster(caller: CallerDep, body: ClusterCreateRequest) -> JSONResponse:
        body = _noted(platform, "POST", "/v1/compute/clusters", body)
        return _json(platform.create_cluster(caller.owner, caller.default_project_id, body))

    @app.get(
        "/v1/compute/clusters/{cluster_id}", response_model=Cluster, responses=_ERRORS, tags=["clusters"]
    )
    async def get_cluster(caller: CallerDep, cluster_id: str) -> JSONResponse:
        return _json(platform.get_cluster(caller.owner, cluster_id))

    @app.put(
        "/v1/compute/clusters/{cluster_id}", response_model=Cluster, responses=_ERRORS, tags=["clusters"]
    )
    async def update_cluster(caller: CallerDep, cluster_id: str, body: ClusterUpdateRequest) -> JSONResponse:
        body = _noted(platform, "PUT", "/v1/compute/clusters/{cluster_id}", body)
        return _json(platform.update_cluster(caller.owner, cluster_id, body))

    @app.delete(
        "/v1/compute/clusters/{cluster_id}",
        response_model=ClusterDeleteResponse,
        responses=_ERRORS,
        tags=["clusters"],
    )
    async def delete_cluster(caller: CallerDep, cluster_id: str) -> JSONResponse:
        return _json(platform.delete_cluster(caller.owner, cluster_id))

    _storage_routes(app, platform)
    _remediation_routes(app, platform)

    # After the API's routes, which every request is matched against in order (admin ones are not in OpenAPI).
    app.include_router(admin.router(platform))
    if (twin_router := getattr(platform, "twin_admin_router", None)) is not None:
        app.include_router(twin_router())
    _document_400_not_422(app)
    return app


def _storage_routes(app: FastAPI, platform: Platform) -> None:
    """``/v1/compute/clusters/storage/volumes``: the shared volumes (the SDK's ``client.clusters.storage``)."""
    volumes = "/v1/compute/clusters/storage/volumes"

    @app.post(volumes, response_model=ClusterStorage, responses=_ERRORS, tags=["storage"])
    async def create_volume(caller: CallerDep, body: StorageCreateRequest) -> JSONResponse:
        body = _noted(platform, "POST", volumes, body)
        return _json(platform.create_volume(caller.owner, caller.default_project_id, body))

    @app.get(volumes, response_model=StorageList, responses=_ERRORS, tags=["storage"])
    async def list_volumes(
        caller: CallerDep,
        project_id: Annotated[
            str | None,
            Query(alias="projectId", description="Only volumes of this project (the SDK's spelling)."),
        ] = None,
    ) -> JSONResponse:
        return _json(platform.list_volumes(caller.owner, project_id))

    @app.put(volumes, response_model=ClusterStorage, responses=_ERRORS, tags=["storage"])
    async def update_volume(caller: CallerDep, body: StorageUpdateRequest) -> JSONResponse:
        body = _noted(platform, "PUT", volumes, body)
        return _json(platform.update_volume(caller.owner, body))

    @app.get(f"{volumes}/{{volume_id}}", response_model=ClusterStorage, responses=_ERRORS, tags=["storage"])
    async def get_volume(caller: CallerDep, volume_id: str) -> JSONResponse:
        return _json(platform.get_volume(caller.owner, volume_id))

    @app.delete(
        f"{volumes}/{{volume_id}}", response_model=StorageDeleteResponse, responses=_ERRORS, tags=["storage"]
    )
    async def delete_volume(caller: CallerDep, volume_id: str) -> JSONResponse:
        return _json(platform.delete_volume(caller.owner, volume_id))


def _remediation_routes(app: FastAPI, platform: Platform) -> None:
    """``/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations``: node remediations (the SDK's
    ``client.clusters.remediations``); the state machine is :mod:`together_clusters.emulator.remediations`."""
    remediations = "/v1/compute/clusters/{cluster_id}/instances/{instance_id}/remediations"
    one = f"{remediations}/{{remediation_id}}"

    @app.post(remediations, response_model=Remediation, responses=_ERRORS, tags=["remediations"])
    async def create_remediation(
        caller: CallerDep, cluster_id: str, instance_id: str, body: RemediationCreateRequest
    ) -> JSONResponse:
        body = _noted(platform, "POST", remediations, body)
        return _json(
            platform.create_remediation(caller.owner, caller.api_key_id, cluster_id, instance_id, body)
        )

    @app.get(remediations, response_model=RemediationList, responses=_ERRORS, tags=["remediations"])
    async def list_remediations(
        caller: CallerDep,
        cluster_id: str,
        instance_id: Annotated[
            str, Path(description="An instance id, or `-` for every instance of the cluster.")
        ],
        state: _Filter = None,
        mode: _Filter = None,
        trigger: _Filter = None,
        order_by: str | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> JSONResponse:
        return _json(
            platform.list_remediations(
                caller.owner,
                cluster_id,
                instance_id,
                state=state,
                mode=mode,
                trigger=trigger,
                order_by=order_by,
                page_size=page_size,
                page_token=page_token,
            )
        )

    @app.get(one, response_model=Remediation, responses=_ERRORS, tags=["remediations"])
    async def get_remediation(
        caller: CallerDep, cluster_id: str, instance_id: str, remediation_id: str
    ) -> JSONResponse:
        return _json(platform.get_remediation(caller.owner, cluster_id, instance_id, remediation_id))

    @app.post(f"{one}/approve", response_model=Remediation, responses=_ERRORS, tags=["remediations"])
    async def approve_remediation(
        caller: CallerDep,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        body: RemediationApproveRequest | None = None,
    ) -> JSONResponse:
        return _json(
            platform.approve_remediation(
                caller.owner,
                caller.api_key_id,
                cluster_id,
                instance_id,
                remediation_id,
                _noted(platform, "POST", f"{one}/approve", body or RemediationApproveRequest()),
            )
        )

    @app.post(f"{one}/reject", response_model=Remediation, responses=_ERRORS, tags=["remediations"])
    async def reject_remediation(
        caller: CallerDep,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        body: RemediationRejectRequest | None = None,
    ) -> JSONResponse:
        return _json(
            platform.reject_remediation(
                caller.owner,
                caller.api_key_id,
                cluster_id,
                instance_id,
                remediation_id,
                _noted(platform, "POST", f"{one}/reject", body or RemediationRejectRequest()),
            )
        )

    @app.post(f"{one}/cancel", response_model=Remediation, responses=_ERRORS, tags=["remediations"])
    async def cancel_remediation(
        caller: CallerDep, cluster_id: str, instance_id: str, remediation_id: str
    ) -> JSONResponse:
        return _json(platform.cancel_remediation(caller.owner, cluster_id, instance_id, remediation_id))


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
