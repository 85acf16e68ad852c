"""A learning-rate x warmup sweep on preemptible GPUs.

One Indexed Job, one index per trial: pod ``i`` reads trial ``i`` from the mounted ``trials.json``
(``components.checkpoint.trial_parameters()``), checkpoints under ``<sweep>/trial-<i>`` and, when
preempted, is replaced with the same index and resumes. A trial fails for good after
``backoff_limit_per_index`` real failures; the sweep stops after ``max_failed_indexes`` failed trials.

Stack config: ``renderYamlTo``, ``clusterName``, ``region``, ``gpuType``, ``image``.
"""

import itertools

import pulumi

from components import (
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    SharedVolume,
    Sweep,
    SweepArgs,
    provider_from_stack_config,
)
from provider import Cluster, ClusterArgs

config = pulumi.Config()

cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name=config.get("clusterName") or f"sweep-{pulumi.get_stack()}",
        region=config.get("region") or "us-central-8",
        gpu_type=config.get("gpuType") or "RTX_6000_PCI",
        num_gpus=8,
        num_preemptible_gpus=16,
    ),
)
kubernetes = pulumi.ResourceOptions(provider=provider_from_stack_config(cluster))

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="sweep-checkpoints", size="200Gi")),
    opts=kubernetes,
)

trials = tuple(
    {"learning_rate": lr, "warmup_steps": warmup}
    for lr, warmup in itertools.product((1e-5, 3e-5, 1e-4), (0, 500))
)

sweep = Sweep(
    "lr-sweep",
    SweepArgs(
        container=ContainerSpec(
            image=config.get("image") or "ghcr.io/example/trainer:latest",
            command=("python", "-m", "train", "--max-steps", "2000"),
            gpus=2,
        ),
        trials=trials,
        checkpoint=store.storage,
        parallelism=4,
        backoff_limit_per_index=2,
        max_failed_indexes=2,
    ),
    opts=pulumi.ResourceOptions.merge(kubernetes, pulumi.ResourceOptions(depends_on=[store])),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("job_name", sweep.job_name)
pulumi.export("trials_config_map", sweep.trials_config_map)
