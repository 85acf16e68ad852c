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

from tests import _engine
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions
from together_clusters.emulator.server import start_emulator

from ._twin import COMPUTE_CLASS, drill_twin, kube_clients, wait_for
from .conftest import require_twin

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


def running(core: client.CoreV1Api) -> list[Any]:
    pods = core.list_namespaced_pod("default").items
    return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


def test_a_training_run_survives_one_worker_preempted_then_a_second(tmp_path: Path) -> None:
    _engine.require_engine()
    require_twin()
    with start_emulator(speed=60, kubernetes=TwinOptions(job_pod_failure_backoff="1s")) as emulator:
        project = _engine.write_project(tmp_path / "prog", "twin-training", PROGRAM)
        env = _engine.engine_env(
            tmp_path, extra={"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        )
        _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
        up = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=project, env=env)  # no renderYamlTo
        assert up.returncode == 0, _engine.output(up)
        api = kube_clients(_engine.stack_outputs(project, env)["kube_config"])
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        admin = AdminClient(emulator.base_url)
        try:
            classes = {n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items}

            def workers() -> list[Any]:
                return [p for p in running(core) if classes.get(p.spec.node_name) == "preemptible"]

            wait_for(lambda: len(workers()) == 2, "both workers to run")
            on_standard = {
                p.metadata.uid for p in running(core) if classes.get(p.spec.node_name) == "standard"
            }
            assert on_standard  # the coordinator

            hits = 0
            for mode in (TerminationMode.SIGNAL, TerminationMode.EVICTION, TerminationMode.DELETE):
                # Back to back: the next preemption comes as soon as the last lost worker has a replacement.
                report = drill_twin(api, admin, emulator.base_url, mode)
                hits += sum(w.pods_lost for w in report.workloads)
                classes = {n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items}
            assert hits >= 2

            wait_for(lambda: len(workers()) == 2, "both workers to run again")
            for job in batch.list_namespaced_job("default").items:
                failed = [c for c in job.status.conditions or [] if c.type == "Failed" and c.status == "True"]
                assert not failed, (job.metadata.name, failed)
            still = {p.metadata.uid for p in running(core)}
            assert on_standard <= still  # the coordinator was never disrupted
        finally:
            admin.close()
            api.close()
            _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env)
