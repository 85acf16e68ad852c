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
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.report import Outcome
from together_clusters.cli.drill.runner import DrillArgs, run_drill
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions

from ._programs import batch_job, local_process
from ._twin import Stack, checkpoint_folder, module_stack, pod_log, running_pod, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-local-drills-0123456789abcdef"
HITS_PER_MODE = 2
TRAIN_LOOP = Path(__file__).resolve().parent / "workloads" / "train_loop.py"

PROGRAM = batch_job(
    "local-drills",
    local_process(TRAIN_LOOP),
    # The oracle reads every save; pruning would hide the preempted pod's last.
    "checkpointing=Checkpointing(keep_checkpoints=1000)",
)


# Speed 60: the 300 s grace lasts 5 s (the runtime's save budget 270/60 = 4.5 s).
stack = module_stack("local-drills", PROGRAM, API_KEY, TwinOptions(job_pod_failure_backoff="1s"), speed=60)


def of_run(job: str) -> str:
    """The pods of the run: the BatchJob is a JobSet (the default), recreated fresh after each preemption."""
    return f"jobset.sigs.k8s.io/jobset-name={job}"


def settled_pod(core: client.CoreV1Api, job: str) -> Any:
    """The run's one pod, once it is the only one left alive and its loop has started (restored)."""
    pods = core.list_namespaced_pod("default", label_selector=of_run(job)).items
    alive = [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]
    if len(alive) != 1 or alive[0].status.phase != "Running" or alive[0].metadata.deletion_timestamp:
        return None
    return alive[0] if logged(core, alive[0].metadata.name, "training from step=") else None


def saved_steps(folder: Path) -> list[tuple[int, str]]:
    """Every complete checkpoint's (step, pod that wrote it), from the manifests on disk."""
    saved = []
    for manifest in folder.glob("ckpt-*/MANIFEST.json"):
        body = json.loads(manifest.read_text())
        saved.append((int(body["step"]), str(body["metadata"]["pod"])))
    return sorted(saved)


def logged(core: client.CoreV1Api, pod: str, text: str) -> bool:
    return text in pod_log(core, pod, container="main")


@pytest.mark.parametrize("mode", list(TerminationMode), ids=[m.value for m in TerminationMode])
def test_a_real_training_loop_resumes_from_the_step_its_preempted_process_saved(
    stack: Stack, mode: TerminationMode
) -> None:
    job = f"loop-{mode.value}"
    stack.set_config("jobName", job)
    api = up(stack)
    core = client.CoreV1Api(api)
    admin = AdminClient(stack.emulator.base_url)
    try:
        pod = wait_for(lambda: running_pod(core, of_run(job)), f"{job} to run")
        wait_for(lambda: logged(core, pod.metadata.name, "training from step=0"), "the loop to start fresh")
        folder = checkpoint_folder(stack.emulator, core, pod)
        for _ in range(HITS_PER_MODE):
            pod = wait_for(lambda: settled_pod(core, job), f"{job} to settle")
            admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 64)  # the refill needs free GPUs
            args = DrillArgs(
                node=pod.spec.node_name,  # the drill preempts exactly the node running the run's pod
                twin_url=stack.emulator.base_url,
                termination=mode,
                timeout_seconds=240,
                log_wait_seconds=60,
            )
            report = run_drill(api, args, progress=lambda _line: None)
            (row,) = [w for w in report.workloads if (w.kind, w.name) == ("JobSet", job)]
            assert row.outcome is Outcome.SURVIVED, row
            assert row.resumed is not None, row
            preempted = pod.metadata.name
            last_saved = max(step for step, writer in saved_steps(folder) if writer == preempted)
            assert row.resumed.step == last_saved, (row, saved_steps(folder))
            print(f"{mode.value}: {preempted} saved step {last_saved} last; its replacement resumed from it")
    finally:
        admin.close()
        api.close()
