"""The GPU cluster the examples deploy to, read from stack config, with its Kubernetes provider.

Stack config, read as every stack reads it (:func:`~together_clusters.provider.stack_config.cluster_args_from_config`):
``clusterName``, ``region``, ``gpuType`` override the defaults, ``adoptClusterId`` takes in a cluster the stack
made but never recorded; ``renderYamlTo`` (a directory) writes the manifests there instead of applying them
(see :func:`provider_from_stack_config`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from together_clusters.provider import Cluster
from together_clusters.provider.stack_config import cluster_args_from_config

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
    cluster = Cluster(
        "gpu",
        cluster_args_from_config(
            pulumi.Config(),
            num_gpus=num_gpus,
            num_preemptible_gpus=num_preemptible_gpus,
            default_name=f"{name_prefix}-{pulumi.get_stack()}",
            default_region=DEFAULT_REGION,
            default_gpu_type=DEFAULT_GPU_TYPE,
        ),
    )
    return DemoCluster(cluster, provider_from_stack_config(cluster))
