"""An httpx client for Together's GPU cluster API: auth, timeouts, retries, error mapping.

Nothing here knows about Pulumi. One ``TogetherClient`` holds one connection pool; use it as a
context manager or call ``close()``.

Retries: GET, PUT and DELETE are retried on 429/502/503/504 and on connection errors, with
exponential backoff and jitter, honouring ``Retry-After``. The POST that creates a cluster is
never sent again blindly: after an ambiguous failure (no reply, or a 5xx) the client lists the
project's clusters and adopts the one with the requested ``cluster_name`` that was not there
before; only when the listing proves the create did not happen is the POST sent again.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Generator
from typing import Any

import httpx

from . import errors
from .models import (
    Cluster,
    ClusterCreateRequest,
    ClusterDeleteResponse,
    ClusterList,
    ClusterUpdateRequest,
    Region,
    RegionList,
)
from .retry import RetryPolicy, parse_retry_after, should_retry_status

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.together.ai"
API_KEY_ENV = "TOGETHER_API_KEY"
BASE_URL_ENV = "TOGETHER_BASE_URL"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)

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


class TogetherClient:
    """Client for ``/v1/compute/clusters`` and ``/v1/compute/regions``.

    ``api_key`` defaults to ``TOGETHER_API_KEY`` and ``base_url`` to ``TOGETHER_BASE_URL`` (else
    the public API). ``transport`` is for tests that must not touch the network; ``sleep`` and
    ``rng`` make the retry waits observable.
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
    ) -> None:
        self.base_url = resolve_base_url(base_url)
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng
        self._http = httpx.Client(
            base_url=self.base_url,
            auth=_BearerAuth(resolve_api_key(api_key)),
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "together-gpu-clusters/0.1"},
        )

    def __repr__(self) -> str:
        return f"TogetherClient(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TogetherClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- public API ---------------------------------------------------------------------------

    def list_regions(self) -> list[Region]:
        """Regions with the GPU types and driver versions they offer."""
        return RegionList.model_validate(self._request("GET", "/v1/compute/regions")).regions

    def list_clusters(self, project_id: str | None = None) -> list[Cluster]:
        """Every cluster the key can see, optionally only one project's."""
        params = {"projectId": project_id} if project_id else None
        return ClusterList.model_validate(
            self._request("GET", "/v1/compute/clusters", params=params)
        ).clusters

    def get_cluster(self, cluster_id: str) -> Cluster:
        """One cluster; ``NotFoundError`` when it does not exist (any more)."""
        return Cluster.model_validate(self._request("GET", _cluster_path(cluster_id)))

    def update_cluster(self, cluster_id: str, request: ClusterUpdateRequest) -> Cluster:
        """PUT only the fields being changed; the rest keep their current values."""
        return Cluster.model_validate(self._request("PUT", _cluster_path(cluster_id), json=request.to_json()))

    def delete_cluster(self, cluster_id: str) -> ClusterDeleteResponse:
        """Ask for deletion; the cluster passes through ``Deleting`` before it is gone."""
        return ClusterDeleteResponse.model_validate(self._request("DELETE", _cluster_path(cluster_id)))

    def create_cluster(self, request: ClusterCreateRequest) -> Cluster:
        """Create a cluster, exactly once, even when a reply is lost.

        Clusters that already carry the name are noted first, so reconciliation after an
        ambiguous failure adopts only the cluster this call made.
        """
        before = {c.cluster_id for c in self.list_clusters() if c.cluster_name == request.cluster_name}
        body = request.to_json()
        attempt = 0
        while True:
            attempt += 1
            try:
                return Cluster.model_validate(self._send_once("POST", "/v1/compute/clusters", json=body))
            except errors.RateLimitError as exc:
                # A 429 is a refusal before any work: safe to send again after the wait.
                if attempt >= self.retry.max_attempts:
                    raise
                self._wait(attempt, exc.retry_after, "POST /v1/compute/clusters", 429)
                continue
            except (errors.ServerError, errors.TransportError) as exc:
                made = self._find_created(request.cluster_name, before)
                if made is not None:
                    log.info(
                        "create of %r: reply lost, adopted cluster %s", request.cluster_name, made.cluster_id
                    )
                    return made
                if attempt >= self.retry.max_attempts:
                    raise
                status = getattr(exc, "status_code", None)
                self._wait(attempt, getattr(exc, "retry_after", None), "POST /v1/compute/clusters", status)

    # --- internals ----------------------------------------------------------------------------

    def _find_created(self, cluster_name: str, before: set[str]) -> Cluster | None:
        """The cluster named ``cluster_name`` that did not exist before this create, if any."""
        for cluster in self.list_clusters():
            if cluster.cluster_name == cluster_name and cluster.cluster_id not in before:
                return cluster
        return None

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send an idempotent request, retrying what may be retried."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._send_once(method, path, **kwargs)
            except errors.APIError as exc:
                if attempt >= self.retry.max_attempts or not should_retry_status(method, exc.status_code):
                    raise
                self._wait(attempt, exc.retry_after, f"{method} {path}", exc.status_code)
            except errors.TransportError:
                if attempt >= self.retry.max_attempts:
                    raise
                self._wait(attempt, None, f"{method} {path}", None)

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
            return response.json()
        raise _error_from_response(response)

    def _wait(self, attempt: int, retry_after: float | None, what: str, status: int | None) -> None:
        delay = self.retry.backoff(attempt, retry_after, self._rng)
        log.info("%s: %s, retry %d in %.1fs", what, status or "connection error", attempt, delay)
        self._sleep(delay)


def _cluster_path(cluster_id: str) -> str:
    if not cluster_id or "/" in cluster_id:
        raise ValueError(f"cluster_id must be a non-empty id without '/'; got {cluster_id!r}")
    return f"/v1/compute/clusters/{cluster_id}"
