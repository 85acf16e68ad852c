"""Section 7's preemption drill: the finetune example deployed with a real ``pulumi up`` on the twin, its
pod preempted through the drill of ``together-clusters drill``, timed from T+0 to the replacement Running.

The twin runs at clock speed 60 with the Job and JobSet controllers at their upstream settings. The example's
BatchJob is a JobSet (``fresh_job_per_attempt``, the default): a preemption recreates its Job fresh, with no
pod-failure backoff (a plain Job would add 10 s, doubling with every preemption). The pod is made to use its
whole grace period (300 s, 5 s at speed 60) to exit, as a checkpoint that takes all the time it is given
would.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from tests import _engine
from together_clusters.cli.drill.runner import DrillArgs, run_drill
from together_clusters.components.demo import DEFAULT_GPU_TYPE, DEFAULT_REGION
from together_clusters.components.platform import GRACE_PERIOD_LIMIT_SECONDS
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.kwok_config import TERMINATION_DURATION
from together_clusters.emulator.kubernetes.options import TerminationMode
from together_clusters.provider.kubeconfig import kubeconfig_text

from .context import Context
from .figures import Figure, Goal
from .servers import API_KEY, Served, api_client, twin_emulator
from .stacks import PulumiFailed

NAME = "preemption drill of the finetune example at speed 60"
SPEED = 60.0
GRACE_S = GRACE_PERIOD_LIMIT_SECONDS / SPEED
SLACK_S = 5.0
"""What the goal allows above the floor: the scheduler, kwok's start of the pod, the drill's 0.5 s polls."""
WAIT_S = 300.0


def _pulumi(args: list[str], project: Path, env: dict[str, str]) -> None:
    proc = _engine.run_pulumi(args, cwd=project, env=env)
    if proc.returncode != 0:
        raise PulumiFailed(f"pulumi {args[0]}: {_engine.output(proc)[-3000:]}")


def _deploy(ctx: Context, emulator: Served) -> tuple[client.ApiClient, str]:
    """``pulumi up`` of a copy of the example, then what its user owns; the kubeconfig client and Job name."""
    project = _engine.copy_example("finetune", ctx.workdir / "finetune")
    env = _engine.engine_env(
        ctx.workdir, extra={"TOGETHER_BASE_URL": emulator.url, "TOGETHER_API_KEY": API_KEY}
    )
    _pulumi(["stack", "init", "bench"], project, env)
    ctx.progress("twin drill: pulumi up of examples/finetune")
    _pulumi(["up", *_engine.UP_FLAGS], project, env)
    job = str(_engine.stack_outputs(project, env)["job_name"])
    with api_client(emulator.url) as api:
        [cluster] = api.get("/v1/compute/clusters").json()["clusters"]
    kube = config.new_client_from_config_dict(yaml.safe_load(kubeconfig_text(cluster["kube_config"]) or ""))
    core: Any = client.CoreV1Api(kube)
    core.create_namespaced_persistent_volume_claim(
        "default",
        {
            "metadata": {"name": "datasets"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    core.create_namespaced_secret("default", {"metadata": {"name": "hf-token"}, "stringData": {"token": "t"}})
    return kube, job


def _running_pod(core: Any, job: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        # The example's BatchJob is a JobSet (fresh_job_per_attempt, the default): its pods carry its name.
        pods = core.list_namespaced_pod(
            "default", label_selector=f"jobset.sigs.k8s.io/jobset-name={job}"
        ).items
        running = [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
        if running:
            return running[0]
        time.sleep(0.5)
    raise RuntimeError(f"the pod of Job {job} did not run within {WAIT_S:g}s")


def run(ctx: Context) -> Figure:
    floor = GRACE_S
    with twin_emulator(SPEED) as emulator:
        kube, job = _deploy(ctx, emulator)
        core: Any = client.CoreV1Api(kube)
        admin = AdminClient(emulator.url)
        try:
            pod = _running_pod(core, job)
            # The pod takes its whole grace period to exit, as a checkpoint using all it is given would.
            annotations = {"metadata": {"annotations": {TERMINATION_DURATION: f"{GRACE_S:g}s"}}}
            core.patch_namespaced_pod(pod.metadata.name, "default", annotations)
            admin.set_capacity(DEFAULT_REGION, DEFAULT_GPU_TYPE, 64)  # a refill has somewhere to come from
            args = DrillArgs(
                node=pod.spec.node_name,
                twin_url=emulator.url,
                termination=TerminationMode.EVICTION,
                timeout_seconds=WAIT_S,
                log_wait_seconds=0,
            )
            report = run_drill(kube, args, progress=ctx.progress)
            hit = next((w for w in report.workloads if (w.kind, w.name) == ("JobSet", job)), None)
            if hit is None or hit.seconds_to_replacement is None:
                raise RuntimeError(
                    f"the drill of {pod.spec.node_name} did not see JobSet {job} replaced: {report}"
                )
            return Figure(
                "7. Twin",
                NAME,
                hit.seconds_to_replacement,
                "s",
                f"{floor:.0f} s: the {GRACE_PERIOD_LIMIT_SECONDS} s grace the pod uses ({GRACE_S:g} s at "
                f"speed {SPEED:g}); the JobSet's fresh Job adds no pod-failure backoff",
                Goal("<=", floor + SLACK_S, "s"),
                note=(
                    "T+0 (the drill's preemption request, eviction mode) to the replacement pod Running on "
                    "another node, as `together-clusters drill` observes it (0.5 s polls); goal: the floor + "
                    f"{SLACK_S:g} s for the JobSet's recreate, scheduling and the pod's start"
                ),
            )
        finally:
            admin.close()
            kube.close()
