"""An httpx client for Together's GPU cluster API: auth, timeouts, retries, error mapping.

Nothing here knows about Pulumi. One ``TogetherClient`` holds one connection pool; use it as a
context manager or call ``close()``.

Retries: GET, PUT and DELETE are retried on 429/502/503/504 and on connection errors, with
exponential backoff and jitter, honouring ``Retry-After``. The POST that creates a cluster is
sent again only after a 429 (a refusal before any work). After an ambiguous failure (no reply,
a 5xx, a 2xx we cannot read) it is never sent again: the client lists the clusters, retrying
until the cluster with the requested name shows up or a deadline passes, and returns it.

Replies are read as leniently as the official SDK reads them (see ``models``); a reply that is
still unreadable is an ``UnreadableReplyError``, never a raw decode or validation error.
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
from typing import Any, TypeVar

import httpx
import pydantic

from . import errors
from .environment import API_KEY_ENV, BASE_URL_ENV
from .models import (
    Cluster,
    ClusterCreateRequest,
    ClusterDeleteResponse,
    ClusterList,
    ClusterStorage,
    ClusterUpdateRequest,
    Region,
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
    Whoami,
)
from .retry import RetryPolicy, parse_retry_after, should_retry_status
from .vocabulary import ACTIVE_REMEDIATION_STATES as ACTIVE_REMEDIATION_STATES
from .vocabulary import RemediationMode, RemediationState, RemediationTrigger

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.together.ai"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# How long a create with an ambiguous outcome keeps looking for its cluster in the listing, which may lag.
RECONCILE_TIMEOUT_S = 90.0
# How long the names seen in one listing count as "held before" a create: one listing serves the
# creates of a burst (a `pulumi up`), not one per create.
NAMES_SNAPSHOT_TTL_S = 30.0

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


class TogetherClient:
    """Client for ``/v1/compute/clusters`` (with its shared volumes and node remediations) and
    ``/v1/compute/regions``.

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
        return f"TogetherClient(base_url={self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    @property
    def api_key_fingerprint(self) -> str:
        """Which key this client uses, without the key: for telling clients apart."""
        return self._fingerprint

    def __enter__(self) -> TogetherClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- public API ---------------------------------------------------------------------------

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

    def list_regions(self, *, attempts: int | None = None, timeout_s: float | None = None) -> list[Region]:
        """Regions with the GPU types and driver versions they offer."""
        options: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
        reply = self._request("GET", "/v1/compute/regions", attempts=attempts, **options)
        return parse(RegionList, reply, "GET /v1/compute/regions").regions

    def list_clusters(self, project_id: str | None = None) -> list[Cluster]:
        """Every cluster the key can see, optionally only one project's."""
        params = {"projectId": project_id} if project_id else None
        reply = self._request("GET", "/v1/compute/clusters", params=params)
        return parse(ClusterList, reply, "GET /v1/compute/clusters").clusters

    def get_cluster(self, cluster_id: str, *, attempts: int | None = None) -> Cluster:
        """One cluster; ``NotFoundError`` when it does not exist (any more).

        ``attempts=1`` is for polls, which have their own pace and deadline.
        """
        path = _cluster_path(cluster_id)
        reply = parse(Cluster, self._request("GET", path, attempts=attempts), f"GET {path}")
        return _the_cluster(cluster_id, reply, f"GET {path}")

    def update_cluster(self, cluster_id: str, request: ClusterUpdateRequest) -> Cluster:
        """PUT only the fields being changed; the rest keep their current values."""
        path = _cluster_path(cluster_id)
        reply = parse(Cluster, self._request("PUT", path, json=request.to_json()), f"PUT {path}")
        return _the_cluster(cluster_id, reply, f"PUT {path}")

    def delete_cluster(self, cluster_id: str) -> ClusterDeleteResponse:
        """Ask for deletion; the cluster passes through ``Deleting`` before it is gone."""
        path = _cluster_path(cluster_id)
        return parse(ClusterDeleteResponse, self._request("DELETE", path), f"DELETE {path}")

    def create_cluster(
        self, request: ClusterCreateRequest, reconcile_timeout_s: float | None = None
    ) -> Cluster:
        """Create a cluster exactly once, and return it even when the reply is lost or unreadable.

        The POST is re-sent only after a 429. After an ambiguous failure the cluster is found by
        name in the listing (``reconcile``). A 409 for a name that no cluster held before this
        client's first create of it is this call's own cluster (a retry by something on the way).
        """
        name = request.cluster_name
        before = self._holders_before(name)
        made = self._create_once(request, before, reconcile_timeout_s or self.reconcile_timeout_s)
        with self._lock:
            self._names_before.setdefault(name, set()).add(str(made.cluster_id))
        return made

    def _create_once(
        self, request: ClusterCreateRequest, before: set[str], reconcile_timeout_s: float
    ) -> Cluster:
        name = request.cluster_name
        body = request.to_json()
        what = "POST /v1/compute/clusters"
        try:
            created = self._post_create(Cluster, "/v1/compute/clusters", body, what)
            if not created.cluster_id:
                raise errors.UnreadableReplyError(f"{what}: the reply has no cluster_id")
            return created
        except errors.ConflictError:
            holders = [c for c in self._list_named(name) if c.cluster_id not in before]
            if len(holders) == 1:
                log.info("create of %r: 409 for a name free before; it is this call's", name)
                return holders[0]
            raise
        except (errors.ServerError, errors.TransportError) as exc:
            log.info("create of %r: outcome unknown (%s); reconciling by name", name, exc)
            return self.reconcile(name, before, exc, reconcile_timeout_s)

    def reconcile(self, name: str, before: set[str], cause: Exception, timeout_s: float) -> Cluster:
        """The cluster named ``name`` made by a create whose reply was lost.

        The listing may lag behind the create, so it is asked again until the cluster shows up
        or ``timeout_s`` passes. Clusters that held the name before (``before``) are not it.
        """
        waited, delay = 0.0, 0.5
        while True:
            try:
                made = [c for c in self._list_named(name) if c.cluster_id not in before]
            except (errors.ServerError, errors.RateLimitError, errors.TransportError):
                made = []
            if len(made) > 1:
                raise _several_made(
                    "cluster", name, cause, [c.cluster_id for c in made], "tg clusters delete"
                )
            if made:
                return made[0]
            if waited >= timeout_s:
                raise errors.AmbiguousCreateError(
                    f"Creating cluster {name!r} had no readable reply ({cause}), and no cluster with that "
                    f"name appeared in the listing within {timeout_s:.0f}s; the listing may lag behind the "
                    "create. Check with `tg clusters list`, or run `pulumi up` again: it looks for a cluster of that name before it creates, and "
                    "if it finds one it says how to take it into the stack instead of making a second."
                )
            step = min(delay, timeout_s - waited)
            self._sleep(step)
            waited += step
            delay = min(delay * 1.5, 5.0)

    # --- shared volumes -----------------------------------------------------------------------

    def list_volumes(self, project_id: str | None = None) -> list[ClusterStorage]:
        """Every shared volume the key can see, optionally only one project's."""
        params = {"projectId": project_id} if project_id else None
        reply = self._request("GET", VOLUMES_PATH, params=params)
        return parse(StorageList, reply, f"GET {VOLUMES_PATH}").volumes

    def get_volume(self, volume_id: str) -> ClusterStorage:
        """One volume; ``NotFoundError`` when it does not exist (any more)."""
        path = _volume_path(volume_id)
        reply = parse(ClusterStorage, self._request("GET", path), f"GET {path}")
        return _the_volume(volume_id, reply, f"GET {path}")

    def resize_volume(self, volume_id: str, size_tib: int) -> ClusterStorage:
        """Grow a volume to ``size_tib`` (the API refuses a shrink)."""
        body = StorageUpdateRequest(volume_id=volume_id, size_tib=size_tib).to_json()
        reply = parse(ClusterStorage, self._request("PUT", VOLUMES_PATH, json=body), f"PUT {VOLUMES_PATH}")
        return _the_volume(volume_id, reply, f"PUT {VOLUMES_PATH}")

    def delete_volume(self, volume_id: str) -> StorageDeleteResponse:
        """Delete a volume; the API refuses (409) while a cluster uses it."""
        path = _volume_path(volume_id)
        return parse(StorageDeleteResponse, self._request("DELETE", path), f"DELETE {path}")

    def create_volume(self, request: StorageCreateRequest) -> ClusterStorage:
        """Create a volume exactly once: after a reply lost on the way, the new volume of that name is it."""
        what = f"POST {VOLUMES_PATH}"
        name = request.volume_name
        before = {v.volume_id for v in self.list_volumes() if v.volume_name == name}
        try:
            created = self._post_create(ClusterStorage, VOLUMES_PATH, request.to_json(), what)
            if not created.volume_id:
                raise errors.UnreadableReplyError(f"{what}: the reply has no volume_id")
            return created
        except (errors.ServerError, errors.TransportError, errors.UnreadableReplyError) as exc:
            made = [v for v in self.list_volumes() if v.volume_name == name and v.volume_id not in before]
            if len(made) == 1:
                log.info("create of volume %r: outcome unknown (%s); found it by name", name, exc)
                return made[0]
            if len(made) > 1:
                ids = [v.volume_id for v in made]
                raise _several_made("volume", name, exc, ids, "tg clusters storage delete") from exc
            raise

    # --- node remediations -------------------------------------------------------------------

    def create_remediation(
        self, cluster_id: str, instance_id: str, mode: RemediationMode, reason: str | None = None
    ) -> Remediation:
        """Ask for a remediation of one instance; the API starts it PENDING.

        Sent once (again only after a 429). After an ambiguous failure (no reply, a 5xx, a reply we cannot
        read) the instance's active manual remediation in that mode is this call's: an instance has at most
        one active remediation, so one there before would have made this create a 409.
        """
        path = _remediations_path(cluster_id, instance_id)
        what = f"POST {path}"
        body = RemediationCreateRequest(mode=mode, reason=reason).to_json()
        try:
            made = self._post_create(Remediation, path, body, what)
        except (errors.ServerError, errors.TransportError, errors.UnreadableReplyError) as exc:
            active = [
                r
                for r in self.list_remediations(
                    cluster_id, instance_id, states=list(ACTIVE_REMEDIATION_STATES)
                )
                if r.trigger == "REMEDIATION_TRIGGER_MANUAL" and r.mode == mode
            ]
            if len(active) != 1:
                raise
            log.info(
                "remediation of %s: outcome unknown (%s); found it among the active ones", instance_id, exc
            )
            return active[0]
        if not made.id:
            raise errors.UnreadableReplyError(f"{what}: the reply has no id")
        return made

    def list_remediations(
        self,
        cluster_id: str,
        instance_id: str = "-",
        *,
        states: list[RemediationState] | None = None,
        modes: list[RemediationMode] | None = None,
        triggers: list[RemediationTrigger] | None = None,
        page_size: int = 100,
    ) -> list[Remediation]:
        """Every remediation of an instance (``"-"``: of every instance of the cluster) matching any of the
        ``states``, ``modes`` and ``triggers`` given, following the pages' ``next_page_token``."""
        found: list[Remediation] = []
        token: str | None = None
        tokens: set[str] = set()
        while True:
            page = self.list_remediations_page(
                cluster_id,
                instance_id,
                states=states,
                modes=modes,
                triggers=triggers,
                page_size=page_size,
                page_token=token,
            )
            found += page.remediations
            if not page.has_next or not page.next_page_token:
                return found
            if page.next_page_token in tokens:
                raise errors.UnreadableReplyError(
                    f"GET {_remediations_path(cluster_id, instance_id)}: the listing gave the page token "
                    f"{page.next_page_token!r} twice"
                )
            tokens.add(page.next_page_token)
            token = page.next_page_token

    def list_remediations_page(
        self,
        cluster_id: str,
        instance_id: str = "-",
        *,
        states: list[RemediationState] | None = None,
        modes: list[RemediationMode] | None = None,
        triggers: list[RemediationTrigger] | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> RemediationList:
        """One page of the listing; filters are sent as the official SDK sends them (comma-separated)."""
        path = _remediations_path(cluster_id, instance_id)
        params: dict[str, str | int] = {}
        for name, values in (("state", states), ("mode", modes), ("trigger", triggers)):
            if values:
                params[name] = ",".join(values)
        if page_size is not None:
            params["page_size"] = page_size
        if page_token:
            params["page_token"] = page_token
        return parse(RemediationList, self._request("GET", path, params=params or None), f"GET {path}")

    def get_remediation(self, cluster_id: str, instance_id: str, remediation_id: str) -> Remediation:
        """One remediation of one instance; ``NotFoundError`` when there is none."""
        path = _remediation_path(cluster_id, instance_id, remediation_id)
        return _the_remediation(
            remediation_id, parse(Remediation, self._request("GET", path), f"GET {path}"), f"GET {path}"
        )

    def approve_remediation(
        self,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        comment: str | None = None,
        mode: RemediationMode | None = None,
    ) -> Remediation:
        """Approve a remediation awaiting approval (``ConflictError`` otherwise), perhaps in another ``mode``
        (the API refuses ``REMEDIATION_MODE_HOST_POWER_CYCLE`` here: ``ValidationError``)."""
        body = RemediationApproveRequest(comment=comment, mode=mode).to_json()
        return self._review(
            cluster_id,
            instance_id,
            remediation_id,
            "approve",
            body,
            done=lambda r: r.review_time is not None and r.state not in ("PENDING_APPROVAL", "CANCELLED"),
        )

    def reject_remediation(
        self, cluster_id: str, instance_id: str, remediation_id: str, comment: str | None = None
    ) -> Remediation:
        """Reject a remediation awaiting approval (``ConflictError`` otherwise): it ends CANCELLED."""
        body = RemediationRejectRequest(comment=comment).to_json()
        return self._review(
            cluster_id,
            instance_id,
            remediation_id,
            "reject",
            body,
            done=lambda r: r.review_time is not None and r.state == "CANCELLED",
        )

    def cancel_remediation(self, cluster_id: str, instance_id: str, remediation_id: str) -> Remediation:
        """Cancel a remediation in PENDING_APPROVAL or PENDING (``ConflictError`` in any other state)."""
        return self._review(
            cluster_id, instance_id, remediation_id, "cancel", None, done=lambda r: r.state == "CANCELLED"
        )

    def _review(
        self,
        cluster_id: str,
        instance_id: str,
        remediation_id: str,
        action: str,
        body: dict[str, Any] | None,
        done: Callable[[Remediation], bool],
    ) -> Remediation:
        """POST an action on a remediation once (again only after a 429). After an ambiguous failure the
        remediation is read back: if the action shows (``done``), that is the answer; otherwise the failure."""
        path = f"{_remediation_path(cluster_id, instance_id, remediation_id)}/{action}"
        what = f"POST {path}"
        try:
            reply = self._post_create(Remediation, path, body, what)
        except (errors.ServerError, errors.TransportError, errors.UnreadableReplyError) as exc:
            try:
                now = self.get_remediation(cluster_id, instance_id, remediation_id)
            except (errors.APIError, errors.TransportError, errors.UnreadableReplyError):
                raise exc from None
            if not done(now):
                raise
            log.info("%s of remediation %s: outcome unknown (%s); it shows done", action, remediation_id, exc)
            return now
        return _the_remediation(remediation_id, reply, what)

    def holders_of(self, name: str) -> set[str]:
        """Ids of the clusters that held ``name`` as of this process's listing of names (shared by the
        creates of a burst), plus the clusters this client made: some may be gone or going since."""
        return self._holders_before(name)

    # --- internals ----------------------------------------------------------------------------

    def _list_named(self, name: str) -> list[Cluster]:
        """The live clusters (not being deleted) that carry ``name``."""
        return [c for c in self.list_clusters() if c.cluster_name == name and c.status != "Deleting"]

    def _holders_before(self, name: str) -> set[str]:
        """Ids of clusters named ``name`` before this create: from one listing shared by the creates
        of a burst (renewed after ``NAMES_SNAPSHOT_TTL_S``), plus the clusters this client made."""
        with self._lock:
            now = self._clock()
            if self._names_seen_at is None or now - self._names_seen_at > NAMES_SNAPSHOT_TTL_S:
                snapshot: dict[str, set[str]] = {}
                for cluster in self.list_clusters():
                    if cluster.cluster_name and cluster.cluster_id:
                        snapshot.setdefault(cluster.cluster_name, set()).add(cluster.cluster_id)
                self._names_before, self._names_seen_at = snapshot, now
            return set(self._names_before.get(name, set()))

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


def _several_made(
    kind: str, name: str, cause: object, ids: list[str | None], delete_command: str
) -> errors.AmbiguousCreateError:
    """The error of a create whose reply was lost while several ``kind``s named ``name`` appeared."""
    return errors.AmbiguousCreateError(
        f"Creating {kind} {name!r} had no readable reply ({cause}), and several {kind}s with that name "
        f"appeared: {', '.join(map(str, ids))}. Keep one with adopt_{kind}_id='<id>' and delete the others "
        f"(`{delete_command} <id>`)."
    )


def _the_cluster(cluster_id: str, cluster: Cluster, what: str) -> Cluster:
    """``cluster`` if it is the one asked for: lenient parsing must not pass off another reply as it."""
    if cluster.cluster_id != cluster_id:
        raise errors.UnreadableReplyError(
            f"{what}: the reply is not cluster {cluster_id} (its cluster_id is {cluster.cluster_id!r})"
        )
    return cluster


VOLUMES_PATH = "/v1/compute/clusters/storage/volumes"


def _the_remediation(remediation_id: str, remediation: Remediation, what: str) -> Remediation:
    """``remediation`` if it is the one asked for."""
    if remediation.id != remediation_id:
        raise errors.UnreadableReplyError(
            f"{what}: the reply is not remediation {remediation_id} (its id is {remediation.id!r})"
        )
    return remediation


def _path_part(name: str, value: str) -> str:
    if not value or "/" in value:
        raise ValueError(f"{name} must be a non-empty id without '/'; got {value!r}")
    return value


def _remediations_path(cluster_id: str, instance_id: str) -> str:
    """``.../instances/{instance_id}/remediations``; ``instance_id`` ``"-"`` means every instance (listing)."""
    return f"{_cluster_path(cluster_id)}/instances/{_path_part('instance_id', instance_id)}/remediations"


def _remediation_path(cluster_id: str, instance_id: str, remediation_id: str) -> str:
    return f"{_remediations_path(cluster_id, instance_id)}/{_path_part('remediation_id', remediation_id)}"


def _the_volume(volume_id: str, volume: ClusterStorage, what: str) -> ClusterStorage:
    """``volume`` if it is the one asked for."""
    if volume.volume_id != volume_id:
        raise errors.UnreadableReplyError(
            f"{what}: the reply is not volume {volume_id} (its volume_id is {volume.volume_id!r})"
        )
    return volume


def _volume_path(volume_id: str) -> str:
    if not volume_id or "/" in volume_id:
        raise ValueError(f"volume_id must be a non-empty id without '/'; got {volume_id!r}")
    return f"{VOLUMES_PATH}/{volume_id}"


def _cluster_path(cluster_id: str) -> str:
    if not cluster_id or "/" in cluster_id:
        raise ValueError(f"cluster_id must be a non-empty id without '/'; got {cluster_id!r}")
    return f"/v1/compute/clusters/{cluster_id}"
