"""FleetQueue: one Kueue queue over several clusters (MultiKueue), the manager's and each worker's objects."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import pulumi
import yaml

from . import kube
from .args import FleetDispatchArgs, FleetQueueArgs, FleetWorkerArgs, WorkloadQueueArgs
from .cluster_controllers import ClusterControllers, ClusterControllersArgs
from .controller_needs import wait_for_controllers
from .fleet_credentials import fleet_kubeconfig
from .manifests import fleet_dispatch as dispatch_builder
from .manifests import fleet_queue as builder
from .manifests.checks import refuse_invalid
from .manifests.workload_queue import standard_quota, workload_queue
from .providers import provider_for
from .resource_types import TYPE_PREFIX
from .validation import ArgsError


class FleetQueue(pulumi.ComponentResource):
    """A Kueue LocalQueue on a manager cluster whose workloads run on one of several worker clusters, in
    several regions (Kueue's MultiKueue, see :mod:`together_clusters.components.manifests.fleet_queue`).

    Created with the manager's provider (Kueue installed on it); each worker is set up through a provider of
    its own made from the worker's kubeconfig (JobSet and Kueue from their official charts, the fleet's
    queue, and a ServiceAccount of least privilege whose token the manager uses)::

        hub_k8s = provider_for(hub, controllers=ClusterControllersArgs(kueue=True))
        fleet = FleetQueue("fleet", FleetQueueArgs(workers=[east, west]),
                           opts=pulumi.ResourceOptions(provider=hub_k8s))
        Sweep("ablation", SweepArgs(..., queue=fleet), opts=pulumi.ResourceOptions(provider=hub_k8s))

    ``local_queue_name``: the LocalQueue workloads are submitted to. ``worker_names``: the workers' names in
    the fleet, in order of preference. ``worker_providers``: each worker's Kubernetes provider, by name.
    """

    local_queue_name: str
    namespace: str
    worker_names: tuple[str, ...]
    worker_clusters: dict[str, Any]
    worker_providers: dict[str, pulumi.ProviderResource]

    def __init__(self, name: str, args: FleetQueueArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        owner = f"FleetQueue {name!r}"
        queue = args.queue_name or name
        workers = args.worker_args()
        names = tuple(_worker_name(worker, index) for index, worker in enumerate(workers))
        manager = kube.cluster_of(opts)
        views = [
            builder.WorkerView(
                worker_name, id(worker.cluster), manager is not None and worker.cluster is manager
            )
            for worker_name, worker in zip(names, workers, strict=True)
        ]
        refuse_invalid(owner, builder.fleet_violations(name, args, views))
        controllers = kube.controllers_of(opts)
        if isinstance(controllers, ClusterControllers):
            controllers.use_multikueue(
                owner,
                builder.multikueue_settings(args.worker_lost_timeout_seconds, args.dispatch is not None),
            )
        super().__init__(f"{TYPE_PREFIX}:FleetQueue", name, None, opts)
        self.local_queue_name = queue
        self.namespace = args.namespace
        self.worker_names = names
        self.worker_providers = {}
        self.worker_clusters = {n: w.cluster for n, w in zip(names, workers, strict=True)}
        self.manager_cluster = manager
        worker_controllers = _worker_controllers(args, controllers)
        _refuse_mixed_gpu_types(owner, names, workers)
        kubeconfigs: dict[str, pulumi.Output[str]] = {}
        readers: dict[str, pulumi.Output[str]] = {}
        for index, (worker_name, worker) in enumerate(zip(names, workers, strict=True)):
            _refuse_slurm(owner, f"workers[{index}]", worker_name, worker.cluster)
            kubeconfigs[worker_name], reader = self._set_up_worker(
                name, queue, args, worker_name, worker, worker_controllers
            )
            if reader is not None:
                readers[worker_name] = reader
        self._set_up_manager(name, queue, args, workers, kubeconfigs, opts)
        if args.dispatch is not None:
            self._set_up_dispatcher(name, queue, args, args.dispatch, readers, opts)
        # What `together-clusters status` reads of the fleet: each worker's cluster, and the manager's.
        self.register_outputs(
            {
                "local_queue_name": queue,
                "namespace": args.namespace,
                "workers": list(names),
                "worker_clusters": {n: cluster.urn for n, cluster in self.worker_clusters.items()},
                "manager_cluster": manager.urn if manager is not None else None,
            }
        )

    def _set_up_worker(
        self,
        name: str,
        queue: str,
        args: FleetQueueArgs,
        worker_name: str,
        worker: FleetWorkerArgs,
        controllers: ClusterControllersArgs,
    ) -> tuple[pulumi.Output[str], pulumi.Output[str] | None]:
        """Declare the worker's provider, controllers, queue, the manager's ServiceAccount there and the
        dispatcher's read-only one; the worker's fleet kubeconfig and the dispatcher's (secret outputs, known
        once the tokens are; the second ``None`` without a dispatcher)."""
        provider = provider_for(
            worker.cluster,
            name=f"{name}-{worker_name}",
            opts=pulumi.ResourceOptions(parent=self),
            controllers=controllers,
        )
        self.worker_providers[worker_name] = provider
        worker_opts = pulumi.ResourceOptions(provider=provider, parent=self)
        reserve = worker.reserve_standard_gpus
        queue_args = WorkloadQueueArgs.following(
            worker.cluster,
            reserve_standard_gpus=reserve,
            namespace=args.namespace,
            queue_name=queue,
            preemptible_taint=args.preemptible_taint,
        )
        standard = pulumi.Output.from_input(queue_args.standard_gpus).apply(
            lambda gpus: standard_quota(gpus, reserve)
        )
        manifests = workload_queue(
            queue, queue_args, standard=standard, preemptible=queue_args.preemptible_gpus, counts_pods=True
        )
        access = builder.worker_access_objects(queue)
        waits = wait_for_controllers(f"FleetQueue {name!r} on {worker_name!r}", manifests, worker_opts)
        child_opts = pulumi.ResourceOptions(
            parent=self, provider=provider, deleted_with=worker.cluster, depends_on=waits
        )
        admin = pulumi.Output.secret(worker.cluster.kube_config)
        prefix = f"{name}-{worker_name}"
        for manifest in manifests:
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            kube.create(f"{prefix}-{kind.lower()}-{object_name}", manifest, child_opts)
        multikueue = _service_account_kubeconfig(
            prefix, worker_name, admin, access, child_opts, json_format=False
        )
        if args.dispatch is None:
            return multikueue, None
        readers = dispatch_builder.worker_reader_objects(queue, builder.KUEUE_NAMESPACE)
        return multikueue, _service_account_kubeconfig(
            prefix, worker_name, admin, readers, child_opts, json_format=True
        )

    def _set_up_manager(
        self,
        name: str,
        queue: str,
        args: FleetQueueArgs,
        workers: tuple[FleetWorkerArgs, ...],
        kubeconfigs: dict[str, pulumi.Output[str]],
        opts: pulumi.ResourceOptions | None,
    ) -> None:
        preemptible = pulumi.Output.all(*(w.cluster.num_preemptible_gpus for w in workers)).apply(
            lambda counts: sum(int(c or 0) for c in counts)
        )
        standard = pulumi.Output.all(*(w.cluster.num_gpus for w in workers)).apply(
            lambda counts: sum(
                standard_quota(int(c or 0), w.reserve_standard_gpus)
                for c, w in zip(counts, workers, strict=True)
            )
        )
        manifests = builder.manager_objects(queue, args, list(kubeconfigs), preemptible, standard)
        waits = wait_for_controllers(f"FleetQueue {name!r}", manifests, opts)
        cluster = kube.cluster_of(opts)
        child_opts = pulumi.ResourceOptions(parent=self, deleted_with=cluster, depends_on=waits)
        secrets: dict[str, pulumi.Resource] = {}
        for worker_name, kubeconfig in kubeconfigs.items():
            manifest = {
                **builder.kubeconfig_secret(queue, worker_name),
                "stringData": {builder.KUBECONFIG_KEY: kubeconfig},
            }
            secrets[worker_name] = kube.create(f"{name}-{worker_name}-kubeconfig", manifest, child_opts)
        self.resources: dict[str, pulumi.CustomResource] = {}
        for manifest in manifests:
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            reads = (manifest["metadata"].get("labels") or {}).get(builder.WORKER_LABEL)
            object_opts = child_opts
            if reads is not None:  # a MultiKueueCluster reads its Secret as soon as it exists
                object_opts = pulumi.ResourceOptions.merge(
                    child_opts, pulumi.ResourceOptions(depends_on=[secrets[reads]])
                )
            self.resources[f"{kind}/{object_name}"] = kube.create(
                f"{name}-{kind.lower()}-{object_name}", manifest, object_opts
            )

    def _set_up_dispatcher(
        self,
        name: str,
        queue: str,
        args: FleetQueueArgs,
        dispatch: FleetDispatchArgs,
        readers: dict[str, pulumi.Output[str]],
        opts: pulumi.ResourceOptions | None,
    ) -> None:
        """The dispatcher on the manager: its objects, and the Secret of the workers' read-only kubeconfigs."""
        cluster = kube.cluster_of(opts)
        child_opts = pulumi.ResourceOptions(parent=self, deleted_with=cluster)
        workers = [(worker, builder.multikueue_cluster_name(queue, worker)) for worker in readers]
        manifest = {
            **dispatch_builder.workers_secret(queue, builder.KUEUE_NAMESPACE),
            "stringData": pulumi.Output.secret(readers),
        }
        secret = kube.create(f"{name}-dispatcher-workers", manifest, child_opts)
        objects = dispatch_builder.manager_dispatch_objects(
            queue, args.namespace, builder.KUEUE_NAMESPACE, workers, dispatch
        )
        after_secret = pulumi.ResourceOptions.merge(child_opts, pulumi.ResourceOptions(depends_on=[secret]))
        for manifest in objects:
            kind, object_name = manifest["kind"], manifest["metadata"]["name"]
            object_opts = after_secret if kind == "Deployment" else child_opts
            kube.create(f"{name}-dispatcher-{kind.lower()}-{object_name}", manifest, object_opts)


def _service_account_kubeconfig(
    prefix: str,
    worker_name: str,
    admin: pulumi.Output[str],
    objects: list[dict[str, Any]],
    opts: pulumi.ResourceOptions,
    json_format: bool,
) -> pulumi.Output[str]:
    """Create a ServiceAccount's objects on a worker (its token Secret after it) and return the kubeconfig of
    its token (a secret output, known once the token is: never at a preview of a new worker; read in memory)."""
    created: dict[str, pulumi.CustomResource] = {}
    for manifest in objects:
        kind, object_name = manifest["kind"], manifest["metadata"]["name"]
        object_opts = opts
        if kind == "Secret":
            # After its ServiceAccount: the API server deletes a token Secret whose account does not exist.
            object_opts = pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(depends_on=[created["ServiceAccount"]])
            )
        created[kind] = kube.create(f"{prefix}-{kind.lower()}-{object_name}", manifest, object_opts)
    token_secret = next(m["metadata"]["name"] for m in objects if m["kind"] == "Secret")

    def kubeconfig(values: list[Any]) -> str:
        text = fleet_kubeconfig(worker_name, values[0], token_secret)
        return json.dumps(yaml.safe_load(text)) if json_format else text

    return pulumi.Output.secret(
        pulumi.Output.all(admin, created["Secret"].id, created["ClusterRoleBinding"].id).apply(kubeconfig)
    )


def _worker_name(worker: FleetWorkerArgs, index: int) -> str:
    """A worker's name in the fleet: given, else its ``Cluster`` resource's name."""
    if worker.name:
        return worker.name
    resource_name = getattr(worker.cluster, "_name", None)
    return str(resource_name) if isinstance(resource_name, str) else f"worker-{index}"


def _worker_controllers(args: FleetQueueArgs, manager: Any) -> ClusterControllersArgs:
    """What each worker gets installed: ``worker_controllers``, else the manager's, with JobSet and Kueue."""
    given = args.worker_controllers
    if given is None and isinstance(manager, ClusterControllers):
        given = manager.args
    wanted = given if isinstance(given, ClusterControllersArgs) else ClusterControllersArgs()
    return dataclasses.replace(wanted, jobset=True, kueue=True)


def _refuse_mixed_gpu_types(owner: str, names: Sequence[str], workers: Sequence[FleetWorkerArgs]) -> None:
    """Refuse workers of different GPU types once the types are known (at preview when given plainly)."""
    types = [getattr(w.cluster, "gpu_type", None) for w in workers]

    def check(values: list[Any]) -> None:
        violation = builder.gpu_type_violation(names, [v if isinstance(v, str) else None for v in values])
        if violation is not None:
            raise ArgsError(owner, [violation])

    pulumi.Output.all(*types).apply(check)


def _refuse_slurm(owner: str, field: str, worker_name: str, cluster: Any) -> None:
    """Refuse a Slurm worker once its type is known (at preview when the program gives it plainly)."""
    cluster_type = getattr(cluster, "cluster_type", None)
    if cluster_type is None:
        return

    def check(value: Any) -> None:
        violation = (
            builder.slurm_worker_violation(field, worker_name, value) if isinstance(value, str) else None
        )
        if violation is not None:
            raise ArgsError(owner, [violation])

    pulumi.Output.from_input(cluster_type).apply(check)
