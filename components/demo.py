"""The GPU cluster the examples deploy to, read from stack config, with its Kubernetes provider.

Stack config: ``clusterName``, ``region``, ``gpuType`` override the defaults; ``renderYamlTo`` (a
directory) writes the manifests there instead of applying them (see :func:`provider_from_stack_config`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from together_clusters.provider import Cluster, ClusterArgs

from .providers import provider_from_stack_config

DEFAULT_REGION = "us-central-8"
DEFAULT_GPU_TYPE = "RTX_6000_PCI"


@dataclass(frozen=True)
class DemoCluster:
    """A cluster and the Kubernetes provider that deploys onto it."""

    cluster: Cluster
    provider: k8s.Provider

    def opts(self, *depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
        """Options for a component on this cluster, created after ``depends_on``."""
        return pulumi.ResourceOptions(provider=self.provider, depends_on=list(depends_on))


def demo_cluster(name_prefix: str, num_preemptible_gpus: int, num_gpus: int = 8) -> DemoCluster:
    """The cluster ``gpu`` named ``<name_prefix>-<stack>`` unless stack config ``clusterName`` says otherwise."""
    config = pulumi.Config()
    cluster = Cluster(
        "gpu",
        ClusterArgs(
            cluster_name=config.get("clusterName") or f"{name_prefix}-{pulumi.get_stack()}",
            region=config.get("region") or DEFAULT_REGION,
            gpu_type=config.get("gpuType") or DEFAULT_GPU_TYPE,
            num_gpus=num_gpus,
            num_preemptible_gpus=num_preemptible_gpus,
        ),
    )
    return DemoCluster(cluster, provider_from_stack_config(cluster))
