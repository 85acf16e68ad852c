"""WorkloadQueue: a Kueue queue whose quotas follow the cluster, trying preemptible capacity first."""

from __future__ import annotations

import pulumi

from . import kube
from .args import WorkloadQueueArgs
from .controller_needs import wait_for_controllers
from .manifests import workload_queue as builder
from .resource_types import TYPE_PREFIX


class WorkloadQueue(pulumi.ComponentResource):
    """A Kueue LocalQueue (and the ClusterQueue, ResourceFlavors and Topology behind it) that admits the
    workloads given ``queue=`` when the cluster has room for all of their pods, preemptible nodes first,
    idle standard GPUs when preemptible ones are short or absent (see
    :mod:`together_clusters.components.manifests.workload_queue` for how Kueue is made to fall through).

    Kueue itself comes from :class:`~together_clusters.components.ClusterControllers` with ``kueue=True``;
    the queue's objects wait for it like the JobSets of the workloads do::

        provider = provider_for(cluster, controllers=ClusterControllersArgs(kueue=True))
        queue = WorkloadQueue("queue", WorkloadQueueArgs.following(cluster, reserve_standard_gpus=8),
                              opts=pulumi.ResourceOptions(provider=provider))
        TrainingRun("llm", TrainingRunArgs(..., queue=queue), opts=pulumi.ResourceOptions(provider=provider))

    ``local_queue_name``: the LocalQueue workloads are submitted to (known at once, so workloads can name it).
    """

    local_queue_name: str
    namespace: str

    def __init__(
        self, name: str, args: WorkloadQueueArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        reserve = args.reserve_standard_gpus
        standard = pulumi.Output.from_input(args.standard_gpus).apply(
            lambda gpus: builder.standard_quota(gpus, reserve)
        )
        preemptible = pulumi.Output.from_input(args.preemptible_gpus)
        # Built with the quotas as outputs: refused (an ArgsError) before anything is registered.
        manifests = builder.workload_queue(name, args, standard=standard, preemptible=preemptible)
        super().__init__(f"{TYPE_PREFIX}:WorkloadQueue", name, None, opts)
        self.local_queue_name = args.queue_name or name
        self.namespace = args.namespace
        controllers = wait_for_controllers(f"WorkloadQueue {name!r}", manifests, opts)
        cluster = kube.cluster_of(opts)
        wanted = opts.deleted_with if opts is not None else None
        child_opts = pulumi.ResourceOptions(
            parent=self, deleted_with=wanted or cluster, depends_on=controllers
        )
        self.resources: dict[str, pulumi.CustomResource] = {}
        for manifest in manifests:
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            # Any order: a ClusterQueue whose flavors are not there yet is inactive until they are.
            self.resources[f"{kind}/{object_name}"] = kube.create(
                f"{name}-{kind.lower()}-{object_name}", manifest, child_opts
            )
        self.register_outputs({"local_queue_name": self.local_queue_name, "namespace": self.namespace})
