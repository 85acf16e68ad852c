"""FleetQueue's objects: Kueue's MultiKueue on the manager cluster, and what each worker cluster needs (pure).

On the manager: a ClusterQueue whose one admission check is MultiKueue's (``controllerName``
:data:`MULTIKUEUE_CONTROLLER`), pointing at a ``MultiKueueConfig`` that lists one ``MultiKueueCluster`` per
worker, each reading the worker's kubeconfig from a Secret in Kueue's namespace; the LocalQueue workloads are
submitted to. The manager runs nothing itself: its quotas are the sum of the workers' (MultiKueue reserves on
the manager first, then copies the workload to the workers, and the worker that admits it runs it). Its two
flavors carry no topology (the manager has no GPU nodes to fit pods onto) but the same node labels and taints
as the workers', so a ``PREEMPTIBLE`` workload (whose pods require preemptible nodes) is only admitted against
the preemptible quota.

On each worker: the queue of :mod:`.workload_queue` under the fleet's name (MultiKueue creates the copy in the
same namespace and LocalQueue, which it does not create), whose Topology Aware Scheduling makes a worker
without a free preemptible node refuse a ``PREEMPTIBLE`` workload instead of admitting it to wait; and the
manager's credentials there: a ServiceAccount bound to a ClusterRole of what MultiKueue does in a worker and
nothing else (Kueue's own multikueue setup example: create, delete and watch Jobs, JobSets and Workloads, read
their status, update a Workload's status), with a token Secret the kubeconfig is made from
(:func:`worker_kubeconfig`: Kueue v0.17 takes a token with ``certificate-authority-data``, and refuses
``insecure-skip-tls-verify``, CA files and token files).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from together_clusters.platform import JOBSET_API, ComputeClass
from together_clusters.platform.charts import KUEUE, KUEUE_API_VERSION

from ..args import FleetQueueArgs
from ..violations import Violation, argument_violation
from .checks import at_least
from .common import Manifest, token_service_account
from .fleet_dispatch import DISPATCHER_NAME, dispatch_violations
from .workload_queue import FLAVOR_ORDER, cluster_queue, local_queue, resource_flavor

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The ``controllerName`` of MultiKueue's admission checks."""

KUEUE_NAMESPACE = KUEUE.namespace
"""Where the manager's Kueue reads the workers' kubeconfigs, and where each worker's ServiceAccount is."""

WORKER_LABEL = "together.ai/fleet-worker"
"""On a ``MultiKueueCluster``: the worker's name in the fleet."""

KUBECONFIG_KEY = "kubeconfig"
"""The key of a worker's kubeconfig in its Secret on the manager (the one MultiKueue reads)."""


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABELS = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/component": "fleet-queue"}

WORKER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {
        "apiGroups": [JOBSET_API.group],
        "resources": [JOBSET_API.plural],
        "verbs": ["create", "delete", "get", "list", "watch"],
    },
    {"apiGroups": [JOBSET_API.group], "resources": [f"{JOBSET_API.plural}/status"], "verbs": ["get"]},
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["create", "delete", "get", "list", "watch"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
)
"""What the manager may do in a worker: MultiKueue's needs for the kinds the components submit (JobSets and
batch Jobs), as Kueue's own setup example grants them. No Secrets, no pods, no nodes."""


@dataclass(frozen=True)
class WorkerView:
    """What the checks see of one worker: its name in the fleet, an identity of its ``Cluster`` (two workers
    with one identity are the same cluster), and whether it is the manager itself."""

    name: str
    identity: int
    is_manager: bool = False


def fleet_violations(name: str, args: FleetQueueArgs, workers: Sequence[WorkerView]) -> list[Violation]:
    """Every problem of a FleetQueue's arguments and workers (the Slurm check waits for the cluster type)."""
    queue = args.queue_name or name
    found = at_least("worker_lost_timeout_seconds", args.worker_lost_timeout_seconds, 1)
    if args.dispatch is not None:
        found += dispatch_violations(args.dispatch)
    if not workers:
        found.append(
            argument_violation(
                "fleet-workers",
                "workers",
                [],
                "workers=[] names no worker cluster",
                "list the Cluster resources the queue runs workloads on, e.g. workers=[east, west]",
            )
        )
    if not _NAME.match(queue):
        found.append(
            argument_violation(
                "fleet-name",
                "queue_name",
                queue,
                f"queue_name={queue!r} is not a Kubernetes name",
                "use lower-case letters, digits and '-', starting and ending with a letter or digit",
            )
        )
    seen: dict[int, str] = {}
    for index, worker in enumerate(workers):
        field = f"workers[{index}]"
        if worker.is_manager:
            found.append(
                argument_violation(
                    "fleet-manager-as-worker",
                    field,
                    worker.name,
                    f"{field} ({worker.name!r}) is the manager cluster itself, which MultiKueue cannot run "
                    "workloads on",
                    "remove it from workers, or create the FleetQueue with the provider of another cluster",
                )
            )
        if worker.identity in seen:
            found.append(
                argument_violation(
                    "fleet-worker-twice",
                    field,
                    worker.name,
                    f"{field} ({worker.name!r}) is the same cluster as {seen[worker.identity]}",
                    "list each worker cluster once",
                )
            )
        else:
            seen[worker.identity] = field
        if not _NAME.match(worker.name):
            found.append(
                argument_violation(
                    "fleet-name",
                    f"{field}.name",
                    worker.name,
                    f"{field}.name={worker.name!r} is not a Kubernetes name",
                    "give FleetWorkerArgs(name=...) of lower-case letters, digits and '-'",
                )
            )
    names = [w.name for w in workers]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        found.append(
            argument_violation(
                "fleet-worker-name",
                "workers",
                duplicate,
                f"two workers are named {duplicate!r}",
                "give one of them FleetWorkerArgs(name=...) of its own",
            )
        )
    return found


def slurm_worker_violation(field: str, worker: str, cluster_type: str) -> Violation | None:
    """A worker that is a Slurm cluster: MultiKueue dispatches to Kubernetes API servers only."""
    if str(cluster_type).upper() != "SLURM":
        return None
    return argument_violation(
        "fleet-slurm-worker",
        field,
        worker,
        f"{field} ({worker!r}) is a Slurm cluster (cluster_type='SLURM'): a fleet dispatches to Kubernetes "
        "clusters only",
        "use a cluster with cluster_type='KUBERNETES' as the worker",
    )


def gpu_type_violation(workers: Sequence[str], gpu_types: Sequence[str | None]) -> Violation | None:
    """The first worker whose GPU type is not the first worker's. A fleet workload asks for GPUs, not for a
    type: MultiKueue may run it on any worker, so on a type it was not built or sized for (its memory, its
    kernels); None when every known type agrees."""
    known = [(w, t) for w, t in zip(workers, gpu_types, strict=True) if t]
    if not known:
        return None
    first_worker, first_type = known[0]
    for index, (worker, gpu_type) in enumerate(zip(workers, gpu_types, strict=True)):
        if gpu_type and gpu_type != first_type:
            return argument_violation(
                "fleet-gpu-type",
                f"workers[{index}]",
                worker,
                f"workers[{index}] ({worker!r}) has gpu_type {gpu_type!r} but {first_worker!r} has {first_type!r}: "
                "a fleet workload asks for GPUs of no type, so it could run on GPUs it was not built for",
                "give the fleet workers of one GPU type (one FleetQueue per GPU type)",
            )
    return None


def multikueue_cluster_name(queue: str, worker: str) -> str:
    """The ``MultiKueueCluster`` (and kubeconfig Secret) of ``worker`` on the manager."""
    return f"{queue}-{worker}"


def worker_service_account(queue: str) -> str:
    """The ServiceAccount (and ClusterRole, binding, token Secret) the manager acts as in each worker."""
    return f"{queue}-multikueue"


def manager_objects(
    queue: str,
    args: FleetQueueArgs,
    worker_names: Sequence[str],
    preemptible: Any,
    standard: Any,
) -> list[Manifest]:
    """The manager's flavors, ClusterQueue (quotas ``preemptible`` and ``standard``: the workers' sums,
    ints or outputs), LocalQueue, AdmissionCheck, MultiKueueConfig and one MultiKueueCluster per worker."""
    labels = {"app.kubernetes.io/name": queue, **_LABELS}
    quotas = {ComputeClass.PREEMPTIBLE: preemptible, ComputeClass.STANDARD: standard}
    clusters = [multikueue_cluster_name(queue, worker) for worker in worker_names]
    return [
        *(
            resource_flavor(queue, compute_class, labels, args.preemptible_taint, topology=None)
            for compute_class in FLAVOR_ORDER
        ),
        cluster_queue(queue, labels, quotas, admission_checks=[queue], counts_pods=True),
        local_queue(queue, args.namespace, labels),
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "AdmissionCheck",
            "metadata": {"name": queue, "labels": dict(labels)},
            "spec": {
                "controllerName": MULTIKUEUE_CONTROLLER,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": queue},
            },
        },
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "MultiKueueConfig",
            "metadata": {"name": queue, "labels": dict(labels)},
            "spec": {"clusters": clusters},
        },
        *(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "MultiKueueCluster",
                "metadata": {"name": cluster, "labels": {**labels, WORKER_LABEL: worker}},
                "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": cluster}}},
            }
            for cluster, worker in zip(clusters, worker_names, strict=True)
        ),
    ]


def worker_access_objects(queue: str) -> list[Manifest]:
    """On a worker: the ServiceAccount the manager acts as, its ClusterRole and binding, and the Secret its
    token is kept in (filled by the worker's API server)."""
    labels = {"app.kubernetes.io/name": queue, **_LABELS}
    return token_service_account(worker_service_account(queue), KUEUE_NAMESPACE, labels, WORKER_RULES)


def api_server_of(admin_kubeconfig: str) -> str:
    """The API server a kubeconfig's current context talks to (the worker's, for its fleet kubeconfig)."""
    config = yaml.safe_load(admin_kubeconfig) or {}
    contexts: dict[str, Any] = {c["name"]: c["context"] for c in config.get("contexts") or []}
    clusters: dict[str, Any] = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
    current: dict[str, Any] = contexts.get(str(config.get("current-context"))) or next(
        iter(contexts.values()), {}
    )
    cluster: dict[str, Any] = clusters.get(str(current.get("cluster"))) or next(iter(clusters.values()), {})
    return str(cluster["server"])


def worker_kubeconfig(worker: str, server: str, ca_data: str, token: str) -> str:
    """The kubeconfig the manager reaches ``worker`` with: its ServiceAccount's ``token`` and the worker's
    CA (``ca_data``, base64 as the token Secret's ``ca.crt`` holds it), as Kueue v0.17 accepts it."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": worker, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": f"{worker}-multikueue", "user": {"token": token}}],
        "contexts": [{"name": worker, "context": {"cluster": worker, "user": f"{worker}-multikueue"}}],
        "current-context": worker,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kubeconfig_secret(queue: str, worker: str) -> Manifest:
    """The Secret on the manager that holds ``worker``'s kubeconfig (its ``stringData`` added by the shell,
    as a Pulumi secret)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": multikueue_cluster_name(queue, worker),
            "namespace": KUEUE_NAMESPACE,
            "labels": {"app.kubernetes.io/name": queue, **_LABELS},
        },
    }


def multikueue_settings(worker_lost_timeout_seconds: int, dispatched: bool = False) -> dict[str, Any]:
    """The ``multiKueue`` section of the manager's Kueue configuration; ``dispatched``: the fleet's dispatcher
    nominates each workload's worker (MultiKueue's External mode), else Kueue's default (AllAtOnce)."""
    settings: dict[str, Any] = {"workerLostTimeout": f"{worker_lost_timeout_seconds}s"}
    if dispatched:
        settings["dispatcherName"] = DISPATCHER_NAME
    return settings
