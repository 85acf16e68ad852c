"""A distributed training run that uses preemptible GPUs for its workers.

The coordinator (rendezvous and bookkeeping) and a login pod run on standard nodes; four workers run on
preemptible nodes and reach the coordinator at COORDINATOR_HOST:COORDINATOR_PORT through a headless
Service. Everyone mounts the same checkpoint volume; each worker keeps its shard under ``rank-<i>``.

Stack config: ``renderYamlTo``, ``clusterName``, ``region``, ``gpuType``, ``image``.
"""

import pulumi

from components import (
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    SharedVolume,
    TrainingRun,
    TrainingRunArgs,
    provider_from_stack_config,
)
from provider import Cluster, ClusterArgs

config = pulumi.Config()

cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name=config.get("clusterName") or f"train-{pulumi.get_stack()}",
        region=config.get("region") or "us-central-8",
        gpu_type=config.get("gpuType") or "RTX_6000_PCI",
        num_gpus=8,
        num_preemptible_gpus=32,
    ),
)
kubernetes = pulumi.ResourceOptions(provider=provider_from_stack_config(cluster))
image = config.get("image") or "ghcr.io/example/trainer:latest"

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="pretrain-checkpoints", size="2Ti")),
    opts=kubernetes,
)

run = TrainingRun(
    "pretrain",
    TrainingRunArgs(
        coordinator=ContainerSpec(
            image=image, command=("python", "-m", "coordinator"), cpu="4", memory="16Gi"
        ),
        worker=ContainerSpec(image=image, command=("python", "-m", "worker"), gpus=8),
        num_workers=4,
        checkpoint=store.storage,
        login=ContainerSpec(image="ghcr.io/example/login:latest", command=("sleep", "infinity")),
    ),
    opts=pulumi.ResourceOptions.merge(kubernetes, pulumi.ResourceOptions(depends_on=[store])),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("coordinator_host", run.coordinator_host)
