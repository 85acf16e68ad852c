"""The ``Cluster`` Pulumi resource and its dynamic provider: glue between the engine, the rules and
the client.

Stability promise: the engine pickles ``ClusterProvider`` into the state by reference, as
``together_clusters.provider.resource.ClusterProvider``, and records the type
``pulumi-python:dynamic/together_clusters:Cluster``. Both names changed once, before the first release,
when the distribution moved into one import namespace; from then on they stay as they are in every
release, so state written today still refreshes and destroys later. The provider object carries no attributes: the API key is read per call.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)

from . import lifecycle, settings
from .client import Identity, TogetherClient
from .errors import InputError, NotFoundError, TogetherError, WrongTargetError
from .mapping import create_request, live_outputs, read_inputs, update_request
from .models import Cluster as ApiCluster
from .models import Region
from .rules import (
    catalog_fields_to_check,
    default_driver,
    has_driver_selector,
    is_unknown,
    missing_driver_failure,
    plan_change,
    validate,
    validate_against_catalog,
)
from .schema import FIELDS, OUTPUT_NAMES, RESOURCE_MODULE, RESOURCE_NAME, SECRET_OUTPUTS, with_defaults

# Set by ``check`` on the inputs of a resource whose adoption already happened: a later replacement
# creates a new cluster instead of adopting the one it has just deleted.
ADOPTION_DONE = "adoption_done"
# The preview-time catalog lookup: one try, bounded, made once per provider process.
CATALOG_TIMEOUT_S = 2.0


def _inputs_of(props: dict[str, Any]) -> dict[str, Any]:
    """The resource inputs in ``props`` (which may also hold outputs and ``__provider``)."""
    return {k: _whole_numbers(v) for k, v in props.items() if k in FIELDS and v is not None}


def _whole_numbers(value: Any) -> Any:
    """The engine's wire format has one number type, so ``8`` arrives as ``8.0``: make it ``8`` again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def _state(inputs: dict[str, Any], cluster: ApiCluster, identity: Identity) -> dict[str, Any]:
    return {
        **{k: v for k, v in with_defaults(inputs).items() if v is not None},
        **live_outputs(cluster),
        "api_endpoint": identity.endpoint,
        "api_project_id": identity.project_id,
        "api_organization_id": identity.organization_id,
    }


def _timeout_s(inputs: dict[str, Any]) -> float:
    return float(with_defaults(inputs)["ready_timeout_minutes"]) * 60


_catalogs: dict[tuple[str, str], list[Region]] = {}
_catalog_lock = threading.Lock()


def _region_catalog() -> list[Region]:
    """What the API offers, for checks at preview; empty (checks skipped) when it cannot be asked now.

    One bounded try, once per provider process (every resource of a preview shares it): the API
    validates the same choices again at create, so an unreachable API must not slow a preview down.
    """
    try:
        client = settings.connect()
    except TogetherError:
        return []
    key = (client.base_url, client.api_key_fingerprint)
    with _catalog_lock:
        if key not in _catalogs:
            try:
                _catalogs[key] = client.list_regions(attempts=1, timeout_s=CATALOG_TIMEOUT_S)
            except TogetherError:
                _catalogs[key] = []
        return _catalogs[key]


def forget_catalog() -> None:
    """Drop the cached catalog, as a new provider process would (for tests)."""
    with _catalog_lock:
        _catalogs.clear()


def _identity(client: TogetherClient) -> Identity:
    """Where this client points; an API without ``whoami`` gives the endpoint alone."""
    try:
        return client.whoami()
    except NotFoundError:
        return Identity(endpoint=client.base_url, project_id=None, organization_id=None)


def _check_target(client: TogetherClient, props: dict[str, Any], cluster_id: str) -> Identity:
    """Refuse to touch a cluster through another endpoint or project than the one it was created in.

    A state written before identities were recorded has none: it is taken as it is, and recorded.
    """
    here = _identity(client)
    recorded = {
        "endpoint": props.get("api_endpoint"),
        "project": props.get("api_project_id"),
        "organization": props.get("api_organization_id"),
    }
    current = {"endpoint": here.endpoint, "project": here.project_id, "organization": here.organization_id}
    wrong = [k for k, v in recorded.items() if v and v != current[k]]
    if wrong:
        said = "; ".join(f"{k} recorded {recorded[k]!r}, now {current[k]!r}" for k in wrong)
        raise WrongTargetError(
            f"cluster {cluster_id} was created through another API {' and '.join(wrong)} than the one "
            f"configured now ({said}). Nothing was read or changed. Point TOGETHER_BASE_URL / "
            "together:baseUrl and the API key back at the recorded endpoint and project, then run again."
        )
    return here


class ClusterProvider(ResourceProvider):
    """CRUD for Together GPU clusters. Holds no state of its own (it is pickled into the stack)."""

    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        settings.take_stack_config(req.config)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs: dict[str, Any] = {k: v for k, v in with_defaults(_inputs_of(news)).items() if v is not None}
        failures = validate(inputs)
        old_inputs = _inputs_of(olds)
        replaces = False
        if old_inputs and not failures:
            plan = plan_change(old_inputs, inputs)
            failures += plan.refusals
            replaces = bool(plan.replace)
        adopting = inputs.get("adopt_cluster_id")
        if adopting is not None and old_inputs and adopting == old_inputs.get("adopt_cluster_id"):
            # ``olds`` are the resource's previous inputs: it exists, and this adoption already happened.
            inputs[ADOPTION_DONE] = True
        new_cluster = not old_inputs or replaces
        needs_driver = (
            new_cluster
            and adopting is None
            and not has_driver_selector(inputs)
            and not is_unknown(inputs.get("region"))
        )
        fields = catalog_fields_to_check(old_inputs, inputs)
        if not failures and (fields or needs_driver):
            catalog = _region_catalog()
            failures += validate_against_catalog(inputs, catalog, fields)
            if needs_driver and not failures:
                driver = default_driver(catalog, inputs.get("region"))
                if driver is None:
                    failures.append(missing_driver_failure(inputs.get("region")))
                else:
                    inputs["nvidia_version_id"] = driver.id
                    lifecycle.report(
                        f"{inputs.get('cluster_name')}: no driver chosen; using the region's newest, "
                        f"nvidia_version_id={driver.id!r} (CUDA {driver.cuda_version}, driver "
                        f"{driver.nvidia_driver_version}). Set nvidia_version_id to choose."
                    )
        return CheckResult(inputs, [CheckFailure(f.field, f.message) for f in failures])

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        plan = plan_change(olds, _inputs_of(news))
        return DiffResult(
            changes=plan.changed,
            replaces=plan.replace,
            delete_before_replace=plan.delete_before_replace,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = _inputs_of(props)
        client = settings.connect()
        identity = _identity(client)
        if inputs.get("adopt_cluster_id") and not props.get(ADOPTION_DONE):
            cluster = self._adopt(client, inputs)
        else:
            cluster = lifecycle.create_or_explain_conflict(client, create_request(inputs))
            cluster_id = str(cluster.cluster_id)
            lifecycle.report(f"cluster {cluster_id} ({cluster.cluster_name}) accepted; provisioning")
            try:
                cluster = lifecycle.wait_ready(client, cluster_id, _timeout_s(inputs))
            except Exception as exc:
                raise lifecycle.cleanup_failed_create(client, cluster_id, exc) from exc
        return CreateResult(str(cluster.cluster_id), _state(inputs, cluster, identity))

    def _adopt(self, client: TogetherClient, inputs: dict[str, Any]) -> ApiCluster:
        """Take an existing cluster into the stack, then make it match the code in place."""
        cluster_id = inputs["adopt_cluster_id"]
        try:
            cluster = client.get_cluster(cluster_id)
        except NotFoundError:
            cluster = None
        if cluster is None or cluster.status == "Deleting":
            raise InputError(
                "adopt_cluster_id",
                cluster_id,
                f"adopt_cluster_id {cluster_id!r}: no such live cluster for this API key.",
            )
        live = read_inputs(cluster, inputs, immutable=True)
        plan = plan_change(live, inputs)
        if plan.replace:
            mismatch = ", ".join(f"{f}: live {live.get(f)!r}, code {inputs.get(f)!r}" for f in plan.replace)
            raise InputError(
                "adopt_cluster_id",
                cluster_id,
                f"cannot adopt cluster {cluster_id}: it differs from the code in fields that cannot change in "
                f"place ({mismatch}). Make the code match the cluster, then adopt.",
            )
        if plan.refusals:
            raise InputError("adopt_cluster_id", cluster_id, plan.refusals[0].message)
        lifecycle.report(f"adopting cluster {cluster_id} ({cluster.cluster_name})")
        return self._apply_update(client, cluster_id, inputs, plan.update) if plan.update else cluster

    def _apply_update(
        self, client: TogetherClient, cluster_id: str, inputs: dict[str, Any], fields: list[str]
    ) -> ApiCluster:
        # The nodes before a change of num_gpus tell a new standard node apart from the others.
        before = client.get_cluster(cluster_id) if "num_gpus" in fields else None
        client.update_cluster(cluster_id, update_request(inputs, fields))
        lifecycle.report(f"cluster {cluster_id}: updated {', '.join(fields)}")
        num_gpus = with_defaults(inputs)["num_gpus"]
        return lifecycle.wait_standard_converged(client, cluster_id, num_gpus, _timeout_s(inputs), before)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        old_inputs = _inputs_of(props)
        client = settings.connect()
        identity = _check_target(client, props, id_)
        cluster = lifecycle.get_or_none(client, id_)
        if cluster is None or cluster.status == "Deleting":
            return ReadResult("", {})
        inputs = read_inputs(cluster, old_inputs)
        return ReadResult(id_, _state(inputs, cluster, identity), inputs)

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = _inputs_of(news)
        plan = plan_change(olds, inputs)
        client = settings.connect()
        identity = _check_target(client, olds, id_)
        if plan.update:
            cluster = self._apply_update(client, id_, inputs, plan.update)
        else:
            cluster = client.get_cluster(id_)
        return UpdateResult(_state(inputs, cluster, identity))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        client = settings.connect()
        _check_target(client, props, id_)
        lifecycle.delete_and_wait(client, id_)


@dataclass
class ClusterArgs:
    """Inputs of a :class:`Cluster`, named as in the Together API.

    The code owns these desired values; the platform owns the live ones, which are outputs.
    ``num_gpus`` is the standard (on-demand) GPU count and must be at least 8 (one standard node);
    ``num_preemptible_gpus`` is the preemptible target, filled as capacity allows.
    """

    cluster_name: pulumi.Input[str]
    region: pulumi.Input[str]
    gpu_type: pulumi.Input[str]
    num_gpus: pulumi.Input[int]
    num_preemptible_gpus: pulumi.Input[int] | None = None
    billing_type: pulumi.Input[str] | None = None
    cluster_type: pulumi.Input[str] | None = None
    project_id: pulumi.Input[str] | None = None
    nvidia_version_id: pulumi.Input[str] | None = None
    cuda_version: pulumi.Input[str] | None = None
    nvidia_driver_version: pulumi.Input[str] | None = None
    shared_volume: pulumi.Input[dict[str, Any]] | None = None
    volume_id: pulumi.Input[str] | None = None
    cluster_config: pulumi.Input[dict[str, Any]] | None = None
    add_ons: pulumi.Input[list[dict[str, Any]]] | None = None
    num_reserved_gpus: pulumi.Input[int] | None = None
    duration_days: pulumi.Input[int] | None = None
    reservation_start_time: pulumi.Input[str] | None = None
    reservation_end_time: pulumi.Input[str] | None = None
    slurm_shm_size_gib: pulumi.Input[int] | None = None
    ready_timeout_minutes: pulumi.Input[float] | None = None
    adopt_cluster_id: pulumi.Input[str] | None = None


class Cluster(Resource, module=RESOURCE_MODULE, name=RESOURCE_NAME):
    """A Together GPU cluster with standard and preemptible capacity.

    Outputs: ``cluster_id`` (also the resource id), ``status``, ``phase``,
    ``desired_preemptible_gpus``, ``allocated_preemptible_gpus``, ``preemptible_shortfall_gpus``,
    ``standard_nodes``, ``preemptible_nodes``, ``recent_preemptions``, ``last_preempted_at``,
    ``kube_config`` (secret) and ``created_at``, plus every input.
    """

    cluster_id: pulumi.Output[str]
    status: pulumi.Output[str]
    phase: pulumi.Output[str]
    desired_preemptible_gpus: pulumi.Output[int]
    allocated_preemptible_gpus: pulumi.Output[int]
    preemptible_shortfall_gpus: pulumi.Output[int]
    standard_nodes: pulumi.Output[int]
    preemptible_nodes: pulumi.Output[int]
    recent_preemptions: pulumi.Output[int]
    last_preempted_at: pulumi.Output[str | None]
    kube_config: pulumi.Output[str]
    created_at: pulumi.Output[str]
    num_gpus: pulumi.Output[int]
    num_preemptible_gpus: pulumi.Output[int]

    def __init__(
        self,
        resource_name: str,
        args: ClusterArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
        **kwargs: Any,
    ) -> None:
        props: dict[str, Any] = {k: v for k, v in asdict(args).items() if v is not None} if args else {}
        unknown = set(kwargs) - set(FIELDS)
        if unknown:
            raise TypeError(
                f"Cluster got unknown arguments {sorted(unknown)}; the inputs are {', '.join(FIELDS)}"
            )
        props.update({k: v for k, v in kwargs.items() if v is not None})
        for name in FIELDS:
            props.setdefault(name, None)
        for name in OUTPUT_NAMES:
            props.setdefault(name, None)
        secret_opts = pulumi.ResourceOptions(additional_secret_outputs=list(SECRET_OUTPUTS))
        super().__init__(
            ClusterProvider(), resource_name, props, pulumi.ResourceOptions.merge(secret_opts, opts)
        )
