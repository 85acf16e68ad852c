"""A distributed training run that uses preemptible GPUs for its workers.

The coordinator (rendezvous and bookkeeping) and a login pod run on standard nodes; four workers run on
preemptible nodes and reach the coordinator at COORDINATOR_HOST:COORDINATOR_PORT through a headless
Service. Everyone mounts the same checkpoint volume; each worker keeps its shard under ``rank-<i>``.

Stack config: ``renderYamlTo``, ``clusterName``, ``region``, ``gpuType``, ``image``.
"""

import pulumi

from together_clusters.components import (
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    SharedVolume,
    TrainingRun,
    TrainingRunArgs,
)
from together_clusters.components.demo import demo_cluster

gpu = demo_cluster("train", num_preemptible_gpus=32)
image = pulumi.Config().get("image") or "ghcr.io/example/trainer:latest"

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="pretrain-checkpoints", size="2Ti")),
    opts=gpu.opts(),
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
    opts=gpu.opts(store),
)

pulumi.export("cluster_id", gpu.cluster.cluster_id)
pulumi.export("coordinator_host", run.coordinator_host)
