"""A Together AI GPU cluster with standard and preemptible GPUs.

Stack config (``pulumi config set KEY VALUE``): ``region``, ``gpuType``, ``numGpus``, ``numPreemptibleGpus``;
``clusterName`` (default ``<project>-<stack>``); ``adoptClusterId`` (take in a cluster this stack made but never
recorded, as the error of a rerun says); the API key as the secret ``together:apiKey`` or the
environment variable ``TOGETHER_API_KEY``.
"""

import pulumi

from together_clusters.provider import Cluster
from together_clusters.provider.stack_config import cluster_args_from_config

config = pulumi.Config()

cluster = Cluster(
    "cluster",
    cluster_args_from_config(
        config,
        num_gpus=config.require_int("numGpus"),
        num_preemptible_gpus=config.get_int("numPreemptibleGpus") or 0,
    ),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("status", cluster.status)
pulumi.export("allocated_preemptible_gpus", cluster.allocated_preemptible_gpus)
pulumi.export("preemptible_shortfall_gpus", cluster.preemptible_shortfall_gpus)
# A secret: `pulumi stack output kubeconfig --show-secrets > kubeconfig.yaml`.
pulumi.export("kubeconfig", cluster.kube_config)
