"""RemediationGate: approves a cluster's automated node repairs only once the node's work has checkpointed and
moved (``together-clusters remediations gate``, run in the cluster on a standard node)."""

from __future__ import annotations

import pulumi

from ._shell import ManifestComponent
from .args import RemediationGateArgs
from .manifests import remediation_gate as builder


class RemediationGate(ManifestComponent):
    """The remediation gate of one cluster, unattended: every ``interval_seconds`` it looks for automated
    remediations awaiting approval in one of ``modes``, cordons the node, evicts its pods through the Eviction
    API (PodDisruptionBudgets hold; the checkpoint runtime saves in each pod's grace period), waits until no
    pod of the drain still runs there and each workload runs or is queued elsewhere, then approves through the
    compute API. A gate that dies halfway leaves the node cordoned and the remediation pending; its successor
    finds the drain's plan on the Node and finishes it. See :mod:`together_clusters.components.manifests.
    remediation_gate` for the least it is granted::

        provider = provider_for(cluster)
        RemediationGate("gate", RemediationGateArgs(
            cluster_id=cluster.id, modes=["reboot-vm", "vm-only"], image="registry.example/gate:0.1.0",
            api_key=config.require_secret("apiKey")), opts=pulumi.ResourceOptions(provider=provider))
    """

    def __init__(
        self, name: str, args: RemediationGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            "RemediationGate",
            name,
            args,
            lambda plain: builder.remediation_gate(name, plain),
            opts,
        )
        self.namespace = args.namespace
        self.finish({"namespace": self.namespace})
