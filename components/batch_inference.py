"""BatchInference: request workers on preemptible nodes that finish or hand back the request in flight."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import BatchInferenceArgs


class BatchInference(ManifestComponent):
    """A Deployment of workers; a Service when they are routed to; a PodDisruptionBudget on standard nodes.

    Contract with the worker (see ``together_clusters.components.checkpoint.RequestDrain``): on SIGTERM
    take no new request; finish the one in flight within DRAIN_BUDGET_SECONDS, or stop it and hand it
    back to its queue once its thread has stopped, so another worker serves it exactly once.

    Short of GPUs, ``pulumi up`` does not wait for the pods: it returns once the cluster accepted the
    Deployment (once its controller observed it, not once replicas are available) and warns of what cannot be
    placed now (see :mod:`~together_clusters.components.capacity`); the pods wait Pending.
    """

    deployment_name: pulumi.Output[str]
    namespace: pulumi.Output[str]

    def __init__(
        self, name: str, args: BatchInferenceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            "BatchInference",
            name,
            args,
            lambda plain: manifests.batch_inference(name, plain),
            opts,
            args.placement.preemptible_taint,
        )
        deployment = self.child("Deployment")
        self.deployment_name = metadata_field(deployment, "name")
        self.namespace = metadata_field(deployment, "namespace")
        self.finish({"deployment_name": self.deployment_name, "namespace": self.namespace})
