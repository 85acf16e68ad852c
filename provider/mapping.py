"""Between the Cluster resource's inputs/outputs and the API's requests/replies. Pure.

Who owns what: the code owns the desired values (``num_gpus``, ``num_preemptible_gpus`` ...); the
platform owns the live ones (``allocated_preemptible_gpus``, nodes, events, status). Only the
former are read back as inputs, so a capacity shortfall or a preemption is never drift.
"""

from __future__ import annotations

from typing import Any

from together_clusters.platform import GPUS_PER_NODE, ComputeClass, compute_class_of_node, is_preemption

from .change_planning import normalize
from .kubeconfig import kubeconfig_text
from .models import (
    AddOnUpdate,
    Cluster,
    ClusterCreateRequest,
    ClusterUpdateRequest,
    GPUWorkerNode,
)
from .schema import FIELDS, OnChange

PREEMPTIBLE = ComputeClass.PREEMPTIBLE
STANDARD = ComputeClass.STANDARD

# Inputs sent on create; ours (LOCAL) and adoption are not.
_CREATE_FIELDS = tuple(n for n, s in FIELDS.items() if s.on_change.sent_on_create and n != "adopt_cluster_id")


def create_request(inputs: dict[str, Any], default_project_id: str | None = None) -> ClusterCreateRequest:
    """The POST body for these (validated) inputs.

    ``project_id`` is always sent when known: the stack's, else ``default_project_id`` (the key's own,
    from ``/v3/whoami``), so the cluster lands in the project the provider records, not wherever the
    server's default points.
    """
    body = {name: inputs.get(name, FIELDS[name].default) for name in _CREATE_FIELDS}
    body["project_id"] = body.get("project_id") or default_project_id
    return ClusterCreateRequest.model_validate({k: v for k, v in body.items() if v is not None})


def update_request(news: dict[str, Any], fields: list[str]) -> ClusterUpdateRequest:
    """The PUT body carrying only ``fields`` (the in-place changes) at their new values."""
    body: dict[str, Any] = {}
    for name in fields:
        value = news.get(name, FIELDS[name].default)
        if name == "add_ons":
            value = [AddOnUpdate(name=a["name"], config=a.get("config")) for a in value or []]
        body[name] = value
    return ClusterUpdateRequest.model_validate(body)


def read_inputs(
    cluster: Cluster, old_inputs: dict[str, Any], *, immutable: bool = False, everything: bool = False
) -> dict[str, Any]:
    """The inputs as the server now sees them, for refresh (and, with ``immutable``, for adoption).

    In-place (``UPDATE``) fields the API reports take the server's desired value, so a change made
    outside Pulumi shows as a diff against the code. Fields that cannot change in place keep the
    state's value unless ``immutable`` asks for them (adoption compares them with the code): the
    server may spell them differently (a normalised ``cuda_version``) but cannot change them. A
    field the reply leaves out keeps its previous value: absent is not removed. Optional fields left
    unset in code stay unset, so a server-filled default is not drift; nested settings are compared
    only on the keys the code sets. With ``everything`` (a read by id alone: ``pulumi import``, a ``get``; no
    code to compare with) every field the server reports set is read, as the cluster's.
    """
    server = {
        "cluster_name": cluster.cluster_name,
        "region": cluster.region,
        "gpu_type": cluster.gpu_type,
        "num_gpus": cluster.num_gpus,
        "num_preemptible_gpus": cluster.desired_preemptible_gpus,
        "billing_type": cluster.billing_type,
        "cluster_type": cluster.cluster_type,
        "project_id": cluster.project_id,
        "nvidia_version_id": cluster.nvidia_driver_version_id,
        "cuda_version": cluster.cuda_version,
        "nvidia_driver_version": cluster.nvidia_driver_version,
        "num_reserved_gpus": cluster.num_reserved_gpus,
        "reservation_start_time": _iso(cluster.reservation_start_time),
        "reservation_end_time": _iso(cluster.reservation_end_time),
        "slurm_shm_size_gib": cluster.slurm_shm_size_gib,
        "cluster_config": cluster.cluster_config.model_dump(mode="json") if cluster.cluster_config else None,
        "add_ons": _add_ons_as_code_sees_them(cluster, old_inputs.get("add_ons")),
        "capacity_pool_id": cluster.capacity_pool_id,
        "num_capacity_pool_gpus": cluster.num_capacity_pool_gpus,
        "oidc_config": cluster.oidc_config.model_dump(mode="json") if cluster.oidc_config else None,
        "install_traefik": cluster.install_traefik,
    }
    server["num_gpus"] = floor_as_code_sees_it(cluster.num_gpus, old_inputs)
    inputs = {name: old_inputs.get(name) for name in FIELDS}
    for name, value in server.items():
        spec, old = FIELDS[name], old_inputs.get(name)
        if value is None or not spec.read_back:
            continue  # not reported: no news
        if everything:
            if value or spec.required:  # a zero, empty or false reply is the field left unset
                inputs[name] = value
            continue
        if spec.on_change is OnChange.REPLACE and not immutable:
            continue  # cannot have changed in place; a different spelling is no change
        if old is None and (spec.server_default or spec.default is None):
            continue  # the code leaves it to the server: whatever the server holds is no drift
        if name in ("cluster_config", "oidc_config"):
            value = _project_onto(value, old)
        if normalize(name, value) == normalize(name, old if old is not None else spec.default):
            continue  # same value, keep the code's spelling (e.g. of a timestamp)
        inputs[name] = value
    return {k: v for k, v in inputs.items() if v is not None}


def autoscaling_ceiling(inputs: dict[str, Any]) -> int | None:
    """The GPUs an autoscaling cluster may grow to (``auto_scale_max_gpus``); ``None`` when it does not scale."""
    ceiling = inputs.get("auto_scale_max_gpus")
    return ceiling if inputs.get("auto_scale") is True and isinstance(ceiling, int) else None


def floor_as_code_sees_it(reported: int | None, inputs: dict[str, Any]) -> int | None:
    """The ``num_gpus`` a refresh reads back: the reported count, except the platform's own scaling.

    The docs leave open whether an autoscaling cluster reports ``num_gpus`` as the floor the code set or as
    its live size. Either way, a count between the code's floor and the ceiling is the platform at work, not
    a change made outside Pulumi: the floor stands. (The emulator reports the floor.)
    """
    ceiling, floor = autoscaling_ceiling(inputs), inputs.get("num_gpus")
    if ceiling is None or reported is None or not isinstance(floor, int):
        return reported
    return floor if floor <= reported <= ceiling else reported


def num_gpus_to_send(new_floor: int, old_floor: int | None, reported: int | None, ceiling: int | None) -> int:
    """The ``num_gpus`` an update sends for a new floor, so it never undoes the platform's scaling.

    Where the API reports the floor (``reported == old_floor``), the new floor is sent. Where it reports the
    live size (above the old floor: the platform grew the cluster), sending a floor below that size could
    make the platform remove nodes running work: the larger of the two is sent, and the platform's scale-down
    brings it back to the floor as nodes go idle.
    """
    if ceiling is None or reported is None or old_floor is None or reported <= old_floor:
        return new_floor
    return max(new_floor, min(reported, ceiling))


def _add_ons_as_code_sees_them(cluster: Cluster, code_add_ons: Any) -> list[dict[str, Any]] | None:
    """The code's add-ons as the server now has them: each one's config on the keys the code sets.

    The API lists only enabled add-ons, so one the code has that the reply leaves out was disabled
    (outside Pulumi): it reads back with every part the code enables turned off. Add-ons the code
    does not name are not its business.
    """
    if not isinstance(code_add_ons, list):
        return None
    live = {a.name: a for a in cluster.add_ons if a.name}
    seen = []
    for wanted in code_add_ons:
        if not isinstance(wanted, dict):
            return None
        entry = {k: v for k, v in wanted.items() if k != "config"}
        config = wanted.get("config")
        on_server = live.get(str(wanted.get("name")))
        if on_server is not None:
            if on_server.add_on_type:
                entry["add_on_type"] = on_server.add_on_type
            if config is not None:
                reported = on_server.config.model_dump(mode="json") if on_server.config else {}
                entry["config"] = _project_onto(reported, config)
        elif isinstance(config, dict):
            entry["config"] = {part: {"enabled": False} for part in config}
        seen.append(entry)
    return seen


def _project_onto(live: Any, shape: Any) -> Any:
    """``live`` restricted to the keys that ``shape`` (the code's value) sets."""
    if not isinstance(live, dict) or not isinstance(shape, dict):
        return live
    return {k: _project_onto(live.get(k), v) for k, v in shape.items() if v is not None}


def _iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def marked_compute_class(node: GPUWorkerNode) -> str | None:
    """The class the node itself reports (``compute_class``), or ``None`` when the API gives none."""
    marked = (node.model_extra or {}).get("compute_class")
    return marked if isinstance(marked, str) else None


def _compute_classes(cluster: Cluster) -> dict[str, str]:
    """``preemptible`` or ``standard`` per live node id.

    A node's own ``compute_class`` marking wins, then the class its name encodes (``gpu-dp...``,
    ``gpu-preemptible-dp...``). Without either, the newest unmarked nodes covering
    ``allocated_preemptible_gpus`` are taken as the preemptible ones.
    """
    nodes = [n for n in cluster.gpu_worker_nodes if n.node_id]
    unmarked = [n for n in nodes if _own_class(n) is None]
    newest = min((cluster.allocated_preemptible_gpus or 0) // GPUS_PER_NODE, len(unmarked))
    guessed = {n.node_id for n in unmarked[len(unmarked) - newest :]}
    classes: dict[str, str] = {}
    for node in nodes:
        guess = PREEMPTIBLE if node.node_id in guessed else STANDARD
        classes[str(node.node_id)] = _own_class(node) or guess
    return classes


def _own_class(node: GPUWorkerNode) -> str | None:
    """The class the node tells by itself: its marking, else its name."""
    return marked_compute_class(node) or compute_class_of_node(str(node.node_id or ""))


def node_counts(cluster: Cluster) -> tuple[int, int]:
    """Live (standard, preemptible) node counts."""
    classes = _compute_classes(cluster)
    preemptible = sum(1 for c in classes.values() if c == PREEMPTIBLE)
    return len(classes) - preemptible, preemptible


def standard_nodes(cluster: Cluster) -> list[GPUWorkerNode]:
    """The standard nodes that stay: live, of the standard class, not marked for deletion."""
    classes = _compute_classes(cluster)
    return [
        n
        for n in cluster.gpu_worker_nodes
        if n.node_id and classes[n.node_id] != PREEMPTIBLE and not n.marked_for_deletion
    ]


def standard_capacity_settled(
    cluster: Cluster,
    num_gpus: int,
    nodes_before: frozenset[str | None] = frozenset(),
    nodes_added: int = 0,
    ceiling: int | None = None,
) -> bool:
    """Whether a change of ``num_gpus`` has taken effect on the nodes, from what the real API reports.

    Nodes do not say their class, so the test is on counts: the cluster asks for ``num_gpus``,
    every node not on its way out is running (a standard node added by the change boots like any
    other), there are at least enough of them for the standard nodes, and no more than the
    standard nodes plus the preemptible allocation (a scale-down is done). A scale-up by
    ``nodes_added`` nodes also needs that many running nodes that were not among ``nodes_before``
    (the ids before the change): a preemptible node must not pass for a standard node not yet listed. An
    autoscaling cluster may run more standard nodes than ``num_gpus``, up to its ``ceiling``.
    """
    staying = [n for n in cluster.gpu_worker_nodes if not n.marked_for_deletion]
    target = num_gpus // GPUS_PER_NODE
    most = max(target, (ceiling or 0) // GPUS_PER_NODE)
    preemptible = (cluster.allocated_preemptible_gpus or 0) // GPUS_PER_NODE
    return (
        cluster.num_gpus == num_gpus
        and all(n.latest_phase == "NODE_PHASE_RUNNING" for n in staying)
        and target <= len(staying) <= most + preemptible
        and sum(1 for n in staying if n.node_id not in nodes_before) >= nodes_added
    )


def live_outputs(cluster: Cluster) -> dict[str, Any]:
    """The outputs owned by the platform, from a live cluster."""
    standard_nodes, preemptible_nodes = node_counts(cluster)
    # Either name of a preemption counts, once per node (a node announced under both is one preemption).
    preemptions = [e for e in cluster.node_lifecycle_events or [] if is_preemption(e.reason)]
    last = max((e.timestamp for e in preemptions if e.timestamp), default=None)
    preempted_nodes = {e.node_id for e in preemptions if e.node_id}
    return {
        "cluster_id": cluster.cluster_id,
        "status": cluster.status,
        "phase": cluster.latest_phase,
        "desired_preemptible_gpus": cluster.desired_preemptible_gpus,
        "allocated_preemptible_gpus": cluster.allocated_preemptible_gpus,
        "preemptible_shortfall_gpus": max(
            (cluster.desired_preemptible_gpus or 0) - (cluster.allocated_preemptible_gpus or 0), 0
        ),
        "standard_nodes": standard_nodes,
        "preemptible_nodes": preemptible_nodes,
        "recent_preemptions": len(preempted_nodes) + sum(1 for e in preemptions if not e.node_id),
        "last_preempted_at": _iso(last),
        "kube_config": kubeconfig_text(cluster.kube_config),
        "created_at": _iso(cluster.created_at),
    }
