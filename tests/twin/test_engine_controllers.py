"""ClusterControllers through the real engine on a bare twin (``--no-jobset``): ``provider_for(cluster)``
installs JobSet's chart (the copy scripts/install-kubernetes takes from the pinned Go module) with the release
image, on standard nodes, marked with the stack; a second stack on the same cluster uses it without
installing it again; dropping the controllers from the program deletes what the chart created.

A cluster that came with JobSet (the twin's ``--jobset``: installed by someone else, not by a chart of this
stack) is left alone: used, not installed over.

Oracles: the objects as the API server has them, read with the ``kubernetes`` client, and the second stack's
preview (its note, no chart in the plan). That the installed JobSet really runs (a JobSet defaulted by its
webhook and reconciled) is tests/twin/test_chart_controllers.py's and the engine tests' on the bare twin.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.components.controllers.releases import INSTALLED_BY_ANNOTATION, INSTALLED_BY_LABEL
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.platform import FALLBACK_PRIORITY_CLASS
from together_clusters.platform.charts import DESCHEDULER, JOBSET, KUEUE, QUEUE_NAME_LABEL

from ._twin import (
    COMPUTE_CLASS,
    DRIVER,
    GPU,
    REGION,
    fast_remediations,
    job_set,
    job_set_condition,
    kept_off_preemptible,
    kube_clients,
    pods_of_job_set,
    ready_deployment,
    remediation_drill_twin,
    running_pod,
    twin_stack,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-controllers-0123456789abcdef"
CHARTS = _engine.ROOT / ".kubernetes" / "charts"
DEPLOYMENT = "jobset-controller"

PROGRAM = f"""\
import pulumi

from together_clusters.components import ClusterControllersArgs, provider_for
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="controllers", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, num_preemptible_gpus=8, nvidia_version_id={DRIVER!r},
                                     ready_timeout_minutes=5))
installs = pulumi.Config().get_bool("installs")
provider_for(cluster, controllers=ClusterControllersArgs(chart_source={str(CHARTS)!r}) if installs else False)
pulumi.export("kube_config", cluster.kube_config)
"""

SECOND = f"""\
import pulumi

from together_clusters.components import ClusterControllersArgs, provider_for

provider_for(pulumi.Config().require_secret("kubeconfig"), controllers=ClusterControllersArgs(chart_source={str(CHARTS)!r}))
"""


def test_provider_for_installs_jobset_on_a_bare_cluster_and_a_second_stack_uses_it(tmp_path: Path) -> None:
    if not (CHARTS / "jobset" / "Chart.yaml").is_file():
        pytest.skip("scripts/install-kubernetes has not copied JobSet's chart")
    with twin_stack(tmp_path, "controllers", PROGRAM, API_KEY, TwinOptions(jobset=False)) as stack:
        stack.set_config("installs", "true")
        api = up(stack)
        apps, extensions = client.AppsV1Api(api), client.ApiextensionsV1Api(api)
        admission = client.AdmissionregistrationV1Api(api)

        # The component waited for the cluster to admit a JobSet; the pod's readiness follows.
        deployment = wait_for(
            lambda: ready_deployment(apps, DEPLOYMENT, JOBSET.namespace), "JobSet's Deployment ready"
        )
        (container,) = deployment.spec.template.spec.containers
        assert (container.image, container.image_pull_policy) == (
            "registry.k8s.io/jobset/jobset:v0.11.0",
            "IfNotPresent",
        )
        assert kept_off_preemptible(deployment)

        crd = extensions.read_custom_resource_definition(JOBSET.crd)
        assert crd.metadata.annotations[INSTALLED_BY_ANNOTATION] == "organization/controllers/test"
        assert crd.metadata.labels[INSTALLED_BY_LABEL] == "true"
        assert [
            w.metadata.name
            for w in admission.list_validating_webhook_configuration().items
            if "jobset" in w.metadata.name
        ]
        assert [
            w.metadata.name
            for w in admission.list_mutating_webhook_configuration().items
            if "jobset" in w.metadata.name
        ]
        services = client.CoreV1Api(api).list_namespaced_service(JOBSET.namespace).items
        assert any("webhook" in s.metadata.name for s in services)

        # The PriorityClass PREEMPTIBLE_FIRST pods run at, installed and marked alike.
        scheduling = client.SchedulingV1Api(api)
        fallback = scheduling.read_priority_class(FALLBACK_PRIORITY_CLASS)
        assert (fallback.value, fallback.preemption_policy, bool(fallback.global_default)) == (
            -100,
            "Never",
            False,
        )
        assert fallback.metadata.annotations[INSTALLED_BY_ANNOTATION] == "organization/controllers/test"

        # Installed by this stack: the next run keeps it as it is.
        again = _engine.run_pulumi(
            ["preview", *_engine.PREVIEW_FLAGS, "--expect-no-changes"], cwd=stack.project, env=stack.env
        )
        assert again.returncode == 0, _engine.output(again)

        # What waits for the component waits for its Stash, which the engine created after the chart.
        resources = {
            r["urn"].rsplit("::", 1)[-1]: r for r in _engine.stack_resources(stack.project, stack.env)
        }
        chart_urn = resources["k8s-controllers-jobset"]["urn"]
        assert chart_urn in resources["k8s-controllers-ready"].get("dependencies", [])

        # A second stack on the same cluster: the preview notes whose JobSet it found and plans no chart.
        kubeconfig = _engine.stack_outputs(stack.project, stack.env)["kube_config"]
        second = _engine.write_project(tmp_path / "second", "second", SECOND)
        _engine.run_pulumi(["stack", "init", "test"], cwd=second, env=stack.env, check=True)
        _engine.run_pulumi(
            ["config", "set", "--secret", "kubeconfig", kubeconfig], cwd=second, env=stack.env, check=True
        )
        preview = _engine.run_pulumi(["preview", *_engine.PREVIEW_FLAGS, "--diff"], cwd=second, env=stack.env)
        shown = _engine.output(preview)
        assert preview.returncode == 0, shown
        assert "installed by organization/controllers/test): using it, not installing it" in shown, shown
        assert "helm.sh/v4:Chart" not in shown
        assert f"the PriorityClass {FALLBACK_PRIORITY_CLASS} is already in the cluster" in shown, shown
        assert "scheduling.k8s.io/v1:PriorityClass" not in shown

        # Controllers dropped from the program (the cluster stays): what the chart created is deleted.
        stack.set_config("installs", "false")
        up(stack)
        with pytest.raises(ApiException) as gone:
            extensions.read_custom_resource_definition(JOBSET.crd)
        assert gone.value.status == 404
        assert apps.list_namespaced_deployment(JOBSET.namespace).items == []
        with pytest.raises(ApiException) as gone:
            scheduling.read_priority_class(FALLBACK_PRIORITY_CLASS)
        assert gone.value.status == 404


def test_a_jobset_someone_else_installed_is_used_and_left_alone(tmp_path: Path) -> None:
    with twin_stack(tmp_path, "controllers", PROGRAM, API_KEY, TwinOptions(jobset=True)) as stack:
        stack.set_config("installs", "true")
        result = _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=stack.project, env=stack.env)
        shown = _engine.output(result)
        assert result.returncode == 0, shown
        assert "using it, not installing it" in shown, shown
        types = {r["type"] for r in _engine.stack_resources(stack.project, stack.env)}
        assert "kubernetes:helm.sh/v4:Chart" not in types and "kubernetes:apps/v1:Deployment" not in types
        api = kube_clients(_engine.stack_outputs(stack.project, stack.env)["kube_config"])
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(JOBSET.crd)
        assert INSTALLED_BY_ANNOTATION not in (crd.metadata.annotations or {})  # not taken over


ALL_CONTROLLERS = f"""\
import json

import pulumi

from together_clusters.components import (
    BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ClusterControllersArgs, ContainerSpec,
    PodSettings, SharedVolume, WorkloadQueue, WorkloadQueueArgs, provider_for,
)
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="controllers", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, num_preemptible_gpus=8, nvidia_version_id={DRIVER!r},
                                     ready_timeout_minutes=5))
provider = provider_for(cluster, controllers=ClusterControllersArgs(
    kueue=True, descheduler=True, chart_source={str(CHARTS)!r}))
queue = WorkloadQueue("queue", WorkloadQueueArgs.following(cluster), opts=pulumi.ResourceOptions(provider=provider))
store = CheckpointStore("checkpoints", CheckpointStoreArgs(storage=SharedVolume(claim_name="checkpoints", size="100Gi")),
                        opts=pulumi.ResourceOptions(provider=provider))
for job_name in json.loads(pulumi.Config().get("batchJobs") or "[]"):
    BatchJob(job_name, BatchJobArgs(container=ContainerSpec(image="registry.invalid/train:1", gpus=8),
                                    checkpoint=store.storage, job_name=job_name,
                                    pod=PodSettings(namespace="default"), queue=queue),
             opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]))
pulumi.export("kube_config", cluster.kube_config)
"""
CONTROLLER_NAMESPACES = (JOBSET.namespace, KUEUE.namespace, DESCHEDULER.namespace)


def controllers_available(apps: client.AppsV1Api) -> dict[str, int] | None:
    """Every controller Deployment (JobSet's, Kueue's, the descheduler's) -> its available replicas, when each
    has all it wants available."""
    found = {
        f"{d.metadata.namespace}/{d.metadata.name}": d
        for namespace in CONTROLLER_NAMESPACES
        for d in apps.list_namespaced_deployment(namespace).items
    }
    namespaces = {name.split("/")[0] for name in found}
    whole = all((d.status.available_replicas or 0) >= (d.spec.replicas or 1) for d in found.values())
    if namespaces != set(CONTROLLER_NAMESPACES) or not whole:
        return None
    return {name: d.status.available_replicas for name, d in found.items()}


def test_every_chart_installs_and_serves_when_the_engine_runs_one_step_at_a_time(tmp_path: Path) -> None:
    """Issue 41: pulumi-kubernetes applies a chart's objects in no fixed order (a Deployment may come before the
    CRDs and RBAC its controller needs) and, by default, holds one of the engine's steps for each Deployment
    and Service until its pods are ready. When every step is held so (``--parallel``: 8 on two cores, used up
    by the Kueue Deployments and Services of two workers in the fleet's benchmark), the objects they need are
    never applied and ``up`` stalls until pulumi-kubernetes' 10 minutes run out. One step at a time, as here,
    any install met it. The charts' Deployments and Services are done once their controllers observed them,
    and the component waits for the cluster to admit a JobSet through JobSet's and Kueue's webhooks instead:
    a queue and a queued BatchJob in the same ``up`` are admitted and run."""
    if not all((CHARTS / c.chart_name / "Chart.yaml").is_file() for c in (JOBSET, KUEUE, DESCHEDULER)):
        pytest.skip("scripts/install-kubernetes has not copied the controllers' charts")
    with twin_stack(tmp_path, "controllers", ALL_CONTROLLERS, API_KEY, TwinOptions(jobset=False)) as stack:
        stack.set_config("batchJobs", '["first"]')
        result = _engine.run_pulumi(
            ["up", *_engine.UP_FLAGS, "--parallel", "1"], cwd=stack.project, env=stack.env
        )
        assert result.returncode == 0, _engine.output(result)
        api = kube_clients(_engine.stack_outputs(stack.project, stack.env)["kube_config"])
        try:
            core = client.CoreV1Api(api)
            pod = wait_for(lambda: running_pod(core, pods_of_job_set("first")), "the queued BatchJob's pod")
            first = job_set(api, "first")
            assert first["metadata"]["labels"].get(QUEUE_NAME_LABEL) and not first["spec"].get("suspend")
            assert pod.spec.node_name
            wait_for(lambda: controllers_available(client.AppsV1Api(api)), "every controller available")
        finally:
            api.close()


def test_the_controllers_survive_repairs_of_their_standard_node_and_still_run_a_queued_job_set(
    tmp_path: Path,
) -> None:
    """Issue 32: a reboot and a VM replacement of the standard node JobSet, Kueue and the descheduler run on;
    each time their Deployments are available again, on a standard node; a BatchJob queued afterwards is
    admitted by Kueue and its JobSet runs its pod."""
    if not all((CHARTS / c.chart_name / "Chart.yaml").is_file() for c in (JOBSET, KUEUE, DESCHEDULER)):
        pytest.skip("scripts/install-kubernetes has not copied the controllers' charts")
    with twin_stack(tmp_path, "controllers", ALL_CONTROLLERS, API_KEY, TwinOptions(jobset=False)) as stack:
        api = up(stack)
        apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
        try:
            wait_for(lambda: controllers_available(apps), "every controller available")
            with fast_remediations(stack.emulator.admin):
                for mode in ("reboot-vm", "vm-only"):
                    classes = {
                        n.metadata.name: n.metadata.labels[COMPUTE_CLASS] for n in core.list_node().items
                    }
                    hosts = {
                        p.spec.node_name
                        for namespace in CONTROLLER_NAMESPACES
                        for p in core.list_namespaced_pod(namespace).items
                        if p.status.phase == "Running"
                    }
                    assert hosts and {classes[h] for h in hosts} == {"standard"}, (mode, hosts, classes)
                    (standard,) = hosts
                    report = remediation_drill_twin(api, stack.emulator, API_KEY, standard, mode)
                    lost = {(w.namespace, w.kind) for w in report.workloads}
                    assert set(CONTROLLER_NAMESPACES) <= {n for n, _ in lost}, (mode, report)
                    assert report.ok, (mode, report)
                    wait_for(lambda: controllers_available(apps), f"every controller available after {mode}")

            stack.set_config("batchJobs", '["after"]')
            up(stack).close()
            pod = wait_for(
                lambda: running_pod(core, pods_of_job_set("after")),
                "the BatchJob queued after the repairs to run",
            )
            # Kueue admitted it: the queued JobSet runs, unsuspended.
            after = job_set(api, "after")
            assert after["metadata"]["labels"].get(QUEUE_NAME_LABEL) and not after["spec"].get("suspend"), (
                after
            )
            assert pod.spec.node_name and job_set_condition(api, "after", "Failed") is None
        finally:
            api.close()
