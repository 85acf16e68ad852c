"""Every exception this distribution raises on purpose, in one tree (as httpx keeps its own).

    TogetherError                    the root: anything this package raises on purpose
    ├── APIError                     the API answered with an error (status, message, request id)
    │   ├── AuthenticationError      401 / 403: missing, wrong or unauthorised API key
    │   ├── NotFoundError            404: no such cluster (or not visible to this key)
    │   ├── ValidationError          400 / 422: the API refused the request body
    │   ├── ConflictError            409: e.g. a live cluster already has this name
    │   ├── RateLimitError           429: retried, then raised with the last Retry-After
    │   └── ServerError              5xx
    ├── TransportError               no usable answer: connection refused, reset, read timeout
    │   └── UnreadableReplyError     a 2xx reply whose body is not the JSON we asked for
    ├── AmbiguousCreateError         a create whose outcome could not be established; names what to check
    ├── UntrackedClusterError        a live cluster has the name a create needs, and the stack does not track it
    ├── WaitTimeoutError             our own deadline passed while waiting for a state
    ├── ProvisioningFailedError      the cluster reached a phase it will not leave (tests failed)
    ├── ConfigurationError           the package is not set up: no API key, bad base URL
    │   ├── WrongTargetError         the API endpoint or project differs from the one in the state
    │   ├── KubernetesUnreachable    a cluster's kubeconfig names an API server that cannot exist
    │   ├── MissingControllerError   a component renders a kind (a JobSet) the cluster's controllers do not serve
    │   └── FleetCredentialsError    a fleet worker's ServiceAccount token could not be read from the worker
    ├── MissingExtraError (ImportError)  a feature's optional extra is not installed; names the pip install
    ├── InputError (ValueError)      a Cluster input breaks a platform rule; raised at preview
    ├── ArgsError (ValueError)       a workload component's arguments break a rule; every violation at once
    │   └── PlacementRefused         the preemptible placement guard refuses a pod spec
    ├── DrillError                   a preemption drill could not be played
    ├── GateError                    the remediation gate refused, or its drain did not hold in time
    ├── DispatchRequestError         a request of the fleet's dispatcher to a Kubernetes API server failed
    ├── EngineError (RuntimeError)   a Pulumi operation the command line ran failed; the cause on one line
    └── TwinError (RuntimeError)     the emulator's Kubernetes twin cannot do what was asked
        ├── BinariesMissing          the twin's control plane programs are not built
        └── TwinTimeout (TimeoutError)  a control plane was not ready in time

Beside the tree, the checkpoint runtime's own errors (it installs alone, in training images, without this
module): ``CorruptCheckpoint`` (a checkpoint's manifest and files disagree), ``S3ExtraMissing``
(ImportError: S3 checkpoints without boto3) and ``CheckpointSuperseded`` (another copy of the workload holds
the checkpoint lease: this copy's saves no longer count), defined in ``together_clusters.components.checkpoint.errors``
and re-exported here.

The errors of a subpackage are importable from it too (``together_clusters.provider.NotFoundError`` is
``together_clusters.errors.NotFoundError``); this module is where they are defined and documented. A typed
error is never re-raised as a less specific one: context is added with ``raise ... from``, ``add_note``, or
:meth:`TogetherError.restate` when the context belongs in the message itself (``str()`` is the one line the
engine and the command line show; notes appear only in a traceback).

No message, ``repr`` or ``str`` of these ever contains the API key: errors carry only what the
server said and what we asked for, never request headers. This module imports only the standard library
and the checkpoint runtime's errors.
"""

from __future__ import annotations

from collections.abc import Sequence

# The runtime's errors, re-exported beside the tree (the "as" marks the re-export for linters and mypy).
from together_clusters.components.checkpoint.errors import CheckpointSuperseded as CheckpointSuperseded
from together_clusters.components.checkpoint.errors import CorruptCheckpoint as CorruptCheckpoint
from together_clusters.components.checkpoint.errors import S3ExtraMissing as S3ExtraMissing


class _ExpectedError(Exception):
    """TogetherError's base: a plain Exception here, which imports the standard library only; in a Pulumi program
    Pulumi's ``RunError`` takes its place (``together_clusters.provider.run_errors``), so the language host reports a
    refused input as its one line, without a traceback. A class of its own, not Exception itself: a base can be
    swapped only for one of the same layout, and ``RunError`` is a Python class like this one."""


class TogetherError(_ExpectedError):
    """Base of every error this distribution raises on purpose."""

    def restate(self, message: str) -> None:
        """Make ``message`` this error's whole message, keeping its type, attributes and traceback.

        For context that a user must read in ``str()`` (a cluster left running, the way out), where a
        wrapper of another type would stop ``except`` clauses of the original type from catching it.
        """
        self.args = (message,)


# --- the compute API and the Cluster resource ---------------------------------------------------


class APIError(TogetherError):
    """The API answered with an error status.

    Attributes: ``status_code``, ``message`` (the API's own words), ``request_id`` (the server's
    ``x-request-id``, quote it to support), ``method`` and ``url`` of the request, ``param`` (the
    field the API blames, when it says) and ``retry_after`` (the server's hint in seconds).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        request_id: str | None = None,
        method: str | None = None,
        url: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        self.status_code = status_code
        self.request_id = request_id
        self.method = method
        self.url = url
        self.param = param
        self.retry_after = retry_after
        self._restated: str | None = None
        super().__init__(str(self))

    def restate(self, message: str) -> None:
        self._restated = message
        super().restate(message)

    def __str__(self) -> str:
        if self._restated is not None:
            return self._restated
        where = f" {self.method} {self.url}" if self.method and self.url else ""
        request = f" (request id {self.request_id})" if self.request_id else ""
        return f"Together API error {self.status_code}{where}: {self.message}{request}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status_code={self.status_code}, message={self.message!r})"


class AuthenticationError(APIError):
    """401 or 403: the API key is missing, wrong, or may not do this."""


class NotFoundError(APIError):
    """404: the cluster does not exist, or belongs to another project."""


class ValidationError(APIError):
    """400 or 422: the API refused the request; ``param`` names the field when the API says."""


class ConflictError(APIError):
    """409: the request conflicts with current state, such as a cluster name already in use."""


class RateLimitError(APIError):
    """429 after every retry; ``retry_after`` is the server's last hint in seconds."""


class ServerError(APIError):
    """5xx after every retry."""


class TransportError(TogetherError):
    """No usable answer reached us: connection refused or reset, or a timeout."""


class UnreadableReplyError(TransportError):
    """A success status with a body we could not read (truncated, not JSON, not the expected shape).

    For a create this is an ambiguous outcome: the cluster may exist. It is reconciled, never re-sent.
    """


class AmbiguousCreateError(TogetherError):
    """A create whose outcome could not be established. The message says which name to look for."""


class UntrackedClusterError(TogetherError):
    """A create found a live cluster of the same name, in the same project, that the stack does not track.

    Most often the stack's own earlier attempt (a killed ``pulumi up``, a create whose reply was lost while
    the listing lagged). Nothing was created; the message gives the cluster's id and age and how to take it
    into the stack. Attributes: ``cluster_id``, ``cluster_name``.
    """

    def __init__(self, message: str, *, cluster_id: str, cluster_name: str) -> None:
        self.cluster_id = cluster_id
        self.cluster_name = cluster_name
        super().__init__(message)


class WaitTimeoutError(TogetherError):
    """A wait for a cluster state passed its deadline."""


class ProvisioningFailedError(TogetherError):
    """The cluster reached a failed phase (acceptance or NCCL tests) and will not become Ready."""


class ConfigurationError(TogetherError):
    """The package is not configured: no API key, or an unusable base URL."""


class WrongTargetError(ConfigurationError):
    """The API endpoint or the key's project is not the one the cluster was created with.

    Raised instead of reading a 404 from the wrong place as "deleted".
    """


class KubernetesUnreachable(ConfigurationError):
    """A cluster's kubeconfig names an API server on a host that never resolves (the ``.invalid`` top-level
    domain, RFC 6761): the emulator's placeholder when it runs without its Kubernetes twin. Raised before
    the Kubernetes provider gets it, with the two ways out."""


class MissingControllerError(ConfigurationError):
    """A component renders a kind the cluster does not serve (a JobSet on a cluster without JobSet), and the
    stack installs no controller for it. Raised at preview when the cluster can be asked, naming the
    component (``owner``), what it needs (``controller``, ``crd``) and how to add it."""

    def __init__(self, owner: str, controller: str, crd: str, fix: str) -> None:
        self.owner = owner
        self.controller = controller
        self.crd = crd
        super().__init__(f"{owner} needs {controller} ({crd} is not served by the cluster): {fix}")


class FleetCredentialsError(ConfigurationError):
    """A FleetQueue could not read the token of the manager's ServiceAccount on a worker (the worker's API
    server did not answer, or did not fill the token Secret in time). The message names the worker, the
    Secret and why; never a credential."""


class InputError(TogetherError, ValueError):
    """A resource input breaks a platform rule. Raised at preview, before anything is spent.

    ``field`` and ``value`` name the offending input; the message says how to fix it.
    """

    def __init__(self, field: str, value: object, message: str) -> None:
        self.field = field
        self.value = value
        super().__init__(message)


class MissingExtraError(TogetherError, ImportError):
    """A feature needs an optional extra that is not installed (raised where the feature is first used).

    ``feature`` names what was asked for, ``extra`` the extra that brings it, ``distribution`` the installed
    distribution that declares the extra, ``name`` (as for any ImportError) the module that is missing. The
    message is one line ending in the command that fixes it: ``pip install '<distribution>[<extra>]'``.
    """

    def __init__(self, feature: str, extra: str, distribution: str, module: str | None) -> None:
        self.feature = feature
        self.extra = extra
        self.distribution = distribution
        missing = f" ({module} is not installed)" if module else ""
        super().__init__(f"{feature} needs the '{extra}' extra{missing}: {self.install_command}", name=module)

    @property
    def install_command(self) -> str:
        """The command that installs the missing extra."""
        return f"pip install '{self.distribution}[{self.extra}]'"


# --- workload components ------------------------------------------------------------------------


class ArgsError(TogetherError, ValueError):
    """A workload component's arguments break a rule. Raised at construction, so at preview.

    ``owner`` names the component; ``violations`` holds every problem found (each printable on one line,
    naming the field, the value and the fix), not only the first. A ``ValueError`` too, as it always was.
    """

    def __init__(self, owner: str, violations: Sequence[object], *, headline: str | None = None) -> None:
        self.owner = owner
        self.violations = tuple(violations)
        if headline is None and len(self.violations) == 1:
            # The violation first: it starts with the argument at fault, the owner only says where.
            super().__init__(f"{self.violations[0]} ({owner})")
            return
        lines = "\n".join(f"  - {v}" for v in self.violations)
        super().__init__(f"{headline or f'{owner}: invalid arguments'}:\n{lines}")


class PlacementRefused(ArgsError):
    """The preemptible placement guard refuses a workload's pod spec (at construction, so at preview)."""

    def __init__(self, owner: str, violations: Sequence[object]) -> None:
        super().__init__(owner, violations, headline=f"{owner} refused by the preemptible placement guard")


# --- the command line ---------------------------------------------------------------------------


class DrillError(TogetherError):
    """The drill could not be played (no preemptible node, an unknown node, the emulator refused)."""


class GateError(TogetherError):
    """The remediation gate refused (the remediation does not await approval, is not the cluster's) or its
    drain did not hold within its timeout (the node stays cordoned and the remediation pending)."""


class DispatchRequestError(TogetherError):
    """A request of the fleet's dispatcher (a FleetQueue's pod on the manager) to a Kubernetes API server was
    refused or not answered: ``status`` is the HTTP status, 0 when the server did not answer. The message is
    the server's own, never a token. The dispatcher logs it and tries again at its next pass."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}" if status else message)
        self.status = status


class EngineError(TogetherError, RuntimeError):
    """A Pulumi operation failed; the message is the cause, on one line."""


# --- the emulator's Kubernetes twin -------------------------------------------------------------


class TwinError(TogetherError, RuntimeError):
    """The Kubernetes twin could not do what was asked (start a control plane, reach it in time)."""


class BinariesMissing(TwinError):
    """The control plane programs are not built."""


class TwinTimeout(TwinError, TimeoutError):
    """A wait for the twin (a cluster's control plane to be ready) passed its deadline.

    A ``TimeoutError`` too, as it was before the twin's errors joined this tree.
    """
