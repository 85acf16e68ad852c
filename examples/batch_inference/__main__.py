"""Batch inference on preemptible GPUs, with production replicas on standard nodes.

Workers pull requests from a queue, so nothing routes to them and SIGTERM starts the drain at once: the
worker takes no new request and finishes the one in flight within DRAIN_BUDGET_SECONDS, or stops it and
hands it back to the queue (``together_clusters.components.checkpoint.RequestDrain``), so it is retried
by another worker. The production replicas are marked critical and placed on standard nodes (the guard
refuses them anywhere else), with a PodDisruptionBudget against voluntary disruptions.

Stack config: ``renderYamlTo``, ``clusterName``, ``region``, ``gpuType``, ``image``.
"""

import pulumi

from together_clusters.components import (
    BatchInference,
    BatchInferenceArgs,
    ComputeClass,
    ContainerSpec,
    NodePlacement,
    PodSettings,
)
from together_clusters.components.demo import demo_cluster

gpu = demo_cluster("infer", num_preemptible_gpus=16)
image = pulumi.Config().get("image") or "ghcr.io/example/batch-infer:latest"

workers = BatchInference(
    "batch-infer",
    BatchInferenceArgs(
        container=ContainerSpec(image=image, command=("python", "-m", "worker", "--queue", "jobs"), gpus=1),
        replicas=16,
        pod=PodSettings(grace_period_seconds=120),
    ),
    opts=gpu.opts(),
)

production = BatchInference(
    "serving",
    BatchInferenceArgs(
        container=ContainerSpec(
            image=image, command=("python", "-m", "worker", "--queue", "priority"), gpus=1
        ),
        replicas=2,
        max_unavailable=1,
        placement=NodePlacement(compute_class=ComputeClass.STANDARD, critical=True),
    ),
    opts=gpu.opts(),
)

pulumi.export("cluster_id", gpu.cluster.cluster_id)
pulumi.export("workers", workers.deployment_name)
pulumi.export("production", production.deployment_name)
