"""The Pulumi programs of the twin's engine tests: a demo cluster, the checkpoint volume of its workload, and the
one workload a test is about.

A test writes only its workload (``batch_job`` for the commonest, ``checkpointed`` for any other); what every
program shares is written once here: the imports, the cluster, the CheckpointStore the workload saves to, and
the ``kube_config`` output the test's Kubernetes clients are made from.
"""

from __future__ import annotations

from pathlib import Path

from together_clusters.emulator.kubernetes.kwok_config import RUN, RUN_LOCAL

IMAGE = "registry.invalid/train:1"
"""The image of every container: the twin pulls nothing (kwok's pods run nothing, local ones run a script)."""

TRAINER = f'ContainerSpec(image="{IMAGE}", command=("python", "-m", "train"), gpus=8)'
"""A trainer on a node's 8 GPUs, as a ContainerSpec expression of a program: one the twin only simulates."""


def local_process(script: Path) -> str:
    """A ContainerSpec expression of a program for a pod the twin runs as a real local process: ``script``
    under the checkpoint runtime's launch wrapper, on 8 GPUs."""
    return f"""ContainerSpec(
            image="{IMAGE}",
            command=("python", "-m", "together_clusters.components.checkpoint.launch", "--"),
            args=("python", {str(script)!r}),
            gpus=8,
            pod_annotations={{"{RUN}": "{RUN_LOCAL}"}},
        )"""


def checkpointed(cluster_prefix: str, num_preemptible_gpus: int, claim_name: str, workload: str) -> str:
    """A program of ``workload`` (statements that may use ``config``, ``gpu`` and ``store``, and any component
    of ``together_clusters.components``) on the demo cluster ``<cluster_prefix>-test`` with
    ``num_preemptible_gpus``, after the CheckpointStore ``store`` of a 100Gi claim ``claim_name``."""
    return f"""\
import json

import pulumi

from together_clusters.components import BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ContainerSpec
from together_clusters.components import SharedVolume, Sweep, SweepArgs, TrainingRun, TrainingRunArgs
from together_clusters.components import Checkpointing, NodePlacement, PodSettings, Retries
from together_clusters.components.demo import demo_cluster

config = pulumi.Config()
gpu = demo_cluster("{cluster_prefix}", num_preemptible_gpus={num_preemptible_gpus})
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="{claim_name}", size="100Gi")),
    opts=gpu.opts(),
)
{workload}
pulumi.export("kube_config", gpu.cluster.kube_config)
"""


def batch_job(cluster_prefix: str, container: str, *settings: str) -> str:
    """A program of one BatchJob in ``default`` on 16 preemptible GPUs, running ``container`` (a ContainerSpec
    expression) with ``settings`` (more BatchJobArgs keywords, such as ``"retries=Retries(fresh_job_per_attempt=False)"``).

    The Job is named by stack config ``jobName``: a test deploys a new one per case by setting it.
    """
    more = "".join(f"        {setting},\n" for setting in settings)
    return checkpointed(
        cluster_prefix,
        16,
        "checkpoints",
        f"""\
job_name = config.require("jobName")
BatchJob(
    job_name,
    BatchJobArgs(
        container={container},
        checkpoint=store.storage,
        job_name=job_name,
        pod=PodSettings(namespace="default"),
{more}    ),
    opts=gpu.opts(store),
)""",
    )


def training_run(worker: str, *settings: str) -> str:
    """A program of the TrainingRun ``pretrain`` in ``default`` on 24 preemptible GPUs: a simulated coordinator
    and 2 workers running ``worker`` (a ContainerSpec expression), with ``settings`` (more TrainingRunArgs
    keywords)."""
    more = "".join(f"        {setting},\n" for setting in settings)
    return checkpointed(
        "train",
        24,
        "pretrain-checkpoints",
        f"""\
TrainingRun(
    "pretrain",
    TrainingRunArgs(
        coordinator=ContainerSpec(image="{IMAGE}", command=("python", "-m", "store"), cpu="1"),
        worker={worker},
        num_workers=2,
        checkpoint=store.storage,
        run_name="pretrain",
        pod=PodSettings(namespace="default"),
{more}    ),
    opts=gpu.opts(store),
)""",
    )


FLEET_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fleet"
FLEET_EAST = "us-east-2"


def fleet_config(west: str, gpu: str, charts: Path) -> dict[str, str]:
    """The stack config examples/fleet runs with on the twin: its regions (the east first), the GPU type, the
    charts' folder, and short timings (a trial whose pods do not all run within 30 s is given back by its
    worker)."""
    return {
        "eastRegion": FLEET_EAST,
        "westRegion": west,
        "gpuType": gpu,
        "podsReadyTimeoutSeconds": "30",
        "workerLostTimeoutSeconds": "120",
        "together:chartSource": str(charts),
    }
