"""Issue 23's proof: the ``finetune`` and ``sweep`` templates, made by ``pulumi new`` from the wheel installed in
a fresh virtualenv, go from nothing to running pods in one ``pulumi up`` on a bare cluster (the twin
pre-installs nothing: ``provider_for`` installs JobSet from its chart, and the twin's kubelet runs the chart's
manager pod as the real binary); ``together-clusters drill`` of that virtualenv preempts a node under the
workload and every workload survives; the next preview plans nothing; ``pulumi destroy`` leaves no cluster
(the template's Kubernetes objects are ``deleted_with`` the cluster, so nothing of them can be left stuck).
On the sweep's cluster a second stack of the user's (its own ``provider_for(kubeconfig)`` and a BatchJob)
runs its JobSet on the JobSet the first stack installed, installing nothing; its destroy deletes its objects
one by one while the first stack's JobSet manager runs on.

The platform is the repository's emulator (in this process); everything of the user's (the program, the
dynamic-provider host, the ``together-clusters`` command) comes from the virtualenv.

Oracles: the cluster's objects as its API server has them, read with the ``kubernetes`` client (pods Running,
the manager's container a local process, the JobSets' child Jobs), the drill's JSON report, the engine's
exit codes and state, and the compute API's list of the user's clusters.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from tests import _engine
from tests.twin._twin import GPU, REGION, kube_clients, wait_for
from tests.twin.conftest import require_twin
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.server import RunningEmulator, start_emulator
from together_clusters.platform.charts import JOBSET
from together_clusters.provider.kubeconfig import kubeconfig_text

from .conftest import Distributions, InstalledVenv, user_venv
from .test_templates_engine import API_KEY, UserProject, ok

pytestmark = [pytest.mark.engine, pytest.mark.twin]

STACK = "dev"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSETS = ("jobset.x-k8s.io", "v1alpha2", "default", "jobsets")
# The template's pods each ask for a whole preemptible node (finetune), or share two (sweep: 6 trials of 2 GPUs
# on 16): all of them run at once.
EXPECTED_PODS = {"finetune": 1, "sweep": 6}

SECOND_STACK = """\
import pulumi

from together_clusters.components import BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs
from together_clusters.components import ContainerSpec, SharedVolume, provider_for

kubernetes = provider_for(pulumi.Config().require_secret("kubeconfig"))
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="eval-checkpoints", size="10Gi")),
    opts=pulumi.ResourceOptions(provider=kubernetes),
)
job = BatchJob(
    "eval",
    BatchJobArgs(
        container=ContainerSpec(image="ghcr.io/example/eval:latest", command=("python", "-m", "eval"), gpus=2),
        checkpoint=store.storage,
    ),
    opts=pulumi.ResourceOptions(provider=kubernetes, depends_on=[store]),
)
pulumi.export("job_name", job.job_name)
"""


@pytest.fixture(scope="module")
def user_env(distributions: Distributions, tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    """The user's virtualenv: the wheel with the ``drill`` extra (the Kubernetes client of the drill)."""
    _engine.require_engine()
    require_twin()
    return user_venv(distributions, tmp_path_factory.mktemp("user"), "drill")


@pytest.fixture(scope="module")
def platform() -> Iterator[RunningEmulator]:
    """The emulator with a bare twin, 120 times real time (a cluster's bring-up takes 5 s, a preempted node's
    300 s grace 2.5 s); the Job controller's first pod-failure backoff 1 s."""
    _engine.require_engine()
    require_twin()
    with start_emulator(speed=120, kubernetes=TwinOptions(job_pod_failure_backoff="1s")) as emulator:
        # A preemption takes its GPUs out of the pool; the refill that replaces the node needs free ones.
        emulator.admin.set_capacity(REGION, GPU, 1024)
        yield emulator


def as_user(emulator: RunningEmulator, path: str) -> Any:
    """``GET path`` of the compute API with the user's key: its JSON body."""
    reply = httpx.get(
        f"{emulator.base_url}{path}", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30
    )
    assert reply.status_code == 200, reply.text
    return reply.json()


def running_workload_pods(core: client.CoreV1Api) -> list[Any]:
    """The JobSets' pods in ``default`` that run and are not being deleted."""
    pods = core.list_namespaced_pod("default", label_selector=JOBSET_NAME_LABEL).items
    return [p for p in pods if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


def all_running(core: client.CoreV1Api, template: str) -> list[Any] | None:
    """The template's running pods when all of them run, else None."""
    pods = running_workload_pods(core)
    return pods if len(pods) == EXPECTED_PODS[template] else None


def manager_containers(core: client.CoreV1Api) -> list[str]:
    """The container ids of JobSet's Running manager pods (``local://<pid>``: a process of the real binary)."""
    return [
        status.container_id or ""
        for pod in core.list_namespaced_pod(JOBSET.namespace).items
        if pod.status.phase == "Running"
        for status in pod.status.container_statuses or []
        if status.ready
    ]


def drill(user: InstalledVenv, project: UserProject, kubeconfig: Path, base_url: str, node: str) -> Any:
    """``together-clusters drill --twin`` of the user's virtualenv on ``node``; its JSON report."""
    proc = subprocess.run(
        [
            str(user.bin("together-clusters")),
            "drill",
            "--kubeconfig",
            str(kubeconfig),
            "--twin",
            base_url,
            "--node",
            node,
            "--timeout",
            "240",
            "--log-wait",
            "0",
            "--json",
        ],
        cwd=project.work,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("template", ["finetune", "sweep"])
def test_template_runs_on_a_bare_cluster_survives_a_drill_and_destroys(
    template: str, user_env: InstalledVenv, platform: RunningEmulator, tmp_path: Path
) -> None:
    started = time.monotonic()
    project = UserProject(tmp_path, template, user_env, platform.base_url)
    source = ok(user_env.run(user_env.python, "-m", "together_clusters.templates", template, cwd=tmp_path))
    new = ["new", source.stdout.strip(), "--dir", str(project.dir), "--stack", STACK, "--yes"]
    new += ["--non-interactive", "--runtime-options", f"virtualenv={user_env.path}"]
    ok(project.pulumi(*new, cwd=tmp_path))
    outputs: dict[str, Any] = {}
    try:
        ok(project.pulumi("up", *_engine.UP_FLAGS))
        deployed = time.monotonic()
        outputs = _engine.stack_outputs(project.dir, project.env)
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            kubeconfig_text(as_user(platform, f"/v1/compute/clusters/{outputs['cluster_id']}")["kube_config"])
            or ""
        )
        api = kube_clients(kubeconfig.read_text())
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)

        # JobSet's manager, installed by the up from its chart, runs as a process of the real binary.
        assert manager_containers(core), core.list_namespaced_pod(JOBSET.namespace)
        assert all(c.startswith("local://") for c in manager_containers(core)), manager_containers(core)
        # It reconciled the template's JobSets: each has its child Job, and every pod runs.
        names = [outputs["job_name"]] if template == "finetune" else list(outputs["job_sets"])
        found = client.CustomObjectsApi(api).list_namespaced_custom_object(*JOBSETS)["items"]
        assert sorted(j["metadata"]["name"] for j in found) == sorted(names)
        for name in names:
            selector = f"{JOBSET_NAME_LABEL}={name}"
            wait_for(
                lambda s=selector: batch.list_namespaced_job("default", label_selector=s).items,
                f"{name}'s Job",
            )
        pods = wait_for(lambda: all_running(core, template), f"every pod of the {template} template running")

        # A preemption of the node under the first pod: every workload on it gets a Running replacement.
        report = drill(user_env, project, kubeconfig, platform.base_url, pods[0].spec.node_name)
        assert report["ok"] is True, report
        hit = {w["name"] for w in report["workloads"] if w["kind"] == "JobSet"}
        assert hit and hit <= set(names), report
        wait_for(lambda: all_running(core, template), f"every pod of {template} running again", timeout=240)
        drilled = time.monotonic()

        if template == "sweep":
            second_stack_uses_the_installed_jobset(tmp_path, user_env, project, kubeconfig, api)

        # Installed and reconciled: the next run plans nothing (no reinstall, no conflict).
        preview = project.pulumi("preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes")
        assert preview.returncode == 0, _engine.output(preview)

        ok(project.pulumi("destroy", *_engine.UP_FLAGS))
        api.close()
    finally:
        if _engine.stack_resources(project.dir, project.env):
            project.pulumi("destroy", *_engine.UP_FLAGS)
    assert _engine.stack_resources(project.dir, project.env) == []
    assert outputs["cluster_id"] not in {
        c["cluster_id"] for c in as_user(platform, "/v1/compute/clusters")["clusters"]
    }
    print(
        f"\n{template} on the bare twin: new and up {deployed - started:.0f} s, drill {drilled - deployed:.0f} s, "
        f"preview and destroy {time.monotonic() - drilled:.0f} s"
    )


def second_stack_uses_the_installed_jobset(
    tmp_path: Path, user_env: InstalledVenv, first: UserProject, kubeconfig: Path, api: client.ApiClient
) -> None:
    """A second stack of the user's on the same cluster (its own ``provider_for(kubeconfig)``): its preview
    notes the JobSet the first stack installed, its up installs no chart, and its BatchJob's JobSet runs."""
    second = _engine.write_project(tmp_path / "second", "second", SECOND_STACK, virtualenv=user_env.path)
    pulumi = _engine.pulumi_in(second, first.env)
    core = client.CoreV1Api(api)
    pulumi("stack", "init", STACK)
    pulumi("config", "set", "--secret", "kubeconfig", kubeconfig.read_text())
    try:
        preview = pulumi("preview", *_engine.PREVIEW_FLAGS, "--diff")
        shown = _engine.output(preview)
        assert "installed by organization/my-sweep/dev): using it, not installing it" in shown, shown
        assert "helm.sh/v4:Chart" not in shown, shown
        pulumi("up", *_engine.UP_FLAGS)
        types = {r["type"] for r in _engine.stack_resources(second, first.env)}
        assert not any(t.startswith("kubernetes:helm.sh") for t in types), types
        job = _engine.stack_outputs(second, first.env)["job_name"]
        wait_for(
            lambda: [p for p in running_workload_pods(core) if p.metadata.labels[JOBSET_NAME_LABEL] == job],
            f"the second stack's JobSet {job} running",
        )
    finally:
        pulumi("destroy", *_engine.UP_FLAGS)
    # The first stack's JobSet manager is untouched by the second's destroy.
    assert manager_containers(core), "the second stack's destroy took JobSet's manager away"
