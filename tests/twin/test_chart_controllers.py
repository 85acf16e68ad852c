"""A bare twin runs what a chart installs: JobSet's official chart, installed by the real engine with
pulumi-kubernetes' Helm Chart v4 as a user's ``pulumi up`` installs it, gets its manager pod run as the JobSet
binary built from the same module, and the API server reaches its webhooks through their Service.

Oracles: the real engine (its await of the chart's Deployment means the pod passed its readiness probe), the
real API server calling the webhooks by Service (a JobSet is defaulted, an invalid one refused), and the
manager's own reconciling (a JobSet gets its child Job, made under the chart's service account and RBAC).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.emulator.kubernetes import binaries
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._twin import JOBSETS, defaulted_jobset, job_set_manifest, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-chart-key-0123456789abcdef"
NAMESPACE = "jobset-system"


def chart_program(chart: Path, version: str) -> str:
    return f"""\
import pulumi
import pulumi_kubernetes as k8s

from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="chart-twin", region="us-central-8", gpu_type="H100_SXM",
                                     num_gpus=8, num_preemptible_gpus=0))
provider = k8s.Provider("k8s", kubeconfig=cluster.kube_config)
ns = k8s.core.v1.Namespace("ns", metadata={{"name": "{NAMESPACE}"}}, opts=pulumi.ResourceOptions(provider=provider))
k8s.helm.v4.Chart(
    "jobset",
    chart="{chart}",
    namespace="{NAMESPACE}",
    values={{"image": {{"repository": "registry.k8s.io/jobset/jobset", "tag": "{version}",
                        "pullPolicy": "IfNotPresent"}}}},
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[ns]),
)
pulumi.export("kube_config", cluster.kube_config)
"""


def _manager_pid(core: client.CoreV1Api) -> int | None:
    pods = core.list_namespaced_pod(NAMESPACE).items
    for pod in pods:
        for status in (pod.status.container_statuses or []) if pod.status else []:
            if status.ready and status.container_id and status.container_id.startswith("local://"):
                return int(status.container_id.removeprefix("local://"))
    return None


def test_a_chart_installed_jobset_runs_for_real_on_a_bare_twin(tmp_path: Path) -> None:
    found = binaries.find()
    if found is None:
        pytest.skip("the twin is not built")
    chart = found.kubernetes.parent.parent / "charts" / "jobset"
    version = found.versions()["jobset"]
    with twin_stack(
        tmp_path, "chart-twin", chart_program(chart, version), API_KEY, TwinOptions(jobset=False)
    ) as stack:
        api = up(stack)
        core = client.CoreV1Api(api)
        pid = _manager_pid(core)
        assert pid is not None, "the chart's manager pod is not run as a local process"

        created = defaulted_jobset(api, "defaulted")
        # The defaulting webhook (reached by its Service) set the success policy the request left out.
        assert created["spec"]["successPolicy"]["operator"] == "All"
        custom = client.CustomObjectsApi(api)
        invalid = job_set_manifest("Not_A_Name")
        with pytest.raises(ApiException) as refused:
            custom.create_namespaced_custom_object(*JOBSETS, invalid)
        assert refused.value.status in (400, 422)

        batch = client.BatchV1Api(api)
        wait_for(
            lambda: (
                batch.list_namespaced_job(
                    "default", label_selector="jobset.sigs.k8s.io/jobset-name=defaulted"
                ).items
                or None
            ),
            "the manager's child Job of the JobSet",
        )

        # A manager that dies is started again, as a kubelet would, and the webhooks answer again.
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: (p := _manager_pid(core)) is not None and p != pid or None, "the manager restarted")
        again: dict[str, Any] = defaulted_jobset(api, "after-restart")
        assert again["spec"]["successPolicy"]["operator"] == "All"
