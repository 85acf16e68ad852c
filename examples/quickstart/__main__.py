"""Quickstart: one GPU cluster with 8 standard and 8 preemptible GPUs.

Runs against whatever TOGETHER_BASE_URL / TOGETHER_API_KEY point at; `scripts/up` starts the
local emulator and points them there. Every value can be changed with `pulumi config set`.
"""

import pulumi

from together_clusters.provider import Cluster, ClusterArgs
from together_clusters.provider.settings import ADOPT_CONFIG_KEY

config = pulumi.Config()

cluster = Cluster(
    "quickstart",
    ClusterArgs(
        cluster_name=config.get("clusterName") or f"quickstart-{pulumi.get_stack()}",
        region=config.require("region"),
        gpu_type=config.require("gpuType"),
        num_gpus=config.require_int("numGpus"),
        num_preemptible_gpus=config.require_int("numPreemptibleGpus"),
        # Set only to take in a cluster this stack made but never recorded (the error of a rerun names it).
        adopt_cluster_id=config.get(ADOPT_CONFIG_KEY),
        ready_timeout_minutes=config.get_float("readyTimeoutMinutes") or 60,
    ),
)

for output in (
    "cluster_id",
    "status",
    "num_gpus",
    "desired_preemptible_gpus",
    "allocated_preemptible_gpus",
    "preemptible_shortfall_gpus",
    "standard_nodes",
    "preemptible_nodes",
    "recent_preemptions",
    "created_at",
    "kube_config",  # a secret: `pulumi stack output kube_config --show-secrets`
):
    pulumi.export(output, getattr(cluster, output))
