"""A learning-rate x warmup sweep on preemptible GPUs.

One JobSet per trial: trial ``i`` reads its parameters with
``together_clusters.components.checkpoint.trial_parameters()``, checkpoints under its own run key and, when
preempted, gets a fresh Job at once (no Job backoff builds up however often it is preempted) and resumes.
A trial fails for good after ``backoff_limit_per_index`` real failures; the other trials go on. The six
2-GPU trials fit the 16 preemptible GPUs at once.

Stack config: ``renderYamlTo``, ``clusterName``, ``region``, ``gpuType``, ``image``.
"""

import itertools

import pulumi

from together_clusters.components import (
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    Retries,
    SharedVolume,
    Sweep,
    SweepArgs,
)
from together_clusters.components.demo import demo_cluster

gpu = demo_cluster("sweep", num_preemptible_gpus=16)

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="sweep-checkpoints", size="200Gi")),
    opts=gpu.opts(),
)

trials = tuple(
    {"learning_rate": lr, "warmup_steps": warmup}
    for lr, warmup in itertools.product((1e-5, 3e-5, 1e-4), (0, 500))
)

sweep = Sweep(
    "lr-sweep",
    SweepArgs(
        container=ContainerSpec(
            image=pulumi.Config().get("image") or "ghcr.io/example/trainer:latest",
            command=("python", "-m", "train", "--max-steps", "2000"),
            gpus=2,
        ),
        trials=trials,
        checkpoint=store.storage,
        retries=Retries(backoff_limit=2),
    ),
    opts=gpu.opts(store),
)

pulumi.export("cluster_id", gpu.cluster.cluster_id)
pulumi.export("job_sets", sweep.job_sets)
