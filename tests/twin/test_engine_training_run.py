"""A TrainingRun deployed with a real ``pulumi up`` onto the twin survives the preemption of one worker, then
of another right after: each lost worker is replaced, the workers' Job never fails, and the coordinator
(the rendezvous host, on the standard node) is never touched.

The twin's simulated pods run no container, so "every rank resumes from the same step" is not exercised here:
test_engine_local_training_run.py runs the workers as real processes (a torchrun-elastic stand-in) for that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions

from ._twin import drill_twin, node_classes, running_pods, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-training-key-0123456789abcdef"

PROGRAM = """\
import pulumi

from together_clusters.components import CheckpointStore, CheckpointStoreArgs, ContainerSpec, SharedVolume
from together_clusters.components import TrainingRun, TrainingRunArgs
from together_clusters.components.demo import demo_cluster

gpu = demo_cluster("train", num_preemptible_gpus=24)
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="pretrain-checkpoints", size="100Gi")),
    opts=gpu.opts(),
)
TrainingRun(
    "pretrain",
    TrainingRunArgs(
        coordinator=ContainerSpec(image="registry.invalid/train:1", command=("python", "-m", "store"), cpu="1"),
        worker=ContainerSpec(image="registry.invalid/train:1", command=("torchrun", "-m", "train"), gpus=8),
        num_workers=2,
        checkpoint=store.storage,
        namespace="default",
        run_name="pretrain",
    ),
    opts=gpu.opts(store),
)
pulumi.export("kube_config", gpu.cluster.kube_config)
"""


def test_a_training_run_survives_one_worker_preempted_then_a_second(tmp_path: Path) -> None:
    options = TwinOptions(job_pod_failure_backoff="1s")
    with twin_stack(tmp_path, "twin-training", PROGRAM, API_KEY, options=options, speed=60) as stack:
        emulator = stack.emulator
        api = up(stack)
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        admin = AdminClient(emulator.base_url)
        try:
            classes = node_classes(core)

            def workers() -> list[Any]:
                return [p for p in running_pods(core) if classes.get(p.spec.node_name) == "preemptible"]

            wait_for(lambda: len(workers()) == 2, "both workers to run")
            on_standard = {
                p.metadata.uid for p in running_pods(core) if classes.get(p.spec.node_name) == "standard"
            }
            assert on_standard  # the coordinator

            hits = 0
            for mode in (TerminationMode.SIGNAL, TerminationMode.EVICTION, TerminationMode.DELETE):
                # Back to back: the next preemption comes as soon as the last lost worker has a replacement.
                report = drill_twin(api, admin, emulator.base_url, mode)
                hits += sum(w.pods_lost for w in report.workloads)
                classes = node_classes(core)
            assert hits >= 2

            wait_for(lambda: len(workers()) == 2, "both workers to run again")
            for job in batch.list_namespaced_job("default").items:
                failed = [c for c in job.status.conditions or [] if c.type == "Failed" and c.status == "True"]
                assert not failed, (job.metadata.name, failed)
            still = {p.metadata.uid for p in running_pods(core)}
            assert on_standard <= still  # the coordinator was never disrupted
        finally:
            admin.close()
            api.close()
