"""Fine-tune on preemptible GPUs.

A Together cluster with 8 standard and 16 preemptible GPUs, a checkpoint volume on the cluster's shared
filesystem, and a BatchJob that survives preemption: a preempted pod saves within its grace period and
exits 143, the JobSet holding the run's Job recreates that Job fresh (no growing backoff), and its pod
resumes from the checkpoint. ``provider_for(cluster)`` installs JobSet (v0.11)
from its official chart unless the cluster has it already.

The dataset is read from the PersistentVolumeClaim ``datasetClaim`` (default ``datasets``, an existing
claim on the cluster's shared filesystem), mounted read-only at /data. The Hugging Face token comes from
the Secret ``hf-token`` (key ``token``), never from the program or its state.

Stack config: ``renderYamlTo`` (a directory) writes the manifests there instead of applying them (use
it against the emulator); ``clusterName``, ``region``, ``gpuType``, ``image``, ``datasetClaim`` override
the defaults.
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
)
from together_clusters.components.args import DataVolume, SecretEnv
from together_clusters.components.demo import demo_cluster

config = pulumi.Config()
gpu = demo_cluster("ft", num_preemptible_gpus=16)

store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="finetune-checkpoints", size="500Gi")),
    opts=gpu.opts(),
)

finetune = BatchJob(
    "finetune",
    BatchJobArgs(
        container=ContainerSpec(
            image=config.get("image") or "ghcr.io/example/finetune:latest",
            command=("python", "-m", "finetune", "--base-model", "llama-3-8b", "--dataset", "/data/chat"),
            gpus=8,
            volumes=(
                DataVolume(
                    name="dataset", mount_path="/data", claim_name=config.get("datasetClaim") or "datasets"
                ),
            ),
            secret_env={"HF_TOKEN": SecretEnv(secret="hf-token", key="token")},
            shm_size="32Gi",  # data loader workers share batches through /dev/shm
        ),
        checkpoint=store.storage,
        ttl_seconds_after_finished=24 * 3600,
        # Exit code 2 is a bad flag or dataset: retrying would fail the same way.
        retries=Retries(non_retriable_exit_codes=(2,)),
    ),
    opts=gpu.opts(store),
)

pulumi.export("cluster_id", gpu.cluster.cluster_id)
pulumi.export("job_name", finetune.job_name)
pulumi.export("checkpoint_claim", store.claim_name)
