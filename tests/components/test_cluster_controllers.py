"""ClusterControllers: what it installs (pure: chart references and values), whether it installs it (what the
cluster already has), and the components' objects waiting for it, under Pulumi's mocks."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml
from google.protobuf import struct_pb2
from pulumi.runtime import rpc

from tests._engine import in_ci
from together_clusters.components import (
    BatchJob,
    BatchJobArgs,
    CheckpointStore,
    CheckpointStoreArgs,
    ClusterControllers,
    ClusterControllersArgs,
    ContainerSpec,
    NodePlacement,
    Retries,
    SharedVolume,
    cluster_controllers,
    kube,
    provider_for,
)
from together_clusters.components.cluster_controllers import chart_transform
from together_clusters.components.controllers import detection
from together_clusters.components.controllers.releases import (
    INSTALLED_BY_ANNOTATION,
    INSTALLED_BY_LABEL,
    chart_reference,
    chart_values,
    kept_off_preemptible,
    releases,
)
from together_clusters.components.kube import PATCH_FORCE_ANNOTATION
from together_clusters.emulator.kubernetes import binaries
from together_clusters.errors import ArgsError, MissingControllerError
from together_clusters.platform import (
    COMPUTE_CLASS_LABEL,
    FALLBACK_PRIORITY_CLASS,
    PLACEMENT_LABEL,
    PREEMPTIBLE,
    ComputeClass,
)
from together_clusters.platform.charts import CHARTS, DESCHEDULER, JOBSET, ChartFacts

from .conftest import Program, normalise

STANDARD_ONLY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": COMPUTE_CLASS_LABEL, "operator": "NotIn", "values": [PREEMPTIBLE]}
                    ]
                }
            ]
        }
    }
}
INSTALL_KUBERNETES = "scripts/install-kubernetes"
"""What puts the pinned charts on disk: it downloads their Go modules and copies the charts for the twin."""
THIS_STACK = "components-test/test"
"""What the mocks' program (no organization) marks the objects it installs with."""
JOB = BatchJobArgs(
    container=ContainerSpec(image="ghcr.io/example/trainer:1", gpus=8),
    checkpoint=SharedVolume(claim_name="ckpt"),
    job_name="train",
)


def at(values: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values


def missing(what: str) -> NoReturn:
    """Skip the calling test for lack of ``what`` on disk; with CI=true, fail it instead: there
    scripts/install-kubernetes has run, and a skip would pass a chart check that never ran."""
    message = f"{what}: run {INSTALL_KUBERNETES}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: chart checks may not be skipped)", pytrace=False)
    pytest.skip(message)


@functools.cache
def module_cache() -> Path | None:
    """Go's module cache as ``go`` itself finds it (the GOMODCACHE variable, else GOPATH's ``pkg/mod``, which
    is per user), or None without Go."""
    try:
        found = subprocess.run(
            ["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60, check=False
        ).stdout.strip()
    except OSError:
        return None
    return Path(found) if found else None


def chart_version(folder: Path) -> str | None:
    try:
        return str(yaml.safe_load((folder / "Chart.yaml").read_text())["version"])
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return None


def pinned_chart(facts: ChartFacts) -> Path:
    """The folder of the pinned chart as its Go module ships it: in the module cache, else the twin's copy of
    it (scripts/install-kubernetes copies it from that module, the descheduler's stamped with the published
    version, so the version it says is checked). Missing, the calling test is skipped (failed with CI=true)."""
    module = f"sigs.k8s.io/{facts.chart_name}@v{facts.version}"
    cache = module_cache()
    if cache is not None and (cache / module / "charts" / facts.chart_name / "values.yaml").is_file():
        return cache / module / "charts" / facts.chart_name
    copy = binaries.charts_dir() / facts.chart_name
    if chart_version(copy) == facts.version:
        return copy
    where = "Go is not installed and" if cache is None else f"neither {cache / module} nor"
    missing(f"the pinned {facts.chart_name} chart {facts.version} is not on disk: {where} {copy} holds it")


def twins_copy(chart: str) -> Path:
    """The twin's charts folder, holding ``chart`` (the calling test is skipped, failed with CI=true, without)."""
    folder = binaries.charts_dir()
    if not (folder / chart).is_dir():
        missing(f"the twin's charts folder {folder} has no {chart} chart")
    return folder


# --- the pure builder -------------------------------------------------------------------------------


@pytest.mark.parametrize("facts", CHARTS.values(), ids=lambda f: f.chart_name)
def test_the_values_name_the_release_image_not_the_charts_default(facts: ChartFacts) -> None:
    image = at(chart_values(facts), facts.image_values)
    assert image == {
        "repository": facts.image_repository,
        "tag": facts.image_tag,
        "pullPolicy": "IfNotPresent",
    }
    assert facts.image_tag == f"v{facts.version}"


@pytest.mark.parametrize("facts", CHARTS.values(), ids=lambda f: f.chart_name)
def test_every_value_set_is_one_the_pinned_chart_declares(facts: ChartFacts) -> None:
    declared = yaml.safe_load((pinned_chart(facts) / "values.yaml").read_text())
    image = at(declared, facts.image_values)
    assert {"repository", "tag", "pullPolicy"} <= set(image)
    # The chart's own default is not the release image: without the override a cluster pulls another image.
    assert (image["repository"], image["tag"]) != (facts.image_repository, facts.image_tag)
    if facts.affinity_value is not None:
        assert at(declared, facts.affinity_value) == {}


def test_the_jobset_controller_is_kept_off_preemptible_nodes() -> None:
    assert chart_values(JOBSET)["controller"]["affinity"] == STANDARD_ONLY


def test_a_chart_without_an_affinity_value_gets_it_in_its_rendered_pod_templates() -> None:
    deployment = {"metadata": {"name": "kueue"}, "spec": {"template": {"spec": {"containers": []}}}}
    assert kept_off_preemptible("Deployment", deployment) == {
        "metadata": {"name": "kueue"},
        "spec": {"template": {"spec": {"containers": [], "affinity": STANDARD_ONLY}}},
    }
    cron = {"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}
    assert at(
        kept_off_preemptible("CronJob", cron) or {}, ("spec", "jobTemplate", "spec", "template", "spec")
    ) == {"affinity": STANDARD_ONLY}
    own = {"spec": {"template": {"spec": {"affinity": {"podAntiAffinity": {}}}}}}
    assert kept_off_preemptible("Deployment", own) is None
    assert kept_off_preemptible("Service", {"spec": {}}) is None


@pytest.mark.parametrize(
    ("source", "chart", "version", "repository"),
    [
        (None, "oci://registry.k8s.io/jobset/charts/jobset", "0.11.0", None),
        ("oci://mirror.example/charts/", "oci://mirror.example/charts/jobset", "0.11.0", None),
        ("https://charts.example/helm", "jobset", "0.11.0", "https://charts.example/helm"),
        ("/srv/charts", "/srv/charts/jobset", None, None),
    ],
    ids=["official", "oci-mirror", "helm-repository", "local-folder"],
)
def test_the_chart_comes_from_the_source_asked_for(
    source: str | None, chart: str, version: str | None, repository: str | None
) -> None:
    reference = chart_reference(JOBSET, source)
    assert (reference.chart, reference.version, reference.repository) == (chart, version, repository)


def test_the_descheduler_comes_from_its_helm_repository() -> None:
    reference = chart_reference(DESCHEDULER, None)
    assert (reference.chart, reference.repository) == (
        "descheduler",
        "https://kubernetes-sigs.github.io/descheduler",
    )


def write_chart(folder: Path, name: str, version: str) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "Chart.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version})
    )


def test_a_local_folder_holding_the_pinned_chart_is_used(tmp_path: Path) -> None:
    write_chart(tmp_path, "jobset", "0.11.0")
    (release,) = releases(ClusterControllersArgs(chart_source=str(tmp_path)))
    assert release.reference.chart == str(tmp_path / "jobset")


def test_a_local_folder_without_the_chart_or_with_another_version_is_refused_naming_the_fix(
    tmp_path: Path,
) -> None:
    with pytest.raises(
        ArgsError, match=r"holds no readable .*/jobset/Chart.yaml .*helm pull oci://registry"
    ) as missing:
        releases(ClusterControllersArgs(chart_source=str(tmp_path)))
    assert "\n" not in str(missing.value)
    write_chart(tmp_path, "jobset", "0.10.1")
    with pytest.raises(ArgsError, match=r"holds jobset 0.10.1 .*not jobset 0.11.0"):
        releases(ClusterControllersArgs(chart_source=str(tmp_path)))


def test_the_twins_copy_of_the_chart_is_the_pinned_one() -> None:
    folder = twins_copy("jobset")
    (release,) = releases(ClusterControllersArgs(chart_source=str(folder)))
    assert release.reference.chart == str(folder / "jobset")


def test_the_twins_copy_of_the_descheduler_chart_is_stamped_as_published() -> None:
    # The module ships it as 0.35.0; a copy taken as it is would be refused as the wrong version.
    folder = twins_copy("descheduler")
    args = ClusterControllersArgs(jobset=False, descheduler=True, chart_source=str(folder))
    (release,) = releases(args)
    assert release.reference.chart == str(folder / "descheduler")


def transformed(transform: pulumi.ResourceTransform, type_: str, props: dict[str, Any]) -> Any:
    """What ``transform`` makes of an object of ``type_``, given as the engine gives it (through its wire
    form: a Secret's data arrives as a secret Output)."""

    async def run() -> Any:
        wire = struct_pb2.Struct()
        wire.update(props)
        given = rpc.deserialize_properties(wire)
        args = pulumi.ResourceTransformArgs(
            custom=True, type_=type_, name="o", props=given, opts=pulumi.ResourceOptions()
        )
        result = transform(args)
        return await result if inspect.isawaitable(result) else result

    return asyncio.run(run())


def test_the_objects_a_chart_renders_are_marked_with_the_stack_and_go_with_the_cluster() -> None:
    cluster = pulumi.ComponentResource.__new__(pulumi.ComponentResource)  # a stand-in: only compared
    transform = chart_transform(THIS_STACK, cluster)
    crd = {"metadata": {"name": "jobsets.jobset.x-k8s.io", "labels": {"app": "jobset"}}, "spec": {}}
    result = transformed(transform, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", crd)
    assert result is not None
    assert result.props["metadata"]["labels"] == {"app": "jobset", INSTALLED_BY_LABEL: "true"}
    assert result.props["metadata"]["annotations"] == {
        INSTALLED_BY_ANNOTATION: THIS_STACK,
        PATCH_FORCE_ANNOTATION: "true",  # a rerun after a killed `up` takes over what the killed run applied
    }
    assert result.opts.deleted_with is cluster


def test_a_charts_deployments_and_services_are_ready_once_stored_when_the_component_waits_for_admission() -> (
    None
):
    """Held until their pods are ready, a chart's Deployments and Services could take every step the engine
    runs at once while the CRDs and RBAC their controller needs were still unapplied (the fleet's ``up``
    stalled: tests/twin/test_engine_controllers.py runs one step at a time)."""
    deployment = {"metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"}, "spec": {}}
    service = {"metadata": {"name": "kueue-webhook-service", "annotations": {"a": "b"}}, "spec": {}}
    crd = {"metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {}}
    probed = chart_transform(THIS_STACK, None, ready_when_stored=True)
    held = chart_transform(THIS_STACK, None)

    def wait_for(transform: pulumi.ResourceTransform, type_: str, props: dict[str, Any]) -> str | None:
        result = transformed(transform, type_, props)
        assert result is not None
        return result.props["metadata"]["annotations"].get("pulumi.com/waitFor")

    assert (
        wait_for(probed, "kubernetes:apps/v1:Deployment", deployment)
        == "jsonpath={.status.observedGeneration}"
    )
    assert wait_for(probed, "kubernetes:core/v1:Service", service) == "jsonpath={.metadata.uid}"
    assert wait_for(probed, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", crd) is None
    # Without the component's own wait (no JobSet of its own to probe), the engine's readiness checks stay.
    assert wait_for(held, "kubernetes:apps/v1:Deployment", deployment) is None
    assert wait_for(held, "kubernetes:core/v1:Service", service) is None
    # What the chart itself says wins.
    own = {**deployment, "metadata": {**deployment["metadata"], "annotations": {"pulumi.com/waitFor": "x"}}}
    assert wait_for(probed, "kubernetes:apps/v1:Deployment", own) == "x"


@pytest.mark.parametrize(
    ("kubeconfig", "constructed", "ready_when_stored"),
    [("kubeconfig", False, True), (None, False, False), ("kubeconfig", True, False)],
    ids=["probed", "no-kubeconfig-to-probe", "provider-by-reference"],
)
def test_a_charts_objects_are_ready_once_stored_only_when_the_component_can_probe_admission(
    program: Program,
    served: dict,
    monkeypatch: pytest.MonkeyPatch,
    kubeconfig: str | None,
    constructed: bool,
    ready_when_stored: bool,
) -> None:
    """Without a kubeconfig of its own the component cannot ask whether the cluster admits a JobSet: its charts
    keep the engine's readiness waits, or a dependent JobSet met a webhook not yet served (CI, the YAML program's
    twin test: x509 from a proxy answering for the absent Service). A provider given to the plugin's construct
    by reference (a YAML program's) is read back from the engine's state, its kubeconfig there in some runs and
    not in others: never counted, or the runs proposed opposite annotations on the charts' objects (CI, the same
    test: the preview after a refresh found three to update)."""
    asked: list[bool] = []
    transform = cluster_controllers.chart_transform

    def recording(this_stack: str, deleted_with: Any, ready: bool = False) -> pulumi.ResourceTransform:
        asked.append(ready)
        return transform(this_stack, deleted_with, ready)

    monkeypatch.setattr(cluster_controllers, "chart_transform", recording)
    kind = (
        type("Constructed", (ClusterControllers,), {"provider_by_reference": True})
        if constructed
        else ClusterControllers
    )
    program.run(
        lambda: kind(
            "controllers", opts=pulumi.ResourceOptions(provider=k8s.Provider("mine", kubeconfig=kubeconfig))
        )
    )
    assert len(charts(program)) == 1
    assert asked == [ready_when_stored]


def test_a_chart_s_certificate_placeholder_is_applied_without_the_keys_its_controller_rotates() -> None:
    # JobSet's chart renders its webhook Secret with every key empty; the controller's rotator fills them.
    # Declared, a forced apply would blank the rotated certificate (tests/twin/test_engine_chart_rerun.py).
    transform = chart_transform(THIS_STACK, None)
    secret = "kubernetes:core/v1:Secret"
    placeholder = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "jobset-webhook-server-cert", "namespace": "jobset-system"},
        "data": {"ca.crt": "", "ca.key": "", "tls.crt": "", "tls.key": ""},
    }
    applied = transformed(transform, secret, placeholder).props
    assert "data" not in applied
    assert applied["metadata"]["annotations"][PATCH_FORCE_ANNOTATION] == "true"
    assert applied["metadata"]["name"] == "jobset-webhook-server-cert"

    given = {**placeholder, "data": {"key": "dmFsdWU="}}  # a value the chart sets is the stack's
    kept = transformed(transform, secret, given).props["data"]
    assert asyncio.run(_known(kept)) == {"key": "dmFsdWU="}


async def _known(value: Any) -> Any:
    return await value.future() if isinstance(value, pulumi.Output) else value


# --- the component under mocks ----------------------------------------------------------------------


def charts(program: Program) -> list[dict[str, Any]]:
    return [normalise(r.inputs) for r in program.by_type("kubernetes:helm.sh/v4:Chart")]


def test_provider_for_installs_jobset_on_a_bare_cluster(program: Program, served: dict) -> None:
    program.run(lambda: provider_for("kubeconfig"))
    (chart,) = charts(program)
    assert (chart["chart"], chart["version"], chart["namespace"]) == (
        "oci://registry.k8s.io/jobset/charts/jobset",
        "0.11.0",
        "jobset-system",
    )
    assert chart["values"]["image"] == {
        "repository": "registry.k8s.io/jobset/jobset",
        "tag": "v0.11.0",
        "pullPolicy": "IfNotPresent",
    }
    assert chart["values"]["controller"]["affinity"] == STANDARD_ONLY
    (namespace,) = [normalise(r.inputs) for r in program.by_type("kubernetes:core/v1:Namespace")]
    assert namespace["metadata"]["name"] == "jobset-system"
    assert namespace["metadata"]["annotations"] == {INSTALLED_BY_ANNOTATION: THIS_STACK}
    assert [r.name for r in program.by_type("together:components:ClusterControllers")] == ["k8s-controllers"]


def test_a_jobset_installed_by_someone_else_is_used_and_left_alone_with_a_note(
    program: Program, served: dict, notes: list[str]
) -> None:
    served["jobsets.jobset.x-k8s.io"] = {INSTALLED_BY_ANNOTATION: "acme/platform/prod"}
    program.run(lambda: provider_for("kubeconfig"))
    assert charts(program) == []
    assert program.by_type("kubernetes:core/v1:Namespace") == []
    (note,) = notes
    assert (
        "jobset is already installed in the cluster (jobsets.jobset.x-k8s.io found, installed by acme/platform/prod)"
        in note
    )
    assert "uninstall that one and run pulumi up again" in note


def test_a_jobset_this_stack_installed_is_kept(program: Program, served: dict, notes: list[str]) -> None:
    served["jobsets.jobset.x-k8s.io"] = {INSTALLED_BY_ANNOTATION: THIS_STACK}
    program.run(lambda: provider_for("kubeconfig"))
    assert len(charts(program)) == 1
    assert notes == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: provider_for("kubeconfig", controllers=False),
        lambda: provider_for("kc", render_dir="/tmp/out"),
    ],
)
def test_no_controllers_when_told_not_to_or_when_rendering(program: Program, served: dict, make: Any) -> None:
    program.run(make)
    assert program.by_type("together:components:ClusterControllers") == []
    assert charts(program) == []


def test_a_batch_jobs_job_set_waits_for_the_controllers_of_its_provider(
    program: Program, served: dict, waits: dict
) -> None:
    def build() -> ClusterControllers:
        p = provider_for("kubeconfig")
        BatchJob("ft", JOB, opts=pulumi.ResourceOptions(provider=p))
        CheckpointStore(
            "ckpt",
            CheckpointStoreArgs(storage=SharedVolume(claim_name="ckpt")),
            pulumi.ResourceOptions(provider=p),
        )
        controllers = kube.controllers_of(pulumi.ResourceOptions(provider=p))
        assert isinstance(controllers, ClusterControllers)
        return controllers

    controllers = program.run(build)
    assert waits["ft-jobset-train"] == [controllers]
    # A claim needs no controller: it is not held back.
    assert waits["ckpt-persistentvolumeclaim-ckpt"] is None


def test_controllers_declared_on_a_hand_made_provider_are_waited_for_too(
    program: Program, served: dict, waits: dict
) -> None:
    def build() -> ClusterControllers:
        p = k8s.Provider("mine", kubeconfig="kubeconfig")
        controllers = ClusterControllers("controllers", opts=pulumi.ResourceOptions(provider=p))
        BatchJob("ft", JOB, opts=pulumi.ResourceOptions(provider=p))
        return controllers

    controllers = program.run(build)
    assert waits["ft-jobset-train"] == [controllers]
    assert len(charts(program)) == 1


def hand_made_stack(job: BatchJobArgs = JOB) -> None:
    p = k8s.Provider("mine", kubeconfig="kubeconfig")
    BatchJob("ft", job, opts=pulumi.ResourceOptions(provider=p))


def test_a_hand_made_stack_on_a_cluster_without_jobset_is_refused_naming_the_fix(
    program: Program, served: dict
) -> None:
    with pytest.raises(MissingControllerError) as refused:
        program.run(hand_made_stack)
    message = str(refused.value)
    assert message.startswith(
        "BatchJob 'ft' needs JobSet (jobsets.jobset.x-k8s.io is not served by the cluster): add ClusterControllers("
    )
    assert "provider_for(cluster)" in message
    assert "\n" not in message


def test_a_hand_made_stack_passes_when_the_cluster_serves_jobset_or_needs_none(
    program: Program, served: dict, waits: dict
) -> None:
    # A JobSet controller someone else installed serves the run: its JobSet is created, and nothing is
    # installed in a cluster whose controllers the program did not hand to the package.
    served["jobsets.jobset.x-k8s.io"] = {}
    program.run(hand_made_stack)
    assert list(program.kubernetes_objects()) == ["JobSet/train"]
    assert charts(program) == [] and program.by_type("together:components:ClusterControllers") == []
    # A plain Job needs no controller: on a bare cluster it is created, waiting for no check of the cluster.
    served.clear()
    plain = Program()
    plain_job = BatchJobArgs(
        container=JOB.container,
        checkpoint=JOB.checkpoint,
        job_name="train",
        retries=Retries(fresh_job_per_attempt=False),
    )
    plain.run(lambda: hand_made_stack(plain_job))
    assert list(plain.kubernetes_objects()) == ["Job/train"]
    assert waits["ft-job-train"] is None


def test_at_preview_a_hand_made_stack_is_refused_too(served: dict) -> None:
    # At preview the inputs a provider was not given (render_yaml_to_directory) read as unknown, not None.
    program = Program()
    pulumi.runtime.set_mocks(program.mocks, project="components-test", stack="test", preview=True)
    with pytest.raises(MissingControllerError, match="BatchJob 'ft' needs JobSet"):
        program.run(hand_made_stack)


# --- the PriorityClass PREEMPTIBLE_FIRST pods run at --------------------------------------------------

FIRST_JOB = BatchJobArgs(
    container=JOB.container,
    checkpoint=JOB.checkpoint,
    job_name="train",
    placement=NodePlacement(ComputeClass.PREEMPTIBLE_FIRST),
    retries=Retries(fresh_job_per_attempt=False),  # a plain Job: the PriorityClass is its only need
)


@pytest.fixture
def priority_classes(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, str]]]:
    """The PriorityClasses of the mocked cluster, with their annotations (empty: a bare cluster)."""
    present: dict[str, dict[str, str]] = {}
    monkeypatch.setattr(detection, "installed_priority_classes", lambda kubeconfig: present)
    yield present


def declared_priority_classes(program: Program) -> list[dict[str, Any]]:
    return [normalise(r.inputs) for r in program.by_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")]


def test_the_controllers_install_the_fallback_priority_class_marked_with_the_stack(
    program: Program, served: dict, priority_classes: dict
) -> None:
    program.run(lambda: provider_for("kubeconfig"))
    (declared,) = declared_priority_classes(program)
    assert declared["metadata"]["name"] == FALLBACK_PRIORITY_CLASS
    assert (declared["value"], declared["preemptionPolicy"], declared["globalDefault"]) == (
        -100,
        "Never",
        False,
    )
    assert declared["metadata"]["annotations"] == {INSTALLED_BY_ANNOTATION: THIS_STACK}


def test_a_priority_class_someone_else_made_is_used_and_left_alone(
    program: Program, served: dict, priority_classes: dict, notes: list[str]
) -> None:
    priority_classes[FALLBACK_PRIORITY_CLASS] = {INSTALLED_BY_ANNOTATION: "acme/platform/prod"}
    program.run(lambda: provider_for("kubeconfig"))
    assert declared_priority_classes(program) == []
    assert any(f"PriorityClass {FALLBACK_PRIORITY_CLASS} is already in the cluster" in note for note in notes)
    priority_classes[FALLBACK_PRIORITY_CLASS] = {INSTALLED_BY_ANNOTATION: THIS_STACK}
    program.run(lambda: provider_for("kubeconfig"))
    assert len(declared_priority_classes(program)) == 1  # its own: kept


def test_a_preemptible_first_job_waits_for_the_priority_class_it_names(
    program: Program, served: dict, priority_classes: dict, waits: dict
) -> None:
    def build() -> Any:
        p = provider_for("kubeconfig")
        BatchJob("ft", FIRST_JOB, opts=pulumi.ResourceOptions(provider=p))
        BatchJob(
            "plain",
            dataclasses.replace(FIRST_JOB, placement=NodePlacement(ComputeClass.PREEMPTIBLE), job_name="p"),
            opts=pulumi.ResourceOptions(provider=p),
        )
        return kube.controllers_of(pulumi.ResourceOptions(provider=p))

    controllers = program.run(build)
    assert waits["ft-job-train"] == [controllers]
    assert waits["plain-job-p"] is None  # a plain preemptible Job names no PriorityClass of ours


def test_a_hand_made_stack_without_the_priority_class_is_refused_naming_the_fix(
    program: Program, served: dict, priority_classes: dict
) -> None:
    with pytest.raises(MissingControllerError) as refused:
        program.run(lambda: hand_made_stack(FIRST_JOB))
    message = str(refused.value)
    assert message.startswith(f"BatchJob 'ft' needs the PriorityClass {FALLBACK_PRIORITY_CLASS}")
    assert "provider_for(cluster)" in message and "preemptionPolicy Never" in message and "\n" not in message
    priority_classes[FALLBACK_PRIORITY_CLASS] = {}
    program.run(lambda: hand_made_stack(FIRST_JOB))


# --- the descheduler's move-back policy ---------------------------------------------------------------


def descheduler_release(args: ClusterControllersArgs) -> Mapping[str, Any]:
    (release,) = releases(args)
    assert release.facts is DESCHEDULER
    return release.values


def test_the_descheduler_moves_only_preemptible_first_pods_back_at_most_once_per_interval() -> None:
    values = descheduler_release(
        ClusterControllersArgs(
            jobset=False, descheduler=True, move_back_interval_seconds=600, descheduling_interval_seconds=30
        )
    )
    # A Deployment that looks every interval (a CronJob starts a pod per run).
    assert (values["kind"], values["deschedulingInterval"]) == ("Deployment", "30s")
    (profile,) = values["deschedulerPolicy"]["profiles"]
    # Its one strategy: pods whose preferred node affinity another node satisfies better.
    assert profile["plugins"] == {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}}
    plugins = {plugin["name"]: plugin.get("args") for plugin in profile["pluginConfig"]}
    assert plugins["RemovePodsViolatingNodeAffinity"] == {
        "nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]
    }
    evictor = plugins["DefaultEvictor"]
    assert evictor["labelSelector"] == {"matchLabels": {PLACEMENT_LABEL: "preemptible-first"}}
    assert evictor["minPodAge"] == "600s"
    # Only when the pod fits on a preemptible node now, never while it is saving.
    assert (evictor["nodeFit"], evictor["nodeSelector"]) == (True, f"{COMPUTE_CLASS_LABEL}={PREEMPTIBLE}")
    assert evictor["noEvictionPolicy"] == "Mandatory"
    # The release image and the standard-node affinity are kept beside the policy.
    assert values["image"]["tag"] == "v0.36.0"
    assert values["affinity"] == STANDARD_ONLY


def test_the_move_back_policy_sets_only_values_the_descheduler_chart_declares() -> None:
    declared = yaml.safe_load((pinned_chart(DESCHEDULER) / "values.yaml").read_text())
    values = descheduler_release(ClusterControllersArgs(jobset=False, descheduler=True))
    assert set(values) <= set(declared)
    assert declared["kind"] == "CronJob" and values["kind"] == "Deployment"
    assert set(values["deschedulerPolicy"]) <= set(declared["deschedulerPolicy"])


@pytest.mark.parametrize("value", [0, -60, 1.5, "1800", True])
@pytest.mark.parametrize("field", ["move_back_interval_seconds", "descheduling_interval_seconds"])
def test_an_interval_that_is_not_whole_seconds_above_zero_is_refused_in_one_line(
    field: str, value: Any
) -> None:
    args = ClusterControllersArgs(jobset=False, descheduler=True, **{field: value})
    with pytest.raises(
        ArgsError, match=rf"{field}={value!r} is not a whole number of seconds above zero"
    ) as refused:
        releases(args)
    assert "\n" not in str(refused.value) and f"set {field} to" in str(refused.value)


@pytest.fixture
def warnings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *args, **kwargs: said.append(message))
    return said


@pytest.mark.parametrize(
    ("controllers", "warned"),
    [
        (None, True),  # provider_for's default: no descheduler, not said
        (ClusterControllersArgs(descheduler=True), False),
        (ClusterControllersArgs(descheduler=False), False),  # said on purpose
    ],
)
def test_a_preemptible_first_job_without_a_descheduler_is_warned_that_nothing_moves_it_back(
    program: Program,
    served: dict,
    priority_classes: dict,
    warnings: list[str],
    controllers: ClusterControllersArgs | None,
    warned: bool,
) -> None:
    def build() -> None:
        p = provider_for("kubeconfig", controllers=controllers or True)
        BatchJob("ft", FIRST_JOB, opts=pulumi.ResourceOptions(provider=p))
        BatchJob("plain", JOB, opts=pulumi.ResourceOptions(provider=p))  # PREEMPTIBLE: nothing to move back

    program.run(build)
    moved = [w for w in warnings if "nothing moves them back" in w]
    assert len(moved) == (1 if warned else 0)
    if warned:
        assert moved[0].startswith("BatchJob 'ft': its preemptible-first pods")
        assert "ClusterControllersArgs(descheduler=True)" in moved[0] and "\n" not in moved[0]
