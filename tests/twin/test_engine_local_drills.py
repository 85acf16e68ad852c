"""Issue 12's drills with real processes: a BatchJob deployed with a real ``pulumi up`` whose container is a real
training loop on the checkpoint runtime (run by the twin as a local process, ``pod_annotations``), preempted in
every termination mode; ``together-clusters drill`` reports it survived and the step its replacement resumed
from, and that step is the last one the preempted process saved.

Oracles: the checkpoint folder itself (each complete checkpoint's manifest names its step and the pod that
wrote it), read from the host folder behind the claim; the drill's report only says what the replacement
logged, through the Kubernetes API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests import _engine
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.drift.drill import DrillArgs, run_drill
from together_clusters.drift.drill_report import Outcome
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.local_pods import rewrite
from together_clusters.emulator.kubernetes.local_runtime import root_for
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions
from together_clusters.emulator.server import RunningEmulator, start_emulator

from ._twin import kube_clients, wait_for
from .conftest import require_twin

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-local-drills-0123456789abcdef"
HITS_PER_MODE = 2
TRAIN_LOOP = Path(__file__).resolve().parent / "workloads" / "train_loop.py"

PROGRAM = f"""\
import pulumi

from together_clusters.components import BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ContainerSpec
from together_clusters.components import SharedVolume
from together_clusters.components.demo import demo_cluster

config = pulumi.Config()
gpu = demo_cluster("local-drills", num_preemptible_gpus=16)
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="checkpoints", size="100Gi")),
    opts=gpu.opts(),
)
job_name = config.require("jobName")
BatchJob(
    job_name,
    BatchJobArgs(
        container=ContainerSpec(
            image="registry.invalid/train:1",
            command=("python", "-m", "together_clusters.components.checkpoint.launch", "--"),
            args=("python", {str(TRAIN_LOOP)!r}),
            gpus=8,
            pod_annotations={{"twin.together.ai/run": "local"}},
        ),
        checkpoint=store.storage,
        job_name=job_name,
        namespace="default",
        keep_checkpoints=1000,  # the oracle reads every save; pruning would hide the preempted pod's last
    ),
    opts=gpu.opts(store),
)
pulumi.export("kube_config", gpu.cluster.kube_config)
"""


@dataclass(frozen=True)
class Stack:
    project: Path
    env: dict[str, str]
    emulator: RunningEmulator


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    _engine.require_engine()
    require_twin()
    tmp = tmp_path_factory.mktemp("local-drills")
    # Speed 60: the 300 s grace lasts 5 s (the runtime's save budget 270/60 = 4.5 s).
    with start_emulator(speed=60, kubernetes=TwinOptions(job_pod_failure_backoff="1s")) as emulator:
        project = _engine.write_project(tmp / "prog", "twin-local-drills", PROGRAM)
        env = _engine.engine_env(
            tmp, extra={"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        )
        _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
        yield Stack(project, dict(env), emulator)
        _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env)


def running_pod(core: client.CoreV1Api, job: str) -> Any:
    pods = core.list_namespaced_pod("default", label_selector=f"job-name={job}").items
    return next((p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp), None)


def settled_pod(core: client.CoreV1Api, job: str) -> Any:
    """The Job's one pod, once it is the only one left alive and its loop has started (restored)."""
    pods = core.list_namespaced_pod("default", label_selector=f"job-name={job}").items
    alive = [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]
    if len(alive) != 1 or alive[0].status.phase != "Running" or alive[0].metadata.deletion_timestamp:
        return None
    return alive[0] if logged(core, alive[0].metadata.name, "training from step=") else None


def checkpoint_folder(emulator: RunningEmulator, core: client.CoreV1Api, pod: Any) -> Path:
    """The host folder behind the pod's CHECKPOINT_DIR: the bound volume's folder of the twin's runtime."""
    status = httpx.get(f"{emulator.base_url}/_emulator/kubernetes", timeout=30).json()
    (plane,) = status["control_planes"]
    claim = next(v for v in pod.spec.volumes if v.persistent_volume_claim is not None)
    bound = core.read_namespaced_persistent_volume_claim(claim.persistent_volume_claim.claim_name, "default")
    volume = root_for(Path(plane["data_dir"])) / "volumes" / bound.spec.volume_name
    (main,) = pod.spec.containers
    mount = next(m.mount_path for m in main.volume_mounts if m.name == claim.name)
    directory = next(e.value for e in main.env if e.name == "CHECKPOINT_DIR")
    return Path(rewrite(directory, {mount: volume}))


def saved_steps(folder: Path) -> list[tuple[int, str]]:
    """Every complete checkpoint's (step, pod that wrote it), from the manifests on disk."""
    saved = []
    for manifest in folder.glob("ckpt-*/MANIFEST.json"):
        body = json.loads(manifest.read_text())
        saved.append((int(body["step"]), str(body["metadata"]["pod"])))
    return sorted(saved)


def logged(core: client.CoreV1Api, pod: str, text: str) -> bool:
    try:
        return text in core.read_namespaced_pod_log(pod, "default", container="main")
    except client.exceptions.ApiException:
        return False


@pytest.mark.parametrize("mode", list(TerminationMode), ids=[m.value for m in TerminationMode])
def test_a_real_training_loop_resumes_from_the_step_its_preempted_process_saved(
    stack: Stack, mode: TerminationMode
) -> None:
    job = f"loop-{mode.value}"
    _engine.run_pulumi(["config", "set", "jobName", job], cwd=stack.project, env=stack.env, check=True)
    up = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
    assert up.returncode == 0, _engine.output(up)
    api = kube_clients(_engine.stack_outputs(stack.project, stack.env)["kube_config"])
    core = client.CoreV1Api(api)
    admin = AdminClient(stack.emulator.base_url)
    try:
        pod = wait_for(lambda: running_pod(core, job), f"{job} to run")
        wait_for(lambda: logged(core, pod.metadata.name, "training from step=0"), "the loop to start fresh")
        folder = checkpoint_folder(stack.emulator, core, pod)
        for _ in range(HITS_PER_MODE):
            pod = wait_for(lambda: settled_pod(core, job), f"{job} to settle")
            admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 64)  # the refill needs free GPUs
            args = DrillArgs(
                node=pod.spec.node_name,  # the drill preempts exactly the node running the Job's pod
                twin_url=stack.emulator.base_url,
                termination=mode,
                timeout_seconds=240,
                log_wait_seconds=60,
            )
            report = run_drill(api, args, progress=lambda _line: None)
            (row,) = [w for w in report.workloads if (w.kind, w.name) == ("Job", job)]
            assert row.outcome is Outcome.SURVIVED, row
            assert row.resumed is not None, row
            preempted = pod.metadata.name
            last_saved = max(step for step, writer in saved_steps(folder) if writer == preempted)
            assert row.resumed.step == last_saved, (row, saved_steps(folder))
            print(f"{mode.value}: {preempted} saved step {last_saved} last; its replacement resumed from it")
    finally:
        admin.close()
        api.close()
