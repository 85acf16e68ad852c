"""One queue over two regions: a sweep and a training run on preemptible GPUs wherever a region has them.

A small standard-only manager cluster (``hub``) and two worker clusters in two regions (``east``, listed
first, and ``west``). The ``FleetQueue`` sets up Kueue's MultiKueue on the manager and, through a provider of
each worker's own, JobSet, Kueue, the fleet's queue and a ServiceAccount of least privilege on the workers. The
sweep is submitted on the manager and each trial runs in a region with free preemptible GPUs. The training run
is one JobSet (its coordinator on a standard node, its workers on preemptible ones) that goes whole to one
region and moves whole. Checkpoints are in S3, which every region reaches (a region's shared volume is refused
for a fleet workload), under a lease that lets only the newest copy of a moved workload commit.

Stack config: ``eastRegion``, ``westRegion``, ``gpuType``, ``image``, ``bucket``, ``s3CredentialsSecret``,
``podsReadyTimeoutSeconds`` (how long a trial's pods may take to run before its worker gives it back),
``workerLostTimeoutSeconds``; ``together:chartSource`` (where the charts come from) as for every stack;
``adoptClusterIds`` (one entry per cluster_name) only to take in a cluster a killed ``pulumi up`` made but never
recorded, as the rerun's error says. The fleet's dispatcher sends each workload to half-price GPUs first and
then to ``east`` before ``west``.
"""

import pulumi

from together_clusters.components import (
    ClusterControllersArgs,
    ComputeClass,
    ContainerSpec,
    FleetQueue,
    FleetQueueArgs,
    KueueSettings,
    NodePlacement,
    S3Bucket,
    Sweep,
    SweepArgs,
    TrainingRun,
    TrainingRunArgs,
    provider_for,
)
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.provider import Cluster, ClusterArgs
from together_clusters.provider.stack_config import adopted_cluster_id

config = pulumi.Config()
stack = pulumi.get_stack()
gpu_type = config.get("gpuType") or DEFAULT_GPU_TYPE


def cluster(name: str, region: str, preemptible_gpus: int) -> Cluster:
    cluster_name = f"fleet-{name}-{stack}"
    return Cluster(
        name,
        ClusterArgs(
            cluster_name=cluster_name,
            region=region,
            gpu_type=gpu_type,
            num_gpus=8,
            num_preemptible_gpus=preemptible_gpus,
            adopt_cluster_id=adopted_cluster_id(config, cluster_name),
        ),
    )


hub = cluster("hub", config.get("westRegion") or DEFAULT_REGION, 0)
east = cluster("east", config.get("eastRegion") or "us-east-2", 16)
west = cluster("west", config.get("westRegion") or DEFAULT_REGION, 16)

kueue = KueueSettings(pods_ready_timeout_seconds=config.get_int("podsReadyTimeoutSeconds") or 600)
hub_k8s = provider_for(hub, name="hub", controllers=ClusterControllersArgs(kueue=True, kueue_settings=kueue))
fleet = FleetQueue(
    "fleet",
    FleetQueueArgs(
        workers=[east, west],
        worker_lost_timeout_seconds=config.get_int("workerLostTimeoutSeconds") or 900,
    ),
    opts=pulumi.ResourceOptions(provider=hub_k8s),
)

image = config.get("image") or "ghcr.io/example/trainer:latest"
checkpoints = S3Bucket(
    bucket=config.get("bucket") or "my-checkpoints",
    credentials_secret=config.get("s3CredentialsSecret") or "s3-credentials",
)

sweep = Sweep(
    "ablation",
    SweepArgs(
        container=ContainerSpec(
            image=image, command=("python", "-m", "train", "--max-steps", "2000"), gpus=4
        ),
        trials=({"dropout": 0.0}, {"dropout": 0.1}),
        checkpoint=checkpoints,
        placement=NodePlacement(ComputeClass.PREEMPTIBLE),
        queue=fleet,
    ),
    opts=pulumi.ResourceOptions(provider=hub_k8s),
)

# The rendezvous store the workers' torchrun agents join as clients (as in examples/training_run).
RENDEZVOUS_STORE = (
    "import os, time, torch.distributed as d; "
    "store = d.TCPStore('0.0.0.0', int(os.environ['COORDINATOR_PORT']), is_master=True, wait_for_workers=False); "
    "time.sleep(10**9)"
)

# Workers reach the coordinator at run.coordinator_host, a name of the JobSet's own Service in whichever
# worker cluster the run lands in.
run = TrainingRun(
    "llm",
    TrainingRunArgs(
        coordinator=ContainerSpec(image=image, command=("python", "-c", RENDEZVOUS_STORE)),
        worker=ContainerSpec(
            image=image,
            command=(
                "python",
                "-m",
                "together_clusters.components.checkpoint.launch",
                "--",
                "torchrun",
                "train.py",
            ),
            gpus=2,
        ),
        num_workers=2,
        checkpoint=checkpoints,
        queue=fleet,
    ),
    opts=pulumi.ResourceOptions(provider=hub_k8s),
)

pulumi.export("kube_config", hub.kube_config)
pulumi.export("east_kube_config", east.kube_config)
pulumi.export("west_kube_config", west.kube_config)
pulumi.export("job_sets", sweep.job_sets)
pulumi.export("coordinator_host", run.coordinator_host)
