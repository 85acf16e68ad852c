"""What :class:`~together_clusters.components.ClusterControllers` installs, as plain data (pure).

:func:`releases` turns :class:`ClusterControllersArgs` into one :class:`Release` per wanted controller: the
chart reference (the official registry, a mirror, or a local folder), its pinned version, the namespace and
the values (the release image, the controller pods kept off preemptible nodes, and the descheduler's policy of
:mod:`.move_back`). :func:`marked` and
:func:`kept_off_preemptible` are what the component does to every object a chart renders.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from together_clusters.components.placement import standard_placement
from together_clusters.errors import ArgsError
from together_clusters.platform import JOBSET_API
from together_clusters.platform.charts import CHARTS, ChartFacts, Controller

from ..violations import Violation, argument_violation
from .move_back import DESCHEDULER_DEFAULTS_CHANGED, descheduler_values, interval_violations

INSTALLED_BY_ANNOTATION = "together.ai/installed-by"
"""Annotation on every object the component installs: ``<organization>/<project>/<stack>`` of the stack that
installed it (an annotation, as a label value may not hold ``/``). A stack that finds it naming another
stack uses the controller and leaves it alone."""

INSTALLED_BY_LABEL = "together.ai/installed-by-stack"
"""Label on the same objects (value ``"true"``), to list them: ``kubectl get crd -l together.ai/installed-by-stack``."""

OCI = "oci://"
CHART_SOURCE_ENV = "TOGETHER_CHART_SOURCE"
"""Environment variable: the chart source of every ClusterControllers that names none (an air-gapped
machine's mirror or folder), after the stack config ``together:chartSource``."""
CHART_SOURCE_CONFIG = ("together", "chartSource")
"""Stack config (namespace, key) with the same meaning: ``pulumi config set together:chartSource DIR``."""
HELM_REPOSITORY = ("https://", "http://")


@dataclass(frozen=True)
class KueueSettings:
    """How the installed Kueue treats a queued workload that loses its pods (its manager configuration's
    ``waitForPodsReady``, see :func:`kueue_manager_config`).

    An admitted workload whose pods are not all ready within ``pods_ready_timeout_seconds`` (at admission,
    or again after a preemption took one) is evicted, so its quota goes to one that can run, and requeued
    after a backoff of ``requeue_backoff_base_seconds`` doubling up to ``requeue_backoff_max_seconds``.
    Requeued without end: no ``backoffLimitCount``, so a workload is never deactivated because capacity is
    merely short (kubernetes-sigs/kueue#15255: a count reached while spot capacity is dry deactivates the
    workload for good).

    These are what a user tunes: how long a workload may wait for its pods against how soon its quota goes to
    another. The rest of Kueue's configuration is not a setting: the chart's own defaults are kept (its
    reconcilers' workers, :data:`KUEUE_RECONCILER_WORKERS`, with JobSet's added) and its request budget is
    sized for the load the components create (:data:`KUEUE_CLIENT_CONNECTION`); every departure from the
    chart is listed with its reason in :data:`KUEUE_CONFIG_DEFAULTS_CHANGED`.
    """

    pods_ready_timeout_seconds: int = 600
    """How long an admitted workload's pods may take to be all ready (at admission, or again after a
    preemption took one) before it is evicted and requeued: long enough for an image pull and a checkpoint
    restore, short enough that quota held by a workload that cannot run goes back soon (Kueue's
    ``waitForPodsReady.timeout``; on a fleet, how long a worker keeps a workload it cannot run)."""
    requeue_backoff_base_seconds: int = 60
    """The wait before an evicted workload is queued again, doubling with each eviction
    (``requeuingStrategy.backoffBaseSeconds``)."""
    requeue_backoff_max_seconds: int = 3600
    """The longest that wait grows to (``requeuingStrategy.backoffMaxSeconds``)."""


@dataclass(frozen=True)
class ClusterControllersArgs:
    """Which controllers to install and where their charts come from.

    ``jobset`` (default on): the controller of the JobSets that BatchJob, Sweep and TrainingRun render by
    default. ``descheduler``: moves ``PREEMPTIBLE_FIRST`` pods that fell back to standard nodes back to
    preemptible ones when there is room again (:mod:`.move_back`), at most once per
    ``move_back_interval_seconds`` per pod, looking every ``descheduling_interval_seconds``. ``kueue``:
    declared at its pinned version, not yet needed by any component. ``chart_source``: ``None`` takes each
    chart from its official registry; an ``oci://`` or ``https://`` URL is a mirror holding the charts under
    their own names (``<url>/jobset``, or a Helm repository's index); anything else is a local folder holding
    ``<name>/Chart.yaml`` for each chart (an air-gapped cluster: ``helm pull --untar`` each chart there). A
    local chart must be the pinned version. The images are the release images of :mod:`.charts` (mirror them under the same names, or point
    the cluster's registry mirror at registry.k8s.io).
    """

    jobset: bool = True
    """Install JobSet (v0.11.0), the controller of the components' default JobSets."""
    kueue: bool = False
    """Install Kueue (v0.17.0), which :class:`~together_clusters.components.WorkloadQueue` and every workload
    given ``queue=`` need."""
    descheduler: bool | None = None
    """Install the descheduler (v0.36.0) with the move-back policy of :mod:`.move_back` (and nothing else).
    ``None`` (not said) installs none, and a ``PREEMPTIBLE_FIRST`` workload on this provider is warned at
    preview that nothing moves it back; ``False`` says so on purpose (no warning)."""
    move_back_interval_seconds: int = 1800
    """The youngest a fallback pod may be when it is moved back (the descheduler's ``minPodAge``): a run is
    moved at most once per interval, each move costing a checkpoint save and restore."""
    descheduling_interval_seconds: int = 120
    """How often the descheduler looks for fallback pods to move back: a move comes at most this long after
    preemptible room returns (once the pod is old enough)."""
    chart_source: str | None = None
    """``None``: the official registries; ``oci://...`` or ``https://...``: a mirror; else a local folder."""
    priority_classes: bool = True
    """Install the PriorityClass ``PREEMPTIBLE_FIRST`` pods run at (:mod:`.priorities`), unless the cluster has it."""
    kueue_settings: KueueSettings = field(default_factory=KueueSettings)
    """How the installed Kueue requeues a workload that lost its pods (see :class:`KueueSettings`)."""

    def wanted(self) -> tuple[Controller, ...]:
        """The controllers asked for, in install order."""
        flags = {
            Controller.JOBSET: self.jobset,
            Controller.KUEUE: self.kueue,
            Controller.DESCHEDULER: bool(self.descheduler),
        }
        return tuple(controller for controller, on in flags.items() if on)


@dataclass(frozen=True)
class ChartReference:
    """Where Helm finds a chart: ``chart`` (an ``oci://`` reference, a name in ``repository``, or a local
    path) and the version to take (``None`` for a local folder: the folder is the version)."""

    chart: str
    version: str | None
    repository: str | None = None


@dataclass(frozen=True)
class Release:
    """One controller's Helm release: its chart, namespace and values, as plain data."""

    facts: ChartFacts
    reference: ChartReference
    namespace: str
    values: Mapping[str, Any] = field(default_factory=dict)


def with_default_chart_source(
    args: ClusterControllersArgs, configured: str | None, environment: Mapping[str, str]
) -> ClusterControllersArgs:
    """``args`` with the chart source of the stack config (``configured``), else of
    :data:`CHART_SOURCE_ENV`, when they name none themselves."""
    if args.chart_source is not None:
        return args
    default = configured or environment.get(CHART_SOURCE_ENV) or None
    return dataclasses.replace(args, chart_source=default) if default else args


def chart_reference(facts: ChartFacts, chart_source: str | None) -> ChartReference:
    """The reference of ``facts``' chart in ``chart_source`` (see :class:`ClusterControllersArgs`)."""
    source = (chart_source or facts.official_repository).rstrip("/")
    if source.startswith(OCI):
        return ChartReference(f"{source}/{facts.chart_name}", facts.version)
    if source.startswith(HELM_REPOSITORY):
        return ChartReference(facts.chart_name, facts.version, repository=source)
    return ChartReference(os.path.join(source, facts.chart_name), None)


def local_chart_violations(facts: ChartFacts, chart_source: str | None) -> list[Violation]:
    """What is wrong with a local chart folder (none for a registry): no ``Chart.yaml``, another chart,
    another version. Reads the folder; a registry is only asked by the Kubernetes provider."""
    reference = chart_reference(facts, chart_source)
    if reference.version is not None:
        return []
    chart_file = os.path.join(reference.chart, "Chart.yaml")
    try:
        with open(chart_file) as stream:
            chart = yaml.safe_load(stream) or {}
    except (OSError, yaml.YAMLError) as error:
        return [
            argument_violation(
                "chart-source",
                "chart_source",
                chart_source,
                f"chart_source={chart_source!r} holds no readable {chart_file} ({type(error).__name__})",
                f"put the {facts.chart_name} chart there (helm pull {facts.official_repository}/"
                f"{facts.chart_name} --version {facts.version} --untar), or leave chart_source unset",
            )
        ]
    found = (chart.get("name"), str(chart.get("version")))
    if found != (facts.chart_name, facts.version):
        return [
            argument_violation(
                "chart-source",
                "chart_source",
                chart_source,
                f"chart_source={chart_source!r} holds {found[0]} {found[1]} at {chart_file}, "
                f"not {facts.chart_name} {facts.version}",
                f"put the pinned chart there (helm pull ... --version {facts.version} --untar)",
            )
        ]
    return []


def standard_node_affinity() -> dict[str, Any]:
    """The affinity that keeps a controller's pods off preemptible nodes, so a preemption never takes the
    controller of the preempted workloads down with them (the components' own standard placement)."""
    return dict(standard_placement().pod_spec_fields()["affinity"])


def _nested(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    for key in reversed(path):
        value = {key: value}
    return dict(value)


def _merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def chart_values(facts: ChartFacts) -> dict[str, Any]:
    """The values a release of ``facts``' chart is installed with: the release image, pulled
    ``IfNotPresent``, and (where the chart has the value) the affinity to standard nodes."""
    image = {"repository": facts.image_repository, "tag": facts.image_tag, "pullPolicy": "IfNotPresent"}
    values = _nested(facts.image_values, image)
    if facts.affinity_value is not None:
        values = _merged(values, _nested(facts.affinity_value, standard_node_affinity()))
    return values


KUEUE_FRAMEWORKS = ("batch/job", f"{JOBSET_API.group}/{JOBSET_API.kind.lower()}")
"""The kinds Kueue manages (its integrations' names: ``<group>/<kind>`` in lower case): those the components
submit. Its chart's default list also takes pods, Deployments and StatefulSets through webhooks on every pod;
none of them is submitted to a queue here."""

KUEUE_UNCOUNTED_RESOURCES = ("cpu", "memory", "ephemeral-storage")
"""Resources the queue's quotas leave out (Kueue's ``resources.excludeResourcePrefixes``): the queue counts
GPUs, what the cluster is sized in; CPU and memory are left to the scheduler (and Topology Aware Scheduling,
which still fits every requested resource on real nodes)."""


KUEUE_FEATURES_OFF = (
    "TASFailedNodeReplacement",
    "TASFailedNodeReplacementFailFast",
    "TASReplaceNodeOnPodTermination",
    "TASReplaceNodeOnNodeTaints",
)
"""Kueue features turned off (all beta, on by default in v0.17.0): replacing a preempted node in place.
Seen on the twin: a preempted JobSet's new pod was ungated to the node on its way out, stayed Pending once it
was gone, and Kueue's workload controller skips a workload with nodes to replace, so its PodsReady timeout
never fired. They act on topologies whose lowest level is the node, which the queue's is not
(:data:`..manifests.workload_queue.TOPOLOGY_LEVEL`); off, a workload whose pods do not all run again within
the timeout is evicted and requeued whole, and its next admission tries preemptible then standard afresh."""


KUEUE_RECONCILER_WORKERS: dict[str, int] = {
    # The chart's own (v0.17.0): each kind's reconciler otherwise runs one request at a time.
    "Job.batch": 5,
    "Pod": 5,
    "Workload.kueue.x-k8s.io": 5,
    "LocalQueue.kueue.x-k8s.io": 1,
    "ClusterQueue.kueue.x-k8s.io": 1,
    "ResourceFlavor.kueue.x-k8s.io": 1,
    # Ours: the components submit JobSets by default, as many as Jobs.
    f"{JOBSET_API.kind}.{JOBSET_API.group}": 5,
}
"""Kueue's ``controller.groupKindConcurrency``: concurrent reconciles per kind. The key is controller-runtime's
``GroupKind.String()`` (``<Kind>.<group>``, the kind alone for the core group), which its builder looks up for
the kind a controller is ``For`` (Kueue's generic job reconciler for ``JobSet.jobset.x-k8s.io``). ``Pod`` also
sizes Kueue's pod-watching controllers (Topology Aware Scheduling's usage of pods outside the queue)."""

KUEUE_CLIENT_CONNECTION: dict[str, int] = {"qps": 300, "burst": 500}
"""Kueue's ``clientConnection``: the one token bucket every request of the manager shares (v0.17.0's
cmd/kueue/main.go sets it as the client's rate limiter: writes, uncached reads, events; the binary's own
default is 20/30, the chart's 50/100). Per workload submitted to a queue Kueue writes about ten times, by a
reading of its controllers not yet measured: the Workload, its quota reservation and admission, the JobSet's
unsuspension, the ungating of each pod (Topology Aware Scheduling, which every WorkloadQueue uses), PodsReady,
and an event for most. A Sweep of 100 trials is then about a thousand requests: some 20 s of throttling at the
chart's budget before the scheduler sees the last pod, about 3 s at 300/s. 300/500 is the default issue 40
reports upstream took in v0.19 (not on this machine's module proxy to check), below what JobSet's chart gives
its controller (500/500), and far below what an API server serves. On a fleet's manager it does not raise
MultiKueue's clients to the workers, fixed at client-go's 5/s (burst 10) in v0.17.0."""


def kueue_manager_config(
    settings: KueueSettings, multikueue: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Kueue's manager configuration (``config.kueue.x-k8s.io/v1beta2``) for every Kueue the package installs
    (a cluster's, a fleet manager's, a fleet worker's): the chart's own configuration but for what
    :data:`KUEUE_CONFIG_DEFAULTS_CHANGED` lists, the components' frameworks, the requeuing of
    :class:`KueueSettings` (not on a fleet's manager, which times no pods), and the ``multiKueue`` section a
    FleetQueue on this cluster asks for."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": dict(KUEUE_RECONCILER_WORKERS)},
        "clientConnection": dict(KUEUE_CLIENT_CONNECTION),
        "featureGates": dict.fromkeys(KUEUE_FEATURES_OFF, False),
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        "resources": {"excludeResourcePrefixes": list(KUEUE_UNCOUNTED_RESOURCES)},
        "waitForPodsReady": {
            "timeout": f"{settings.pods_ready_timeout_seconds}s",
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                # backoffLimitCount left out (null): requeued without end, never deactivated.
                "backoffBaseSeconds": settings.requeue_backoff_base_seconds,
                "backoffMaxSeconds": settings.requeue_backoff_max_seconds,
            },
        },
    }
    if multikueue:
        config["multiKueue"] = dict(multikueue)
        # A fleet's manager runs none of its workloads' pods: each worker's Kueue times them and gives a
        # workload back, and MultiKueue re-admits it at once. The manager's own timer read the pods' state
        # only as the worker's job status copied back, and on firing evicted with a requeue backoff
        # (backoffBaseSeconds, 60 s) on top of the worker's timeout (issue 40, part 2).
        del config["waitForPodsReady"]
    return config


KUEUE_CONFIG_DEFAULTS_CHANGED: dict[str, str] = {
    "integrations.frameworks": "only the kinds the components submit to a queue (:data:`KUEUE_FRAMEWORKS`): the "
    "chart's list adds pods, Deployments and StatefulSets, which put Kueue's webhook on every pod of the cluster, "
    "and operators the package never installs",
    "clientConnection.qps": "sized for the requests the package's queues cause (:data:`KUEUE_CLIENT_CONNECTION`)",
    "clientConnection.burst": "sized with qps (:data:`KUEUE_CLIENT_CONNECTION`)",
}
"""Each key of the Kueue chart's default manager configuration (``managerConfig.controllerManagerConfigYaml`` of
charts/kueue/values.yaml, v0.17.0) that :func:`kueue_manager_config` drops or changes, by dotted path, with
why. Every other key of the chart's configuration is kept as the chart sets it; tests/components/
test_chart_defaults.py compares the two and fails on a change not listed here (or listed and not made)."""


def kueue_values(settings: KueueSettings, multikueue: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Kueue chart's values beyond the image: its manager configuration (a YAML string in the chart)."""
    config = yaml.safe_dump(kueue_manager_config(settings, multikueue), sort_keys=False)
    return {"managerConfig": {"controllerManagerConfigYaml": config}}


def releases(args: ClusterControllersArgs, owner: str = "ClusterControllers") -> list[Release]:
    """The releases ``args`` asks for; :class:`ArgsError` naming every unusable local chart."""
    wanted = [CHARTS[controller] for controller in args.wanted()]
    problems = interval_violations(args.move_back_interval_seconds, args.descheduling_interval_seconds)
    problems += [v for facts in wanted for v in local_chart_violations(facts, args.chart_source)]
    if problems:
        raise ArgsError(owner, problems)
    return [
        Release(
            facts, chart_reference(facts, args.chart_source), facts.namespace, release_values(facts, args)
        )
        for facts in wanted
    ]


def release_values(
    facts: ChartFacts, args: ClusterControllersArgs, multikueue: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """:func:`chart_values`, with what ``args`` configures of the controller (the descheduler's policy,
    Kueue's manager configuration, with ``multikueue`` when a FleetQueue asked for it)."""
    values = chart_values(facts)
    if facts.controller is Controller.KUEUE:
        values = _merged(values, kueue_values(args.kueue_settings, multikueue))
    if facts.controller is Controller.DESCHEDULER:
        values = _merged(
            values, descheduler_values(args.move_back_interval_seconds, args.descheduling_interval_seconds)
        )
    return values


def _image_reasons(facts: ChartFacts) -> dict[str, str]:
    """Why a chart's staging image is replaced by the release image, pulled once
    (:mod:`together_clusters.platform.charts`)."""
    prefix = ".".join(facts.image_values)
    return {
        f"{prefix}.repository": "the release image's registry, not the chart's staging one",
        f"{prefix}.tag": f"the release tag {facts.image_tag}, not the chart's moving staging tag",
        f"{prefix}.pullPolicy": "IfNotPresent: a release tag never moves, and Always would make every node "
        "restart depend on the registry",
    }


_KEPT_OFF_PREEMPTIBLE = (
    "the controller's pods kept off preemptible nodes (:func:`standard_node_affinity`), so a "
    "preemption never takes down the controller of the workloads it preempts"
)

CHART_DEFAULTS_CHANGED: dict[Controller, dict[str, str]] = {
    Controller.JOBSET: {
        **_image_reasons(CHARTS[Controller.JOBSET]),
        "controller.affinity": _KEPT_OFF_PREEMPTIBLE,
    },
    Controller.KUEUE: {
        **_image_reasons(CHARTS[Controller.KUEUE]),
        "managerConfig.controllerManagerConfigYaml": "replaced whole (the chart takes one YAML string): kept key "
        "by key but for :data:`KUEUE_CONFIG_DEFAULTS_CHANGED`",
    },
    Controller.DESCHEDULER: {
        # The chart's default is already the release registry, pulled IfNotPresent.
        "image.tag": f"named ({CHARTS[Controller.DESCHEDULER].image_tag}) where the chart's empty default means its "
        "appVersion, the same image: the twin and a mirror read every image from platform/charts.py",
        "affinity": _KEPT_OFF_PREEMPTIBLE,
        **DESCHEDULER_DEFAULTS_CHANGED,
    },
}
"""Each default value of a pinned chart (its ``values.yaml``) that :func:`release_values` drops or changes, by
controller and dotted path, with why. Helm merges our values over the chart's map by map, so every other value
stays the chart's; tests/components/test_chart_defaults.py fails on a change not listed here (or listed and not
made)."""


POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
"""Where the pod spec sits in each kind of workload a chart renders."""


def kept_off_preemptible(kind: str, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """``props`` of a rendered object of ``kind`` with the standard-node affinity in its pod spec when it
    has none (a chart without an affinity value); ``None`` when nothing changes."""
    path = POD_TEMPLATE_PATHS.get(kind)
    if path is None:
        return None
    spec: Any = props
    for key in path:
        spec = spec.get(key) if isinstance(spec, Mapping) else None
    if not isinstance(spec, Mapping) or spec.get("affinity"):
        return None

    def rebuilt(node: Mapping[str, Any], rest: tuple[str, ...]) -> dict[str, Any]:
        if not rest:
            return {**node, "affinity": standard_node_affinity()}
        return {**node, rest[0]: rebuilt(node[rest[0]], rest[1:])}

    return rebuilt(props, path)


def marked(props: Mapping[str, Any], installed_by: str) -> dict[str, Any]:
    """``props`` of a rendered object with the marks naming the stack that installed it."""
    metadata = dict(props.get("metadata") or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), INSTALLED_BY_LABEL: "true"}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), INSTALLED_BY_ANNOTATION: installed_by}
    return {**props, "metadata": metadata}
