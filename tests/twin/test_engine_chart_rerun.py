"""A ``pulumi up`` killed while the controllers' charts were being applied is rerun to success, and the rerun
leaves what the controllers' certificate rotators wrote in place: their webhooks still answer.

Seen in CI (issue 41): an ``up`` SIGKILLed after it applied JobSet's Secret ``jobset-webhook-server-cert`` but
before it recorded it; the controller's certificate rotator then wrote the Secret's ``data`` (and the webhook
configurations' ``caBundle``); the rerun applied the Secret again, as the chart renders it (every key empty),
and failed with a Server-Side Apply conflict on those keys (``conflicts with "jobset"``, the rotator's field
manager). A forced apply of the chart as rendered passes, but blanks the rotated certificate: the rotator
makes a new CA and certificate (this test, run so, sees the Secret's data replaced), and until its pod's
mounted Secret catches up the webhook's certificate is not the one the API server trusts. So the chart's
objects are applied forced, without the Secret's empty keys (components/controllers/applied.py). Kueue's
chart has the same pattern (its Secret rendered with no data; the rotator also writes the ``caBundle`` of its
CRDs' conversion webhook): its case shows that a forced apply of those objects keeps what the rotator wrote.

The kill point is one a SIGKILL can hit but a test cannot time (between the provider's apply and the
engine's checkpoint): the test kills the ``up`` once the rotator has written its Secret and injected its CA,
and takes the Secret, the webhook configurations and the CRDs with a conversion webhook out of the state
where the engine had recorded them already, which is what the killed run leaves otherwise: the rerun then
applies each of them again.

Oracles: the real engine, and the twin's real API server (its server-side apply and field managers) and the
real controllers the charts install (their rotators and webhooks).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.platform.charts import JOBSET, KUEUE

from ._twin import DRIVER, GPU, JOBSETS, REGION, job_set_manifest, kube_clients, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-chart-rerun-0123456789abcdef"
CHARTS = _engine.ROOT / ".kubernetes" / "charts"


@dataclass(frozen=True)
class Chart:
    """One controller's chart: what its rotator writes, and where."""

    kueue: bool
    namespace: str
    secret: str
    webhook_configurations: tuple[str, str]  # mutating, validating
    converted_crds: tuple[str, ...] = ()  # CRDs whose conversion webhook's caBundle the rotator writes


JOBSET_CHART = Chart(
    kueue=False,
    namespace=JOBSET.namespace,
    secret="jobset-webhook-server-cert",
    webhook_configurations=(
        "jobset-mutating-webhook-configuration",
        "jobset-validating-webhook-configuration",
    ),
)
KUEUE_CHART = Chart(
    kueue=True,
    namespace=KUEUE.namespace,
    secret="kueue-webhook-server-cert",
    webhook_configurations=("kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"),
    converted_crds=tuple(
        f"{plural}.kueue.x-k8s.io"
        for plural in ("workloads", "localqueues", "cohorts", "clusterqueues", "multikueueclusters")
    ),
)

PROGRAM = f"""\
import pulumi

from together_clusters.components import ClusterControllersArgs, kube, provider_for
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="chart-rerun", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, nvidia_version_id={DRIVER!r}, ready_timeout_minutes=5))
kueue = pulumi.Config().get_bool("kueue") or False
provider = provider_for(cluster, controllers=ClusterControllersArgs(chart_source={str(CHARTS)!r}, kueue=kueue))
if pulumi.Config().get_bool("hold"):
    # A Deployment no node can run (no node has the label), so the `up` is still running when it is killed.
    labels = {{"app": "hold"}}
    kube.create("hold", {{
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {{"name": "hold", "namespace": "default"}},
        "spec": {{"replicas": 1, "selector": {{"matchLabels": labels}}, "template": {{
            "metadata": {{"labels": labels}},
            "spec": {{"nodeSelector": {{"together.ai/compute-class": "nowhere"}},
                     "containers": [{{"name": "main", "image": "registry.invalid/hold:1"}}]}}}}}},
    }}, pulumi.ResourceOptions(provider=provider))
pulumi.export("kube_config", cluster.kube_config)
"""


@pytest.mark.parametrize("chart", [JOBSET_CHART, KUEUE_CHART], ids=["jobset", "kueue"])
def test_an_up_killed_while_a_chart_was_applied_is_rerun_and_keeps_the_rotated_certificates(
    tmp_path: Path, chart: Chart
) -> None:
    if not all((CHARTS / name / "Chart.yaml").is_file() for name in ("jobset", "kueue")):
        pytest.skip("scripts/install-kubernetes has not copied the controllers' charts")
    with twin_stack(tmp_path, "chart-rerun", PROGRAM, API_KEY, TwinOptions(jobset=False)) as stack:
        stack.set_config("kueue", str(chart.kueue).lower())
        stack.set_config("hold", "true")
        with _engine.up_killed_on_exit(stack.project, stack.env) as running:
            rotated = wait_for(
                lambda: _rotated(stack, running, chart), "the rotator to write its Secret and CA", timeout=600
            )
        before = _written_by_rotator(rotated, chart)
        _forget(stack, chart)

        stack.set_config("hold", "false")
        api = up(stack)

        # The rotated certificate and the CA the API server trusts are the rotator's still.
        assert _written_by_rotator(api, chart) == before
        # And the webhooks answer: a JobSet is defaulted and admitted on the first try.
        custom = client.CustomObjectsApi(api)
        created = cast(
            dict[str, Any], custom.create_namespaced_custom_object(*JOBSETS, job_set_manifest("after"))
        )
        assert created["spec"].get("successPolicy"), created  # set by JobSet's defaulting webhook


def _rotated(stack: Any, running: subprocess.Popen[str], chart: Chart) -> client.ApiClient | None:
    """A client of the cluster once the chart's rotator has written its Secret and every caBundle (None
    before)."""
    assert running.poll() is None, "the up to kill ended on its own (it fails, or holds on nothing)"
    clusters = stack.emulator.admin.clusters()
    if not clusters or not clusters[0].get("kube_config"):
        return None
    api = kube_clients(clusters[0]["kube_config"])
    try:
        secret, bundles = _written_by_rotator(api, chart)
    except (ApiException, urllib3.exceptions.HTTPError):  # not applied yet, or the API not answering yet
        return None
    return api if secret and all(secret.values()) and all(bundles) else None


def _written_by_rotator(api: client.ApiClient, chart: Chart) -> tuple[dict[str, Any], list[str | None]]:
    """The chart's Secret's data, and the caBundle of every webhook of its webhook configurations and of
    its CRDs' conversion webhooks."""
    secret = client.CoreV1Api(api).read_namespaced_secret(chart.secret, chart.namespace).data or {}
    admission = client.AdmissionregistrationV1Api(api)
    mutating = admission.read_mutating_webhook_configuration(chart.webhook_configurations[0])
    validating = admission.read_validating_webhook_configuration(chart.webhook_configurations[1])
    webhooks: list[Any] = [*(mutating.webhooks or []), *(validating.webhooks or [])]
    bundles = [w.client_config.ca_bundle for w in webhooks]
    extensions = client.ApiextensionsV1Api(api)
    for name in chart.converted_crds:
        conversion: Any = extensions.read_custom_resource_definition(name).spec.conversion
        bundles.append(conversion.webhook.client_config.ca_bundle if conversion.webhook else None)
    return dict(secret), bundles


def _forget(stack: Any, chart: Chart) -> None:
    """Leave the objects the rotator writes to applied but not recorded, as a kill between the two does."""
    names = {chart.secret, *chart.webhook_configurations, *chart.converted_crds}

    def recorded() -> list[str]:
        return [
            r["urn"]
            for r in _engine.stack_resources(stack.project, stack.env)
            if r["urn"].rsplit("/", 1)[-1].rsplit(":", 1)[-1] in names
        ]

    for urn in recorded():
        _engine.run_pulumi(
            ["state", "delete", urn, "--yes", "--target-dependents"], cwd=stack.project, env=stack.env
        )
    assert recorded() == []
