"""Quickstart: one GPU cluster with 8 standard and 8 preemptible GPUs.

Runs against whatever TOGETHER_BASE_URL / TOGETHER_API_KEY point at; `scripts/up` starts the
local emulator and points them there. Every value can be changed with `pulumi config set`.
"""

import pulumi

from provider import Cluster, ClusterArgs

config = pulumi.Config()

cluster = Cluster(
    "quickstart",
    ClusterArgs(
        cluster_name=config.get("clusterName") or f"quickstart-{pulumi.get_stack()}",
        region=config.require("region"),
        gpu_type=config.require("gpuType"),
        num_gpus=config.require_int("numGpus"),
        num_preemptible_gpus=config.require_int("numPreemptibleGpus"),
        ready_timeout_minutes=config.get_float("readyTimeoutMinutes") or 60,
    ),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("status", cluster.status)
pulumi.export("num_gpus", cluster.num_gpus)
pulumi.export("desired_preemptible_gpus", cluster.desired_preemptible_gpus)
pulumi.export("allocated_preemptible_gpus", cluster.allocated_preemptible_gpus)
pulumi.export("preemptible_shortfall_gpus", cluster.preemptible_shortfall_gpus)
pulumi.export("standard_nodes", cluster.standard_nodes)
pulumi.export("preemptible_nodes", cluster.preemptible_nodes)
pulumi.export("recent_preemptions", cluster.recent_preemptions)
pulumi.export("last_preempted_at", cluster.last_preempted_at)
pulumi.export("created_at", cluster.created_at)
pulumi.export("kube_config", cluster.kube_config)
