"""Fine-tune on preemptible GPUs.

A Together cluster with 8 standard and 16 preemptible GPUs, a checkpoint volume on the cluster's shared
filesystem, and a BatchJob that survives preemption: a preempted pod saves within its grace period and
exits 143, the Job ignores the disruption and starts a replacement, which resumes from the checkpoint.

Stack config: ``renderYamlTo`` (a directory) writes the manifests there instead of applying them (use
it against the emulator); ``clusterName``, ``region``, ``gpuType``, ``image`` override the defaults.
"""

import pulumi

from together_clusters.components import (
    BatchJob,
    BatchJobArgs,
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    SharedVolume,
)
from together_clusters.components.demo import demo_cluster

gpu = demo_cluster("ft", num_preemptible_gpus=16)

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(
        storage=SharedVolume(claim_name="finetune-checkpoints", size="500Gi"), namespace="default"
    ),
    opts=gpu.opts(),
)

finetune = BatchJob(
    "finetune",
    BatchJobArgs(
        container=ContainerSpec(
            image=pulumi.Config().get("image") or "ghcr.io/example/finetune:latest",
            command=("python", "-m", "finetune", "--base-model", "llama-3-8b", "--dataset", "/data/chat"),
            gpus=8,
        ),
        checkpoint=store.storage,
        # Exit code 2 is a bad flag or dataset: retrying would fail the same way.
        non_retriable_exit_codes=(2,),
        ttl_seconds_after_finished=24 * 3600,
    ),
    opts=gpu.opts(store),
)

pulumi.export("cluster_id", gpu.cluster.cluster_id)
pulumi.export("job_name", finetune.job_name)
pulumi.export("checkpoint_claim", store.claim_name)
