"""WorkloadQueue's objects: Kueue's flavors, topology, ClusterQueue and LocalQueue; and how a workload is
submitted to a queue (pure).

One ResourceFlavor per compute class, tried preemptible first, then standard. Both flavors name a Topology
of one level, which makes the ClusterQueue use Topology Aware Scheduling for every workload (Kueue v0.17
implies it when all of a queue's flavors have a topology). That is what makes a stockout fall through: Kueue
fits a workload's pods onto the real nodes of a TAS flavor, so with quota free on the preemptible flavor but
no preemptible node to fit on, the attempt is NoFit, Kueue records that flavor as tried and tries the next
one, standard (``flavorassigner.go``, ``tas_flavorassigner.go`` of sigs.k8s.io/kueue@v0.17.0). A plain
flavor counts quota only, so the workload would be admitted to preemptible and wait Pending for nodes that
may never come (kubernetes-sigs/kueue#2560).

The level is a label every node has (:data:`TOPOLOGY_LEVEL`), not the node (``kubernetes.io/hostname``): a
node level pins each pod to one node (Kueue's topology ungater writes the node's name into the pod's node
selector), so a pod that replaces a preempted one can be pinned to the node that is gone. Seen on the twin
(about one run in three): the replacement stayed Pending, and Kueue's TAS node controller, which watches pods
even with node replacement turned off, marked the workload's node unhealthy, after which its workload
controller skips the workload, so the PodsReady timeout that would requeue it never fired
(``node_controller.go``, ``workload_controller.go``). At one coarse level a flavor's nodes form one domain:
Kueue still counts their free capacity, and a replacement pod may run on any node of its flavor, the refilled
one included.

A workload admitted to a flavor gets the flavor's node labels as a node selector and its tolerations: the
preemptible flavor pins the pods to preemptible nodes. A TAS flavor must name a node label, and standard nodes
may lack the compute-class label, so the standard flavor names one every node has (:data:`EVERY_NODE_LABEL`):
a ``STANDARD`` pod's own affinity and the preemptible taint keep it off preemptible nodes, and a
``PREEMPTIBLE_FIRST`` pod that Kueue places there under the standard flavor still runs at half price.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from together_clusters.platform import COMPUTE_CLASS_LABEL, GPU_RESOURCE, PREEMPTIBLE, ComputeClass, Taint
from together_clusters.platform.charts import KUEUE_API_VERSION, QUEUE_NAME_LABEL

from ..args import WorkloadQueueArgs
from ..placement import toleration_for
from ..violations import Violation
from .checks import at_least, refuse_invalid
from .common import Manifest

EVERY_NODE_LABEL = ("kubernetes.io/os", "linux")
"""A label the kubelet puts on every Linux node: the standard flavor's, which must name one."""

TOPOLOGY_LEVEL = EVERY_NODE_LABEL[0]
"""The Topology's one level: a flavor's nodes are one domain (never a single node, see above)."""

FLAVOR_ORDER = (ComputeClass.PREEMPTIBLE, ComputeClass.STANDARD)
"""The flavors in the order Kueue tries them: preemptible (half price) first, then idle standard GPUs."""


def flavor_name(queue: str, compute_class: ComputeClass) -> str:
    """The ResourceFlavor of ``compute_class`` (cluster-wide, so prefixed by the queue's name)."""
    return f"{queue}-{compute_class.value}"


def standard_quota(standard_gpus: int, reserve_standard_gpus: int) -> int:
    """The standard GPUs the queue may admit workloads to: the cluster's, less the reserve for critical
    pods (never below zero)."""
    return max(0, int(standard_gpus) - reserve_standard_gpus)


def argument_violations(args: WorkloadQueueArgs) -> list[Violation]:
    """Every problem of a WorkloadQueue's plain arguments (the GPU counts may be outputs, checked by Kueue)."""
    return at_least("reserve_standard_gpus", args.reserve_standard_gpus, 0)


POD_QUOTA = 100_000
"""The pods a flavor of a queue that counts pods admits at once: no limit in practice (a node's own pod
capacity is the real one, which Topology Aware Scheduling checks)."""


def workload_queue(
    name: str,
    args: WorkloadQueueArgs,
    standard: Any = None,
    preemptible: Any = None,
    counts_pods: bool = False,
) -> list[Manifest]:
    """The Topology, the two ResourceFlavors, the ClusterQueue and the LocalQueue of ``args``.

    ``standard`` and ``preemptible`` are the GPU quotas as the shell has them (ints, or outputs it derived
    with :func:`standard_quota`); by default those of ``args``, which must then be ints. ``counts_pods``: see
    :func:`cluster_queue`.
    """
    refuse_invalid(f"WorkloadQueue {name!r}", argument_violations(args))
    queue = args.queue_name or name
    if standard is None:
        standard = standard_quota(int(args.standard_gpus), args.reserve_standard_gpus)
    if preemptible is None:
        preemptible = int(args.preemptible_gpus)
    labels = {"app.kubernetes.io/name": queue, "app.kubernetes.io/managed-by": "pulumi"}
    topology = f"{queue}-nodes"
    quotas = {ComputeClass.PREEMPTIBLE: preemptible, ComputeClass.STANDARD: standard}
    return [
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "Topology",
            "metadata": {"name": topology, "labels": dict(labels)},
            "spec": {"levels": [{"nodeLabel": TOPOLOGY_LEVEL}]},
        },
        *(
            resource_flavor(queue, compute_class, labels, args.preemptible_taint, topology)
            for compute_class in FLAVOR_ORDER
        ),
        cluster_queue(queue, labels, quotas, counts_pods=counts_pods),
        local_queue(queue, args.namespace, labels),
    ]


def cluster_queue(
    queue: str,
    labels: Mapping[str, str],
    quotas: Mapping[ComputeClass, Any],
    admission_checks: Sequence[str] = (),
    counts_pods: bool = False,
) -> Manifest:
    """The ClusterQueue of ``queue``: GPU quota per flavor (``quotas``, ints or outputs), tried in
    :data:`FLAVOR_ORDER`, falling through to the next flavor rather than preempting; ``admission_checks`` a
    workload must pass once it has quota (a FleetQueue's MultiKueue).

    ``counts_pods``: the flavors also cover ``pods`` (:data:`POD_QUOTA`), so that a pod set without GPUs (a
    fleet TrainingRun's coordinator) is given a flavor. Kueue v0.17.0 assigns flavors per requested covered
    resource only, and under Topology Aware Scheduling a pod set with no flavor is refused ("no TAS flavor
    assigned", ``tas_flavorassigner.go``), which would keep the whole workload out."""
    spec: Manifest = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        # Quota short on preemptible: fall back to standard rather than preempt another workload.
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "resourceGroups": [
            {
                "coveredResources": [GPU_RESOURCE, *(["pods"] if counts_pods else [])],
                "flavors": [
                    {
                        "name": flavor_name(queue, compute_class),
                        "resources": [
                            {"name": GPU_RESOURCE, "nominalQuota": quotas[compute_class]},
                            *([{"name": "pods", "nominalQuota": POD_QUOTA}] if counts_pods else []),
                        ],
                    }
                    for compute_class in FLAVOR_ORDER
                ],
            }
        ],
    }
    if admission_checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in admission_checks]}
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": queue, "labels": dict(labels)},
        "spec": spec,
    }


def local_queue(queue: str, namespace: str, labels: Mapping[str, str]) -> Manifest:
    """The LocalQueue workloads in ``namespace`` are submitted to, of the ClusterQueue ``queue``."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": queue, "namespace": namespace, "labels": dict(labels)},
        "spec": {"clusterQueue": queue},
    }


def resource_flavor(
    queue: str,
    compute_class: ComputeClass,
    labels: Mapping[str, str],
    taint: Taint | None,
    topology: str | None,
) -> Manifest:
    """The ResourceFlavor of ``compute_class``: the preemptible one names the compute-class label and the
    ``taint`` (tolerated); with a ``topology`` (Topology Aware Scheduling: quota fitted onto real nodes) the
    standard one names a label every node has, as a TAS flavor must name one."""
    spec: Manifest = {}
    if topology is not None:
        key, value = EVERY_NODE_LABEL
        spec = {"topologyName": topology, "nodeLabels": {key: value}}
    if compute_class is ComputeClass.PREEMPTIBLE:
        spec["nodeLabels"] = {COMPUTE_CLASS_LABEL: PREEMPTIBLE}
        if taint is not None:
            spec["nodeTaints"] = [{"key": taint.key, "value": taint.value, "effect": taint.effect}]
            spec["tolerations"] = [toleration_for(taint)]
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(queue, compute_class), "labels": dict(labels)},
        "spec": spec,
    }


def submitted_to(manifest: Manifest, queue: str | None) -> Manifest:
    """``manifest`` (a Job or JobSet) submitted to the LocalQueue ``queue``: labelled with its name, so
    Kueue's webhook creates it suspended and Kueue starts it once admitted; unchanged when ``queue`` is
    ``None``.

    A plain Job is then ready for pulumi once it exists, not once it has started (a queued Job may wait).
    """
    if queue is None:
        return manifest
    metadata = dict(manifest["metadata"])
    metadata["labels"] = {**(metadata.get("labels") or {}), QUEUE_NAME_LABEL: queue}
    if manifest["kind"] == "Job":
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **QUEUED_JOB_READY_ANNOTATIONS}
    return {**manifest, "metadata": metadata}


QUEUED_JOB_READY_ANNOTATIONS: Mapping[str, str] = {"pulumi.com/waitFor": "jsonpath={.metadata.uid}"}
"""On a queued plain Job instead of waiting for its start: the queue decides when it starts."""
