"""TrainingRun: a coordinator on standard nodes and workers on preemptible nodes, sharing checkpoints."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import TrainingRunArgs


class TrainingRun(ManifestComponent):
    """A headless Service for the coordinator, the coordinator Job (standard nodes, critical), the workers'
    headless Service and one JobSet per worker (or one Indexed Job for all; preemptible nodes), and
    optionally a critical login Deployment on standard nodes (see :class:`TrainingRunArgs`).

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
        service = self.child("Service", f"{args.run_name or name}-coordinator")
        namespace_given = args.pod.namespace is not None
        self.coordinator_host = pulumi.Output.all(
            metadata_field(service, "name"), metadata_field(service, "namespace")
        ).apply(lambda v: manifests.coordinator_host(v[0], v[1] if namespace_given else None))
        self.finish({"coordinator_host": self.coordinator_host})
