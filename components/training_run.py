"""TrainingRun: a coordinator on standard nodes and workers on preemptible nodes, sharing checkpoints."""

from __future__ import annotations

import pulumi

from together_clusters.platform import JOBSET_API

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import TrainingRunArgs
from .fleet_checks import is_fleet


class TrainingRun(ManifestComponent):
    """A headless Service for the coordinator, the coordinator Job (standard nodes, critical), the workers'
    headless Service and one JobSet per worker (or one Indexed Job for all; preemptible nodes), and
    optionally a critical login Deployment on standard nodes (see :class:`TrainingRunArgs`). Given a
    :class:`~together_clusters.components.FleetQueue`, the whole run is one JobSet (a coordinator Job and the
    workers' Job), which MultiKueue dispatches whole to one worker cluster.

    ``coordinator_host`` is built from the Service the API server holds (its name and namespace).

    Short of GPUs, ``pulumi up`` does not wait for the pods: it returns once the cluster accepted the objects
    (a Job once started, the login Deployment once observed) and warns of what cannot be placed now (see
    :mod:`~together_clusters.components.capacity`); the pods wait Pending.
    """

    coordinator_host: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingRunArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "TrainingRun",
            name,
            args,
            lambda plain: manifests.training_run(name, plain),
            opts,
            args.preemptible_taint,
        )
        run = args.run_name or name
        namespace_given = args.pod.namespace is not None
        # In a fleet: one JobSet, dispatched whole to a worker cluster; the coordinator is its pod, named
        # under the JobSet's own Service there.
        in_fleet = is_fleet(args.queue)
        held = self.child(JOBSET_API.kind, run) if in_fleet else self.child("Service", f"{run}-coordinator")

        def host(found: list[str | None]) -> str:
            relative = manifests.fleet_coordinator_name(str(found[0])) if in_fleet else str(found[0])
            return manifests.coordinator_host(relative, found[1] if namespace_given else None)

        self.coordinator_host = pulumi.Output.all(
            metadata_field(held, "name"), metadata_field(held, "namespace")
        ).apply(host)
        self.finish({"coordinator_host": self.coordinator_host})
