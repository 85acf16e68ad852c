"""A fine-tune on the preemptible GPUs of a Together cluster, checkpointed so that preemption loses no work.

When a preemptible node is reclaimed, the pod gets SIGTERM and up to 300 s to save a checkpoint to the
shared volume; the preemption is not counted as a failure: the JobSet holding the run's Job recreates it
fresh (no growing backoff) and its pod resumes from the last checkpoint. ``provider_for(cluster)``
installs JobSet (v0.11, from its official chart) on the new cluster unless it has it already, and the JobSet
waits for it: no step of your own. The container uses ``together_clusters.components.checkpoint``
(``Checkpointer``, ``PreemptionHandler``) to save and resume.

Stack config: ``region``, ``gpuType``, ``numPreemptibleGpus``, ``image``, ``gpusPerPod``,
``checkpointSize``; ``clusterName`` (default ``<project>-<stack>``); ``renderYamlTo`` (a directory: write
the manifests there instead of applying them); the API key as the secret ``together:apiKey`` or
``TOGETHER_API_KEY``.

With ``renderYamlTo`` the Kubernetes objects are only written to files, on no cluster, so ``pulumi refresh``
cannot read them back: refresh the rest with ``pulumi refresh --exclude '**kubernetes:**'``.
"""

import pulumi

from together_clusters.components import (
    BatchJob,
    BatchJobArgs,
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    Retries,
    SharedVolume,
    provider_for,
)
from together_clusters.provider import Cluster
from together_clusters.provider.stack_config import cluster_args_from_config

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
    CheckpointStoreArgs(
        storage=SharedVolume(claim_name="finetune-checkpoints", size=config.require("checkpointSize"))
    ),
    opts=pulumi.ResourceOptions(provider=kubernetes),
)

finetune = BatchJob(
    "finetune",
    BatchJobArgs(
        container=ContainerSpec(
            image=config.require("image"),
            command=("python", "-m", "finetune"),
            gpus=config.require_int("gpusPerPod"),
        ),
        checkpoint=store.storage,
        ttl_seconds_after_finished=24 * 3600,
        # Exit code 2 is a bad flag or dataset: retrying would fail the same way.
        retries=Retries(non_retriable_exit_codes=(2,)),
    ),
    opts=pulumi.ResourceOptions(provider=kubernetes, depends_on=[store]),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("job_name", finetune.job_name)
pulumi.export("checkpoint_claim", store.claim_name)
