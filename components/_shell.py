"""The shell every component shares: resolve Inputs, guard the rendered objects, create them as children."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import pulumi

from together_clusters.platform import DEFAULT_PREEMPTIBLE_TAINT, Taint

from . import guard, kube
from .capacity import ClusterCapacity, gpu_needs, placement_verdict
from .controller_needs import descheduler_asked, move_back_warning, wait_for_controllers
from .fleet_checks import fleet_workload_violations, is_fleet
from .inputs import Placeholders, without_placeholders
from .manifests.checks import refuse_invalid
from .resource_types import TYPE_PREFIX

A = TypeVar("A")


class ManifestComponent(pulumi.ComponentResource):
    """A component made of rendered Kubernetes objects, refused before registration if its arguments break
    a rule (``build`` raises one ArgsError listing every problem) or the guard objects (PlacementRefused).

    ``args`` may hold ``pulumi.Input`` values anywhere (see :mod:`.inputs`); the guard sees the plain
    layout. Children are parented to the component, so they inherit its Kubernetes provider and its
    aliases: their names start with the component's, so renaming the component with
    ``ResourceOptions(aliases=[pulumi.Alias(name=old_name)])`` keeps every child's URN too.
    """

    type_token: ClassVar[str | None] = None
    """The Pulumi type the component registers as, when not ``together:components:<type_name>``: the plugin
    ``together`` constructs its components as the package schema names them (``together:index:BatchJob``)."""

    resources: dict[str, pulumi.CustomResource]
    """The children, keyed by ``Kind/name`` of the object each one creates (or ``Kind`` when the name is
    only known at apply time)."""

    def __init__(
        self,
        type_name: str,
        name: str,
        args: A,
        build: Callable[[A], Sequence[Mapping[str, Any]]],
        opts: pulumi.ResourceOptions | None,
        taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT,
    ) -> None:
        placeholders = Placeholders()
        plain_args = placeholders.plain(args)
        refuse_invalid(f"{type_name} {name!r}", fleet_workload_violations(args, kube.cluster_of(opts)))
        manifests = [dict(m) for m in build(plain_args)]
        # Before registering anything, so a refused layout leaves nothing half-declared in the plan.
        guard.enforce(f"{type_name} {name!r}", manifests, taint)
        super().__init__(self.type_token or f"{TYPE_PREFIX}:{type_name}", name, None, opts)
        self.plain_args = plain_args
        self.manifests = manifests
        """The rendered objects, with a placeholder where an Input's value goes."""
        cluster = kube.cluster_of(opts)
        wanted = opts.deleted_with if opts is not None else None
        # Objects of a kind a controller serves (a JobSet) wait for the provider's ClusterControllers, so they
        # are created after it and deleted before it; with none declared, a cluster without it is refused.
        controllers = wait_for_controllers(f"{type_name} {name!r}", manifests, opts)
        warning = move_back_warning(f"{type_name} {name!r}", manifests, descheduler_asked(opts))
        if warning is not None:
            pulumi.log.warn(warning, resource=self)
        child_opts = pulumi.ResourceOptions(
            parent=self, deleted_with=wanted or cluster, depends_on=_with_queue(controllers, args)
        )
        self.resources = {}
        for manifest in self.manifests:
            kind = manifest["kind"]
            object_name = without_placeholders(str(manifest["metadata"]["name"]), kind.lower())
            key = f"{kind}/{object_name}"
            resource_name = f"{name}-{kind.lower()}-{object_name}"
            self.resources[key] = kube.create(resource_name, placeholders.restore(manifest), child_opts)
        self.names = pulumi.Output.from_input(sorted(self.resources))
        if not is_fleet(
            getattr(args, "queue", None)
        ):  # the manager runs nothing: its workers' capacity counts
            warn_of_scarcity(self, f"{type_name} {name!r}", manifests, cluster)

    def child(self, kind: str, object_name: str | None = None) -> pulumi.CustomResource:
        """The child of ``kind`` (named ``object_name`` when the component has several of that kind)."""
        (resource,) = (
            r
            for key, r in self.resources.items()
            if key.split("/", 1)[0] == kind and object_name in (None, key.split("/", 1)[1])
        )
        return resource

    def finish(self, outputs: Mapping[str, Any]) -> None:
        """Register the component's outputs (always includes the names of the objects it created)."""
        self.register_outputs({"names": self.names, **outputs})


CAPACITY_OUTPUTS = (
    "gpu_type",
    "num_gpus",
    "desired_preemptible_gpus",
    "allocated_preemptible_gpus",
    "auto_scale",
    "auto_scale_max_gpus",
)
"""The ``Cluster`` outputs a workload's placement is weighed against."""


def warn_of_scarcity(
    component: pulumi.Resource,
    subject: str,
    manifests: Sequence[Mapping[str, Any]],
    cluster: pulumi.Resource | None,
) -> None:
    """Once the cluster's GPU counts are known, warn on ``component`` of the GPUs of ``manifests`` it cannot
    place now (a one-line note when ``PREEMPTIBLE_FIRST`` pods run on standard GPUs instead); nothing without
    a cluster (a provider given a kubeconfig) or GPUs. The decision is :func:`.capacity.placement_verdict`."""
    needs = gpu_needs(manifests)
    if cluster is None or not needs:
        return

    def report(values: list[Any]) -> None:
        capacity = ClusterCapacity.from_outputs(dict(zip(CAPACITY_OUTPUTS, values, strict=True)))
        if capacity is None:
            return
        verdict = placement_verdict(subject, needs, capacity)
        if verdict.warning:
            pulumi.log.warn(verdict.warning, resource=component)
        if verdict.note:
            pulumi.log.info(verdict.note, resource=component)

    pulumi.Output.all(*(getattr(cluster, key, None) for key in CAPACITY_OUTPUTS)).apply(report)


def _with_queue(
    controllers: pulumi.Input[Sequence[pulumi.Input[pulumi.Resource]]] | None, args: Any
) -> pulumi.Input[Sequence[pulumi.Input[pulumi.Resource]]] | None:
    """What the children wait for: the controllers, and the WorkloadQueue the workload is submitted to
    (``queue=`` a component rather than a name), so its LocalQueue exists first and goes last."""
    queue = getattr(args, "queue", None)
    if not isinstance(queue, pulumi.Resource):
        return controllers
    if controllers is None:
        return [queue]
    if isinstance(controllers, pulumi.Output):
        return controllers.apply(lambda found: [*found, queue])
    return [*controllers, queue]  # type: ignore[misc]


def metadata_field(resource: pulumi.CustomResource, field: str) -> pulumi.Output[Any]:
    """A field of a child's live metadata (its name, or the namespace the provider put it in)."""
    metadata: pulumi.Output[Any] = resource.metadata  # type: ignore[attr-defined]
    return metadata.apply(lambda m: (m or {}).get(field) if isinstance(m, dict) else getattr(m, field, None))
