"""Batch inference on preemptible GPUs, with production replicas on standard nodes.

Workers pull requests from a queue. On preemption the preStop pause runs, then SIGTERM: the worker takes
no new request and finishes the one in flight within DRAIN_BUDGET_SECONDS or hands it back to the queue
(``components.checkpoint.RequestDrain``), so it is retried by another worker. The production replicas
are marked critical and placed on standard nodes; the guard refuses them anywhere else.

Stack config: ``renderYamlTo``, ``clusterName``, ``region``, ``gpuType``, ``image``.
"""

import pulumi

from components import (
    BatchInference,
    BatchInferenceArgs,
    ComputeClass,
    ContainerSpec,
    provider_from_stack_config,
)
from provider import Cluster, ClusterArgs

config = pulumi.Config()

cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name=config.get("clusterName") or f"infer-{pulumi.get_stack()}",
        region=config.get("region") or "us-central-8",
        gpu_type=config.get("gpuType") or "RTX_6000_PCI",
        num_gpus=8,
        num_preemptible_gpus=16,
    ),
)
kubernetes = pulumi.ResourceOptions(provider=provider_from_stack_config(cluster))
image = config.get("image") or "ghcr.io/example/batch-infer:latest"

workers = BatchInference(
    "batch-infer",
    BatchInferenceArgs(
        container=ContainerSpec(image=image, command=("python", "-m", "worker", "--queue", "jobs"), gpus=1),
        replicas=16,
        grace_period_seconds=120,
        pre_stop_seconds=5,
        max_unavailable="25%",
    ),
    opts=kubernetes,
)

production = BatchInference(
    "serving",
    BatchInferenceArgs(
        container=ContainerSpec(
            image=image, command=("python", "-m", "worker", "--queue", "priority"), gpus=1
        ),
        replicas=2,
        compute_class=ComputeClass.STANDARD,
        critical=True,
    ),
    opts=kubernetes,
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("workers", workers.deployment_name)
pulumi.export("production", production.deployment_name)
