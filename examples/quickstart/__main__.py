"""Quickstart: one GPU cluster with 8 standard and 8 preemptible GPUs.

Runs against whatever TOGETHER_BASE_URL / TOGETHER_API_KEY point at; `scripts/up` starts the
local emulator and points them there. Every value can be changed with `pulumi config set`.
"""

import pulumi

from together_clusters.provider import Cluster
from together_clusters.provider.stack_config import cluster_args_from_config

config = pulumi.Config()

cluster = Cluster(
    "quickstart",
    cluster_args_from_config(
        config,
        num_gpus=config.require_int("numGpus"),
        num_preemptible_gpus=config.require_int("numPreemptibleGpus"),
        default_name=f"quickstart-{pulumi.get_stack()}",
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
