"""Errors the simulated platform raises; the HTTP layer maps each ``kind`` to a status code."""

from __future__ import annotations

from typing import Literal

ErrorKind = Literal[
    "invalid_request_error", "authentication_error", "not_found", "conflict", "rate_limit", "server_error"
]

STATUS_BY_KIND: dict[ErrorKind, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "not_found": 404,
    "conflict": 409,
    "rate_limit": 429,
    "server_error": 500,
}


_KIND_BY_STATUS: dict[int, ErrorKind] = {status: kind for kind, status in STATUS_BY_KIND.items()}


def kind_for_status(status: int) -> ErrorKind:
    """The error ``type`` reported for an HTTP status (used for injected faults too)."""
    if status >= 500:
        return "server_error"
    return _KIND_BY_STATUS.get(status, "invalid_request_error")


class EmulatorError(Exception):
    """A request the platform refuses, with the field at fault when there is one."""

    def __init__(self, kind: ErrorKind, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.param = param

    @property
    def status(self) -> int:
        return STATUS_BY_KIND[self.kind]


def invalid(message: str, param: str | None = None) -> EmulatorError:
    """A 400: the request breaks one of the platform's rules."""
    return EmulatorError("invalid_request_error", message, param)


def not_found(message: str, param: str | None = None) -> EmulatorError:
    """A 404: no such cluster (for this caller)."""
    return EmulatorError("not_found", message, param)


def conflict(message: str, param: str | None = None) -> EmulatorError:
    """A 409: the request clashes with the current state; retrying will not help."""
    return EmulatorError("conflict", message, param)
