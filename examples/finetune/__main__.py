"""Fine-tune on preemptible GPUs.

A Together cluster with 8 standard and 16 preemptible GPUs, a checkpoint volume on the cluster's shared
filesystem, and a BatchJob that survives preemption: a preempted pod saves within its grace period and
exits 143, the Job ignores the disruption and starts a replacement, which resumes from the checkpoint.

Stack config: ``renderYamlTo`` (a directory) writes the manifests there instead of applying them (use
it against the emulator); ``clusterName``, ``region``, ``gpuType``, ``image`` override the defaults.
"""

import pulumi

from components import (
    BatchJob,
    BatchJobArgs,
    CheckpointStore,
    CheckpointStoreArgs,
    ContainerSpec,
    SharedVolume,
    provider_from_stack_config,
)
from provider import Cluster, ClusterArgs

config = pulumi.Config()

cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name=config.get("clusterName") or f"ft-{pulumi.get_stack()}",
        region=config.get("region") or "us-central-8",
        gpu_type=config.get("gpuType") or "RTX_6000_PCI",
        num_gpus=8,
        num_preemptible_gpus=16,
    ),
)
kubernetes = pulumi.ResourceOptions(provider=provider_from_stack_config(cluster))

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(
        storage=SharedVolume(claim_name="finetune-checkpoints", size="500Gi"), namespace="default"
    ),
    opts=kubernetes,
)

finetune = BatchJob(
    "finetune",
    BatchJobArgs(
        container=ContainerSpec(
            image=config.get("image") or "ghcr.io/example/finetune:latest",
            command=("python", "-m", "finetune", "--base-model", "llama-3-8b", "--dataset", "/data/chat"),
            gpus=8,
        ),
        checkpoint=store.storage,
        # Exit code 2 is a bad flag or dataset: retrying would fail the same way.
        non_retriable_exit_codes=(2,),
        ttl_seconds_after_finished=24 * 3600,
    ),
    opts=pulumi.ResourceOptions.merge(kubernetes, pulumi.ResourceOptions(depends_on=[store])),
)

pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("job_name", finetune.job_name)
pulumi.export("checkpoint_claim", store.claim_name)
