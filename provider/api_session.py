"""The compute API's HTTP session, under every family of calls (``cluster_calls``, ``storage_calls``,
``remediation_calls``): the key and endpoint, auth, timeouts, retries, the error of each status, and the
reading of replies. Nothing here knows about Pulumi.

Retries: GET, PUT and DELETE are retried on 429/502/503/504 and on connection errors, with exponential
backoff and jitter, honouring ``Retry-After`` (``_request``). A POST that creates (or acts) is sent again only
after a 429, a refusal before any work (``_post_create``); after an ambiguous failure each family reconciles
what the POST may have done instead of sending it again.

Replies are read as leniently as the official SDK reads them (see ``models``); a reply that is still
unreadable is an ``UnreadableReplyError``, never a raw decode or validation error.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import httpx
import pydantic

from . import errors
from .environment import API_KEY_ENV, BASE_URL_ENV
from .models import Whoami
from .retry import RetryPolicy, parse_retry_after, should_retry_status

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.together.ai"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# How long a create with an ambiguous outcome keeps looking for its cluster in the listing, which may lag.
RECONCILE_TIMEOUT_S = 90.0

ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)


@dataclass(frozen=True)
class Identity:
    """Where a cluster lives: the API endpoint and the key's project (and organization).

    Recorded in the state (not secret) so that a read from another endpoint or project is refused
    instead of being taken for "deleted".
    """

    endpoint: str
    project_id: str | None
    organization_id: str | None


_STATUS_ERRORS: dict[int, type[errors.APIError]] = {
    400: errors.ValidationError,
    401: errors.AuthenticationError,
    403: errors.AuthenticationError,
    404: errors.NotFoundError,
    409: errors.ConflictError,
    422: errors.ValidationError,
    429: errors.RateLimitError,
}


def resolve_api_key(api_key: str | None = None) -> str:
    """The key given, else ``TOGETHER_API_KEY``; a clear error when there is neither."""
    key = api_key or os.environ.get(API_KEY_ENV, "")
    if not key.strip():
        raise errors.ConfigurationError(
            f"No Together API key: set {API_KEY_ENV} in the environment, or the secret stack config "
            "`pulumi config set --secret together:apiKey <key>`."
        )
    return key.strip()


def resolve_base_url(base_url: str | None = None) -> str:
    """The URL given, else ``TOGETHER_BASE_URL``, else the public API; without a trailing ``/v1``.

    The official SDK's convention is the host alone (paths carry ``/v1``); a URL ending in ``/v1``,
    as older SDKs used, is accepted too.
    """
    url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).strip().rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    if not url.startswith(("http://", "https://")):
        raise errors.ConfigurationError(
            f"{BASE_URL_ENV} must be an http(s) URL such as {DEFAULT_BASE_URL}; got {url!r}"
        )
    return url


class _BearerAuth(httpx.Auth):
    """Adds the bearer token; its repr never shows it."""

    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(token=<redacted>)"


def _error_from_response(response: httpx.Response) -> errors.APIError:
    """Map an error reply to our exception, keeping the API's own message."""
    message, param = _api_message(response)
    kwargs: dict[str, Any] = {
        "status_code": response.status_code,
        "request_id": response.headers.get("x-request-id"),
        "method": response.request.method,
        "url": str(response.request.url.copy_with(query=None)),
        "param": param,
        "retry_after": parse_retry_after(response.headers.get("retry-after")),
    }
    cls = _STATUS_ERRORS.get(response.status_code)
    if cls is None:
        cls = errors.ServerError if response.status_code >= 500 else errors.APIError
    return cls(message, **kwargs)


def _api_message(response: httpx.Response) -> tuple[str, str | None]:
    """The API's message and the field it blames, from whichever error shape the reply uses."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return (text[:500] or response.reason_phrase or "no message"), None
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message") or inner.get("detail") or body.get("message")
            param = inner.get("param")
            if message:
                return str(message), str(param) if param else None
        elif isinstance(inner, str):
            return inner, None
        if "detail" in body:
            return str(body["detail"]), None
    return str(body)[:500], None


def parse(model: type[ModelT], data: Any, what: str) -> ModelT:
    """``data`` as ``model``; an ``UnreadableReplyError`` naming the request when it does not fit."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise errors.UnreadableReplyError(
            f"{what}: the reply does not have the expected shape ({where}: {first['msg']})"
        ) from None


def several_made(
    kind: str, name: str, cause: object, ids: list[str | None], delete_command: str
) -> errors.AmbiguousCreateError:
    """The error of a create whose reply was lost while several ``kind``s named ``name`` appeared."""
    return errors.AmbiguousCreateError(
        f"Creating {kind} {name!r} had no readable reply ({cause}), and several {kind}s with that name "
        f"appeared: {', '.join(map(str, ids))}. Keep one with adopt_{kind}_id='<id>' and delete the others "
        f"(`{delete_command} <id>`)."
    )


def path_part(name: str, value: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"{name} must be a non-empty id without '/'; got {value!r}")
    return value


class ApiSession:
    """One key, one endpoint, one connection pool; use it as a context manager or call ``close()``.

    ``api_key`` defaults to ``TOGETHER_API_KEY`` and ``base_url`` to ``TOGETHER_BASE_URL`` (else the public
    API). ``transport`` is for tests that must not touch the network; ``sleep`` and ``rng`` make the retry
    waits observable. The names seen in the cluster listing and ``reconcile_timeout_s`` serve the creates of
    ``cluster_calls`` (one listing per burst of creates).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        reconcile_timeout_s: float = RECONCILE_TIMEOUT_S,
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng
        self._clock = time.monotonic
        self.reconcile_timeout_s = reconcile_timeout_s
        self._identity: Identity | None = None
        self._identity_lock = threading.Lock()
        self._lock = threading.Lock()
        # Per name, the ids of clusters that held it as of ``_names_seen_at`` or were made by this client.
        self._names_before: dict[str, set[str]] = {}
        self._names_seen_at: float | None = None
        key = resolve_api_key(api_key)
        self._fingerprint = hashlib.sha256(key.encode()).hexdigest()[:16]
        self._http = httpx.Client(
            base_url=self.base_url,
            auth=_BearerAuth(key),
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "together-gpu-clusters/0.1"},
            # A plain-HTTP endpoint (the emulator) never uses TLS: loading the CA bundle would cost every
            # provider process about 80 ms for nothing. Redirects are not followed, so none leads to HTTPS.
            verify=not self.base_url.startswith("http://"),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    @property
    def api_key_fingerprint(self) -> str:
        """Which key this client uses, without the key: for telling clients apart."""
        return self._fingerprint

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def whoami(self) -> Identity:
        """The endpoint and the key's project and organization (``GET /v3/whoami``), asked once per client."""
        with self._identity_lock:  # the concurrent first calls of a process wait for one reply
            if self._identity is None:
                who = parse(Whoami, self._request("GET", "/v3/whoami"), "GET /v3/whoami")
                self._identity = Identity(
                    endpoint=self.base_url,
                    project_id=who.project.id if who.project else None,
                    organization_id=who.organization.id if who.organization else None,
                )
            return self._identity

    def _request(self, method: str, path: str, attempts: int | None = None, **kwargs: Any) -> Any:
        """Send an idempotent request, retrying what may be retried."""
        max_attempts = attempts or self.retry.max_attempts
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._send_once(method, path, **kwargs)
            except errors.APIError as exc:
                if attempt >= max_attempts or not should_retry_status(method, exc.status_code):
                    raise
                self._wait(attempt, exc.retry_after, f"{method} {path}", exc.status_code)
            except errors.TransportError:
                if attempt >= max_attempts:
                    raise
                self._wait(attempt, None, f"{method} {path}", None)

    def _post_create(self, model: type[ModelT], path: str, body: dict[str, Any] | None, what: str) -> ModelT:
        """POST a create (or another action; ``body`` None: no body), retrying only a 429 (refused before it
        was looked at); any other failure may have taken effect, so the caller reconciles it rather than
        sending it again."""
        content = {} if body is None else {"json": body}
        attempt = 0
        while True:
            attempt += 1
            try:
                return parse(model, self._send_once("POST", path, **content), what)
            except errors.RateLimitError as exc:
                if attempt >= self.retry.max_attempts:
                    raise
                self._wait(attempt, exc.retry_after, what, 429)

    def _send_once(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise errors.TransportError(
                f"{method} {self.base_url}{path} timed out ({type(exc).__name__})"
            ) from None
        except httpx.TransportError as exc:
            raise errors.TransportError(f"{method} {self.base_url}{path} failed: {exc}") from None
        log.debug("%s %s -> %s", method, path, response.status_code)
        if response.is_success:
            try:
                return response.json()
            except ValueError:
                raise errors.UnreadableReplyError(
                    f"{method} {path}: HTTP {response.status_code} with a body that is not JSON "
                    f"({len(response.content)} bytes)"
                ) from None
        raise _error_from_response(response)

    def _wait(self, attempt: int, retry_after: float | None, what: str, status: int | None) -> None:
        delay = self.retry.backoff(attempt, retry_after, self._rng)
        log.info("%s: %s, retry %d in %.1fs", what, status or "connection error", attempt, delay)
        self._sleep(delay)
