"""A distributed training run that uses preemptible GPUs for its workers: torchrun elastic.

The coordinator hosts the c10d rendezvous store on a standard node, where it is never preempted; a
login pod runs there too. Four workers on preemptible nodes each run one torchrun agent (configured by
the ``PET_*`` variables the component sets) under the launch wrapper, which turns torchrun's exit 1 on
SIGTERM into 143. When a worker is preempted the others wait at the rendezvous for its replacement,
then every rank resumes from the same world-committed checkpoint (``WorldCheckpointer``).

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

# The rendezvous store the workers' agents join as clients (PET_RDZV_CONF=is_host=false).
RENDEZVOUS_STORE = (
    "import os, time, torch.distributed as d; "
    "store = d.TCPStore('0.0.0.0', int(os.environ['COORDINATOR_PORT']), is_master=True, wait_for_workers=False); "
    "time.sleep(10**9)"
)

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
            image=image,
            command=("python", "-c", RENDEZVOUS_STORE),
            cpu="4",
            memory="16Gi",
        ),
        worker=ContainerSpec(
            image=image,
            command=("python", "-m", "together_clusters.components.checkpoint.launch", "--"),
            args=("torchrun", "-m", "train"),
            gpus=8,
            memory="512Gi",
        ),
        num_workers=4,
        checkpoint=store.storage,
        login=ContainerSpec(image="ghcr.io/example/login:latest", command=("sleep", "infinity")),
    ),
    opts=gpu.opts(store),
)

pulumi.export("cluster_id", gpu.cluster.cluster_id)
pulumi.export("coordinator_host", run.coordinator_host)
