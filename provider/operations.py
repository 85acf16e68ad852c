"""What the dynamic provider's ``create``, ``read``, ``update`` and ``delete`` do: the glue between the
engine's calls, the mapping and the client.

Loaded by the provider host on the first call that talks to the API.
"""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import CreateResult, ReadResult, UpdateResult

from . import lifecycle, namesakes, settings
from .change_planning import plan_change
from .client import Identity, TogetherClient
from .errors import InputError, NotFoundError, WrongTargetError
from .mapping import (
    autoscaling_ceiling,
    create_request,
    live_outputs,
    num_gpus_to_send,
    read_inputs,
    update_request,
)
from .models import Cluster as ApiCluster
from .models import ClusterCreateRequest
from .planning import ADOPTION_DONE, inputs_of
from .schema import with_defaults


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


def _identity(client: TogetherClient) -> Identity:
    """Where this client points; an API without ``whoami`` gives the endpoint alone."""
    try:
        return client.whoami()
    except NotFoundError:
        return Identity(endpoint=client.base_url, project_id=None, organization_id=None)


def _check_target(
    client: TogetherClient, props: dict[str, Any], cluster_id: str, what: str = "cluster"
) -> Identity:
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
            f"{what} {cluster_id} was created through another API {' and '.join(wrong)} than the one "
            f"configured now ({said}). Nothing was read or changed. Point TOGETHER_BASE_URL / "
            "together:baseUrl and the API key back at the recorded endpoint and project, then run again."
        )
    return here


def create(props: dict[str, Any]) -> CreateResult:
    inputs = inputs_of(props)
    client = settings.connect()
    identity = _identity(client)
    if inputs.get("adopt_cluster_id") and not props.get(ADOPTION_DONE):
        cluster = _adopt(client, inputs, identity)
    else:
        request = _with_kept_volume(client, create_request(inputs, default_project_id=identity.project_id))
        namesakes.refuse_untracked_namesake(client, request.cluster_name, identity)
        # A lost reply is looked for as long as the create itself may take, not a fixed few seconds.
        reconcile_s = settings.reconcile_timeout_override() or _timeout_s(inputs)
        cluster = lifecycle.create_or_explain_conflict(client, request, reconcile_s)
        cluster_id = str(cluster.cluster_id)
        lifecycle.report(f"cluster {cluster_id} ({cluster.cluster_name}) accepted; provisioning")
        try:
            cluster = lifecycle.wait_ready(client, cluster_id, _timeout_s(inputs))
        except Exception as exc:
            raise lifecycle.cleanup_failed_create(client, cluster_id, exc)  # noqa: B904 - exc itself, restated
    return CreateResult(str(cluster.cluster_id), _state(inputs, cluster, identity))


def _with_kept_volume(client: TogetherClient, request: ClusterCreateRequest) -> ClusterCreateRequest:
    """A create with an inline lifecycle-independent volume that already exists, unattached (the volume of
    the cluster this one replaces): attach it by id rather than make a new, empty one beside it."""
    spec = request.shared_volume
    if spec is None or spec.is_lifecycle_independent is not True:
        return request
    kept = [v for v in client.list_volumes() if v.volume_name == spec.volume_name and v.status == "available"]
    if len(kept) != 1:
        return request
    lifecycle.report(f"attaching the kept volume {kept[0].volume_id} ({spec.volume_name}) to the new cluster")
    return request.model_copy(update={"shared_volume": None, "volume_id": kept[0].volume_id})


def _adopt(client: TogetherClient, inputs: dict[str, Any], identity: Identity) -> ApiCluster:
    """Take an existing cluster into the stack, then make it match the code in place."""
    cluster_id = inputs["adopt_cluster_id"]
    try:
        cluster = client.get_cluster(cluster_id)
    except NotFoundError:
        cluster = None
    if cluster is None or cluster.status == "Deleting":
        # The adopted cluster was replaced and the replacement's create was cut off: the stack holds nothing
        # and the code still names the cluster it deleted. The replacement, if it was made, is the one to take.
        namesakes.refuse_untracked_namesake(client, inputs["cluster_name"], identity)
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
    return (
        _apply_update(client, cluster_id, inputs, plan.update, live.get("num_gpus"))
        if plan.update
        else cluster
    )


def _apply_update(
    client: TogetherClient,
    cluster_id: str,
    inputs: dict[str, Any],
    fields: list[str],
    old_num_gpus: int | None = None,
) -> ApiCluster:
    # The nodes before a change of num_gpus tell a new standard node apart from the others.
    before = client.get_cluster(cluster_id) if "num_gpus" in fields else None
    ceiling = autoscaling_ceiling(inputs)
    num_gpus = with_defaults(inputs)["num_gpus"]
    if before is not None:
        num_gpus = num_gpus_to_send(num_gpus, old_num_gpus, before.num_gpus, ceiling)
    client.update_cluster(cluster_id, update_request({**inputs, "num_gpus": num_gpus}, fields))
    lifecycle.report(f"cluster {cluster_id}: updated {', '.join(fields)}")
    return lifecycle.wait_standard_converged(
        client, cluster_id, num_gpus, _timeout_s(inputs), before, ceiling
    )


def read(id_: str, props: dict[str, Any]) -> ReadResult:
    old_inputs = inputs_of(props)
    client = settings.connect()
    identity = _check_target(client, props, id_)
    cluster = lifecycle.get_or_none(client, id_)
    if cluster is None or cluster.status == "Deleting":
        return ReadResult("", {})
    # Read with the id alone (``pulumi import``, a ``get``): every input the server reports set, those that
    # cannot change in place included, so the engine's Check and the generated code have them all.
    inputs = read_inputs(cluster, old_inputs, everything=not old_inputs)
    return ReadResult(id_, _state(inputs, cluster, identity), inputs)


def update(id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
    inputs = inputs_of(news)
    plan = plan_change(olds, inputs)
    client = settings.connect()
    identity = _check_target(client, olds, id_)
    if plan.update:
        cluster = _apply_update(client, id_, inputs, plan.update, olds.get("num_gpus"))
    else:
        cluster = client.get_cluster(id_)
    return UpdateResult(_state(inputs, cluster, identity))


def delete(id_: str, props: dict[str, Any]) -> None:
    client = settings.connect()
    _check_target(client, props, id_)
    lifecycle.delete_and_wait(client, id_)
