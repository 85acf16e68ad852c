"""A Sweep deployed with a real ``pulumi up`` onto the twin: every trial finishes after preemptions during its
run, and a changed trial parameter gives that trial (only) a new checkpoint key, so it starts fresh.

Oracles: the real Job controller (Indexed Job conditions, succeeded count) and the ConfigMap the API server
holds, read with the ``kubernetes`` client. The twin's pods run no container, so "starts fresh" is shown by
the run key the runtime would resume from, not by a restore.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.components.manifests import RUN_KEYS_FILE
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions

from ._twin import drill_twin, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-sweep-key-0123456789abcdef"

PROGRAM = """\
import json

import pulumi

from together_clusters.components import CheckpointStore, CheckpointStoreArgs, ContainerSpec, SharedVolume
from together_clusters.components import Sweep, SweepArgs
from together_clusters.components.demo import demo_cluster

gpu = demo_cluster("sweep", num_preemptible_gpus=16)
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="sweep-checkpoints", size="100Gi")),
    opts=gpu.opts(),
)
rates = json.loads(pulumi.Config().require("rates"))
Sweep(
    "lr",
    SweepArgs(
        container=ContainerSpec(image="registry.invalid/train:1", command=("python", "-m", "train"), gpus=8),
        trials=tuple({"learning_rate": r} for r in rates),
        checkpoint=store.storage,
        namespace="default",
        sweep_name="lr",
    ),
    opts=gpu.opts(store),
)
pulumi.export("kube_config", gpu.cluster.kube_config)
"""


def run_keys(core: client.CoreV1Api) -> list[str]:
    maps = core.list_namespaced_config_map("default").items
    [keys] = [json.loads(m.data[RUN_KEYS_FILE]) for m in maps if RUN_KEYS_FILE in (m.data or {})]
    return list(keys)


def sweep_pods(core: client.CoreV1Api) -> list[Any]:
    return list(core.list_namespaced_pod("default", label_selector="job-name=lr").items)


def test_a_sweep_finishes_every_trial_after_preemptions_and_a_changed_trial_starts_fresh(
    tmp_path: Path,
) -> None:
    options = TwinOptions(job_pod_failure_backoff="1s")
    with twin_stack(tmp_path, "twin-sweep", PROGRAM, API_KEY, options=options, speed=60) as stack:
        emulator = stack.emulator
        stack.set_config("rates", "[0.1, 0.2, 0.3]")
        api = up(stack)
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        admin = AdminClient(emulator.base_url)
        try:
            # Two 8-GPU trials run at a time on the two preemptible nodes; preempt during the run.
            wait_for(
                lambda: sum(p.status.phase == "Running" for p in sweep_pods(core)) == 2, "two trials to run"
            )
            hit = 0
            for mode in (TerminationMode.EVICTION, TerminationMode.SIGNAL, TerminationMode.DELETE):
                report = drill_twin(api, admin, emulator.base_url, mode)
                hit += sum(w.name == "lr" for w in report.workloads)
            assert hit >= 2

            # Let every running trial finish until the Indexed Job completes: no index was lost.
            def complete() -> Any:
                for pod in sweep_pods(core):
                    annotations = pod.metadata.annotations or {}
                    if pod.status.phase == "Running" and EXIT_CODE not in annotations:
                        core.patch_namespaced_pod(
                            pod.metadata.name, "default", {"metadata": {"annotations": {EXIT_CODE: "0"}}}
                        )
                status = batch.read_namespaced_job_status("lr", "default").status
                return next(
                    (c for c in status.conditions or [] if c.type == "Complete" and c.status == "True"), None
                )

            wait_for(complete, "every trial to finish", timeout=240)
            status = batch.read_namespaced_job_status("lr", "default").status
            assert status.succeeded == 3 and status.completed_indexes == "0-2" and not status.failed_indexes

            before = run_keys(core)
            stack.set_config("rates", "[0.1, 0.25, 0.3]")
            up(stack).close()
            after = run_keys(core)
            assert after[0] == before[0] and after[2] == before[2]  # unchanged trials resume their own state
            assert after[1] != before[1]  # the changed trial gets a key no checkpoint was saved under
        finally:
            admin.close()
            api.close()
