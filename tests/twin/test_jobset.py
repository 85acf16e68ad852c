"""JobSet in the twin, as a cluster with JobSet installed has it: the CRD served, the real webhooks called by the
API server, the controller manager creating the JobSet's Jobs under a user that only has JobSet's own
ClusterRole; and a twin started without it (``--no-jobset``) serves no JobSet kind.

Oracles: the API server (discovery, SubjectAccessReview) and the objects the real controllers create, read
with the ``kubernetes`` client.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import together
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.components import BatchJobArgs, ContainerSpec, SharedVolume, manifests
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.server import start_emulator

from ._twin import DRIVER, GPU, REGION, TwinCluster, job_set_manifest, kube_clients, wait_for
from .conftest import require_twin

pytestmark = pytest.mark.twin
JOBSET = ("jobset.x-k8s.io", "v1alpha2")
MANAGER = "system:jobset-controller-manager"


def job_set(name: str) -> dict[str, Any]:
    return job_set_manifest(name, replicated_job="workers", replicas=2)


def allowed(cluster: TwinCluster, verb: str, group: str, resource: str) -> bool:
    review = {
        "spec": {"user": MANAGER, "resourceAttributes": {"verb": verb, "group": group, "resource": resource}}
    }
    answer = client.AuthorizationV1Api(cluster.api).create_subject_access_review(review)
    return bool(answer.status.allowed)


def test_a_job_set_is_defaulted_by_its_webhook_and_its_jobs_created_by_its_controller(
    cluster: TwinCluster, namespace: str
) -> None:
    custom = client.CustomObjectsApi(cluster.api)
    created = custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", job_set("pair"))
    # Set by JobSet's defaulting webhook only (the CRD's schema has no default for it).
    assert created["spec"]["successPolicy"] == {"operator": "All"}
    jobs = wait_for(
        lambda: items if len(items := cluster.batch.list_namespaced_job(namespace).items) == 2 else None,
        "the JobSet's two Jobs",
    )
    assert sorted(j.metadata.name for j in jobs) == ["pair-workers-0", "pair-workers-1"]
    assert all(j.metadata.owner_references[0].kind == "JobSet" for j in jobs)
    # The validating webhook refuses what JobSet refuses (here: a replicated Job name too long for DNS).
    bad = job_set("pair")
    bad["metadata"]["name"] = "x" * 60
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", bad)
    assert refused.value.status == 403, refused.value.body  # an admission denial
    assert 'admission webhook \\"vjobset.kb.io\\" denied' in str(refused.value.body)
    assert "job names generated for this JobSet will exceed 63 characters" in str(refused.value.body)


def test_the_controller_manager_has_only_job_sets_own_permissions(cluster: TwinCluster) -> None:
    assert allowed(cluster, "create", "batch", "jobs")
    assert allowed(cluster, "update", "jobset.x-k8s.io", "jobsets/status")
    assert not allowed(cluster, "get", "", "secrets")
    assert not allowed(cluster, "delete", "", "nodes")


def test_a_twin_without_jobset_serves_no_job_set_kind() -> None:
    require_twin()
    with start_emulator(speed=60, kubernetes=TwinOptions(jobset=False)) as emulator:
        emulator.admin.set_capacity(REGION, GPU, 64)
        with TwinCluster.create(emulator, "plain", num_gpus=8, num_preemptible_gpus=8) as plain:
            plain.wait_for_nodes(standard=1, preemptible=1)
            groups = {g.name for g in client.ApisApi(plain.api).get_api_versions().groups}
            assert "jobset.x-k8s.io" not in groups
            status = httpx.get(f"{emulator.base_url}/_emulator/kubernetes", timeout=30).json()
            (plane,) = status["control_planes"]
            assert status["jobset"] is False and plane["jobset"] == "off"
            assert len(plane["pids"]) == 5


def test_a_cluster_the_api_calls_ready_accepts_a_job_set_at_once() -> None:
    """Ready means usable: at a clock fast enough that provisioning takes a second, the compute API (read with the
    official SDK) may not say Ready before the cluster's Kubernetes serves its controllers and JobSet's webhooks."""
    require_twin()
    with start_emulator(speed=600, kubernetes=TwinOptions(jobset=True)) as emulator:
        sdk = together.Together(api_key="twin-ready-key", base_url=emulator.base_url, max_retries=0)
        try:
            created = sdk.clusters.create(
                cluster_name="ready",
                region=REGION,
                gpu_type=GPU,
                num_gpus=8,
                billing_type="ON_DEMAND",
                nvidia_version_id=DRIVER,
            )
            seen = wait_for(
                lambda: c if (c := sdk.clusters.retrieve(created.cluster_id)).status == "Ready" else None,
                "the cluster to be Ready",
                timeout=120,
            )
            api = kube_clients(seen.kube_config)
            try:
                custom = client.CustomObjectsApi(api)
                made = custom.create_namespaced_custom_object(*JOBSET, "default", "jobsets", job_set("first"))
                assert made["spec"]["successPolicy"] == {"operator": "All"}  # its webhook answered
            finally:
                api.close()
        finally:
            sdk.close()


def test_the_longest_name_the_components_accept_is_the_longest_job_sets_webhook_accepts(
    cluster: TwinCluster, namespace: str
) -> None:
    """The components' preview check of a JobSet's name has the webhook's own limit: the JobSet rendered for the
    longest accepted name is created; the same JobSet one character longer is refused by the real webhook."""
    longest = 45
    args = BatchJobArgs(container=ContainerSpec(image="registry.invalid/t:1"), checkpoint=SharedVolume("c"))
    (rendered,) = manifests.batch_job("a" * longest, args)
    with pytest.raises(ValueError, match=f"at most {longest} characters"):
        manifests.batch_job("a" * (longest + 1), args)
    custom = client.CustomObjectsApi(cluster.api)
    custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", rendered)
    longer = {**rendered, "metadata": {**rendered["metadata"], "name": "b" * (longest + 1)}}
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", longer)
    assert refused.value.status == 403, refused.value.body
    assert "pod names generated for this JobSet will exceed 63 characters" in str(refused.value.body)
