"""The I/O steps of a cluster's life: create and wait for Ready, converge an update, delete and wait
until gone, clean up after a failed create. Each wait has its own deadline."""

from __future__ import annotations

from together_clusters.platform import GPUS_PER_NODE

from .client import TogetherClient
from .errors import ConflictError, NotFoundError, ProvisioningFailedError, TogetherError
from .mapping import standard_capacity_settled, standard_nodes
from .models import FAILED_PHASES, Cluster, ClusterCreateRequest
from .waiting import TRANSIENT_ERRORS, report, wait_until

DELETE_TIMEOUT_S = 30 * 60


def describe(cluster: Cluster | None) -> str:
    if cluster is None:
        return "gone"
    return (
        f"{cluster.status} ({cluster.latest_phase or 'no phase yet'}), "
        f"{len(cluster.gpu_worker_nodes)} GPU nodes, preemptible GPUs "
        f"{cluster.allocated_preemptible_gpus or 0}/{cluster.desired_preemptible_gpus or 0}"
    )


def create_or_explain_conflict(
    client: TogetherClient, request: ClusterCreateRequest, reconcile_timeout_s: float | None = None
) -> Cluster:
    """POST the cluster. When its name is taken, say by which cluster and how to take it over.

    The usual cause is a cluster this stack made in an ``up`` that was interrupted before the
    state was written: it is running outside the state, and adopting it puts it back.
    """
    try:
        return client.create_cluster(request, reconcile_timeout_s)
    except ConflictError as exc:
        holders = [
            c.cluster_id
            for c in client.list_clusters()
            if c.cluster_name == request.cluster_name and c.cluster_id
        ]
        if not holders:
            raise
        # Still a ConflictError (status, request id and all), saying which cluster holds the name.
        exc.restate(
            f"{exc.message} (HTTP {exc.status_code}): cluster {holders[0]} already has the name "
            f"{request.cluster_name!r}. If it is this stack's (e.g. from an interrupted `pulumi up`), adopt it "
            f"by setting adopt_cluster_id='{holders[0]}' on the Cluster; otherwise choose another cluster_name "
            f"or delete it (`tg clusters delete {holders[0]}`)."
        )
        raise


def wait_ready(client: TogetherClient, cluster_id: str, timeout_s: float) -> Cluster:
    """Wait for ``Ready``; fail at once on a failed acceptance or NCCL test phase."""

    def fetch() -> Cluster:
        cluster = client.get_cluster(cluster_id, attempts=1)
        if cluster.latest_phase in FAILED_PHASES:
            raise ProvisioningFailedError(
                f"cluster {cluster_id} failed provisioning in phase {cluster.latest_phase}; it will not become Ready"
            )
        return cluster

    return wait_until(
        fetch,
        lambda c: c.status == "Ready",
        timeout_s=timeout_s,
        what=f"waiting for cluster {cluster_id} to be Ready",
        describe=describe,
    )


def _standard_nodes_running(cluster: Cluster) -> int:
    return sum(1 for n in standard_nodes(cluster) if n.latest_phase == "NODE_PHASE_RUNNING")


def wait_standard_converged(
    client: TogetherClient,
    cluster_id: str,
    num_gpus: int,
    timeout_s: float,
    before: Cluster | None = None,
    ceiling: int | None = None,
) -> Cluster:
    """Wait until the nodes show the change of ``num_gpus`` (see ``standard_capacity_settled``);
    ``before`` is the cluster as it was before the change, whose node ids tell the new nodes apart;
    ``ceiling`` is an autoscaling cluster's ``auto_scale_max_gpus``.
    Preemptible allocation is not waited for: it fills asynchronously and a shortfall is reported
    in the outputs."""
    target = num_gpus // GPUS_PER_NODE
    nodes_before = (
        frozenset(n.node_id for n in before.gpu_worker_nodes) if before is not None else frozenset()
    )
    added = max(0, target - (before.num_gpus or 0) // GPUS_PER_NODE) if before is not None else 0
    return wait_until(
        lambda: client.get_cluster(cluster_id, attempts=1),
        lambda cluster: standard_capacity_settled(cluster, num_gpus, nodes_before, added, ceiling),
        timeout_s=timeout_s,
        what=f"waiting for cluster {cluster_id} to run {target} standard nodes",
        describe=lambda c: f"{_standard_nodes_running(c)} standard nodes running; {describe(c)}",
    )


def get_or_none(client: TogetherClient, cluster_id: str, attempts: int | None = None) -> Cluster | None:
    try:
        return client.get_cluster(cluster_id, attempts=attempts)
    except NotFoundError:
        return None


def delete_and_wait(client: TogetherClient, cluster_id: str, timeout_s: float = DELETE_TIMEOUT_S) -> None:
    """DELETE, then wait until the cluster is gone. Already gone (404) counts as deleted."""
    try:
        client.delete_cluster(cluster_id)
    except NotFoundError:
        return
    except TRANSIENT_ERRORS as exc:
        # The DELETE may have been taken: the wait below says whether the cluster goes.
        report(f"deleting cluster {cluster_id}: {exc}; checking whether the delete was taken")
        if get_or_none(client, cluster_id) is None:
            return
        client.delete_cluster(cluster_id)
    wait_until(
        lambda: get_or_none(client, cluster_id, attempts=1),
        lambda c: c is None,
        timeout_s=timeout_s,
        what=f"deleting cluster {cluster_id}",
        describe=describe,
    )


def cleanup_failed_create(client: TogetherClient, cluster_id: str, cause: Exception) -> Exception:
    """Delete a cluster whose create did not finish, so nothing is left running outside the state.

    Returns the error to raise: the cause, with what happened to the cluster in its message. One of ours
    keeps its type (``except WaitTimeoutError`` still catches a create that timed out); anything else, a
    bug, is wrapped in a ``TogetherError`` whose cause it is.
    """
    report(f"cluster {cluster_id} did not become Ready ({cause}); deleting it so nothing is left running")
    try:
        delete_and_wait(client, cluster_id)
    except Exception as cleanup_error:  # noqa: BLE001 - any failure here must reach the user with the id
        outcome = (
            f"Cluster {cluster_id} was created and could NOT be deleted ({cleanup_error}); it may still be "
            f"running and billed. Delete it with `tg clusters delete {cluster_id}` (or DELETE "
            f"/v1/compute/clusters/{cluster_id}), or adopt it into this stack by setting "
            f"adopt_cluster_id='{cluster_id}' on the Cluster."
        )
    else:
        outcome = f"Cluster {cluster_id} was deleted; nothing is left running."
    message = f"Creating the cluster failed: {cause}. {outcome}"
    if isinstance(cause, TogetherError):
        cause.restate(message)
        return cause
    wrapped = TogetherError(message)
    wrapped.__cause__ = cause
    return wrapped
