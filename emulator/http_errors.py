"""The JSON error body every failing response carries, and how to build it."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from .errors import EmulatorError, ErrorKind, kind_for_status


class ErrorDetail(BaseModel):
    message: str
    type: ErrorKind
    param: str | None = None


class ErrorResponse(BaseModel):
    """``{"error": {"message": ..., "type": ..., "param": ...}}``"""

    error: ErrorDetail


def error_response(
    status: int,
    message: str,
    param: str | None = None,
    kind: ErrorKind | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """A JSON error reply; ``kind`` defaults to the one matching ``status``."""
    body = ErrorResponse(
        error=ErrorDetail(message=message, type=kind or kind_for_status(status), param=param)
    )
    all_headers = dict(headers or {})
    if status == 409:
        # A conflict will not go away by retrying; stop Stainless SDKs from retrying it (they retry 409).
        all_headers.setdefault("x-should-retry", "false")
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=all_headers)


def from_emulator_error(exc: EmulatorError) -> JSONResponse:
    """The reply to a request the platform refused."""
    return error_response(exc.status, exc.message, exc.param, exc.kind)


def internal_error(exc: Exception) -> JSONResponse:
    """The reply to a request that hit a bug in the emulator (the details go to the log, not the client)."""
    return error_response(500, f"internal emulator error: {type(exc).__name__}", None, "server_error")


def describe_validation_error(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """A message naming the field and value of the first request validation error, and that field."""
    if not errors:
        return "invalid request", None
    err = errors[0]
    loc = [str(part) for part in err.get("loc", ()) if part not in ("body", "query", "path")]
    field = ".".join(loc) or None
    kind = err.get("type", "")
    if kind == "json_invalid":
        return "the request body is not valid JSON", None
    if kind == "missing":
        return (f"{field} is required" if field else "a JSON request body is required"), field
    if kind == "extra_forbidden":
        return f"unknown field {field!r}: this request does not accept it", field
    got = err.get("input")
    return f"{field or 'body'}: {err.get('msg', 'invalid value')}; got {got!r}", field
