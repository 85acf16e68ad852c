"""A hyperparameter sweep on the preemptible GPUs of a Together cluster: one JobSet per trial.

Trial ``i`` reads its parameters with ``together_clusters.components.checkpoint.trial_parameters()``,
checkpoints under its own directory and, when preempted, gets a fresh Job at once and resumes. A trial
fails for good after ``backoff_limit_per_index`` real failures; the others go on. Every trial starts at
once; those beyond the cluster's free GPUs wait Pending. Edit ``TRIALS`` to choose the grid.

Stack config: ``region``, ``gpuType``, ``numPreemptibleGpus``, ``image``, ``gpusPerTrial``;
``clusterName`` (default ``<project>-<stack>``); ``renderYamlTo`` (a directory: write the manifests there
instead of applying them); the API key as the secret ``together:apiKey`` or ``TOGETHER_API_KEY``.

With ``renderYamlTo`` the Kubernetes objects are only written to files, on no cluster, so ``pulumi refresh``
cannot read them back: refresh the rest with ``pulumi refresh --exclude '**kubernetes:**'``.
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
    provider_for,
)
from together_clusters.provider import Cluster
from together_clusters.provider.stack_config import cluster_args_from_config

TRIALS = tuple(
    {"learning_rate": learning_rate, "warmup_steps": warmup_steps}
    for learning_rate, warmup_steps in itertools.product((1e-5, 3e-5, 1e-4), (0, 500))
)

config = pulumi.Config()

cluster = Cluster(
    "cluster",
    # One standard node (a cluster needs at least one) and the preemptible GPUs the workload runs on.
    cluster_args_from_config(
        config, num_gpus=8, num_preemptible_gpus=config.require_int("numPreemptibleGpus")
    ),
)
kubernetes = provider_for(cluster, render_dir=config.get("renderYamlTo"))

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="sweep-checkpoints", size="200Gi")),
    opts=pulumi.ResourceOptions(provider=kubernetes),
)

sweep = Sweep(
    "sweep",
    SweepArgs(
        container=ContainerSpec(
            image=config.require("image"),
            command=("python", "-m", "train"),
            gpus=config.require_int("gpusPerTrial"),
        ),
        trials=TRIALS,
        checkpoint=store.storage,
        retries=Retries(backoff_limit=2),
    ),
    opts=pulumi.ResourceOptions(provider=kubernetes, depends_on=[store]),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("job_sets", sweep.job_sets)
