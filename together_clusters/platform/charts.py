"""The pinned facts of the charts the package installs, defined once: where each chart is published, its
version, the release image its values must name, the namespace it goes to and the kinds it serves.

Read from the charts themselves (a Go module zip holds its repository's ``charts/``, so
``go mod download sigs.k8s.io/jobset@v0.11.0`` puts ``charts/jobset`` on disk). Every chart's ``values.yaml``
names a staging image (``.../k8s-staging-images/jobset/jobset:main``, ``.../kueue:release-0.17``) or none
(the descheduler's tag defaults to the chart's version), so the values always set the release image and
``IfNotPresent`` (a release tag never moves; ``Always`` would make every node restart depend on the registry).

Bumping a version is editing one entry here and one ``pulumi up``. Facts, standard library only: the
components install these charts (:class:`~together_clusters.components.ClusterControllers`) and the emulator's
Kubernetes twin runs their release images as local binaries, so both read them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from together_clusters.platform import JOBSET_API


class Controller(StrEnum):
    """The controllers :class:`~together_clusters.components.ClusterControllers` can install."""

    JOBSET = "jobset"
    KUEUE = "kueue"
    DESCHEDULER = "descheduler"


@dataclass(frozen=True)
class ChartFacts:
    """One controller's chart, as published upstream.

    ``image_values`` is the path in the chart's values of the mapping holding ``repository``, ``tag`` and
    ``pullPolicy``; ``affinity_value`` the path of the controller pods' affinity, or ``None`` when the chart
    has no such value (the component then adds the affinity to the rendered pod templates).
    ``crd`` is the CustomResourceDefinition whose presence says the controller is installed, ``None`` for a
    controller that serves no kind of its own (the descheduler); ``kinds`` the kinds the components render
    that need it.
    """

    controller: Controller
    title: str
    """How messages name it."""
    chart_name: str
    official_repository: str
    """An ``oci://`` registry path (the chart is ``<path>/<chart_name>``) or a Helm repository URL."""
    version: str
    image_repository: str
    image_tag: str
    namespace: str
    image_values: tuple[str, ...]
    affinity_value: tuple[str, ...] | None
    crd: str | None
    kinds: tuple[str, ...] = ()


JOBSET = ChartFacts(
    controller=Controller.JOBSET,
    title=JOBSET_API.kind,
    chart_name="jobset",
    official_repository="oci://registry.k8s.io/jobset/charts",
    version="0.11.0",
    image_repository="registry.k8s.io/jobset/jobset",
    image_tag="v0.11.0",
    namespace="jobset-system",
    image_values=("image",),
    affinity_value=("controller", "affinity"),
    crd=JOBSET_API.crd_name,
    kinds=(JOBSET_API.kind,),
)
"""JobSet v0.11.0 (charts/jobset of sigs.k8s.io/jobset@v0.11.0: Chart.yaml version 0.11.0)."""

KUEUE = ChartFacts(
    controller=Controller.KUEUE,
    title="Kueue",
    chart_name="kueue",
    official_repository="oci://registry.k8s.io/kueue/charts",
    version="0.17.0",
    image_repository="registry.k8s.io/kueue/kueue",
    image_tag="v0.17.0",
    namespace="kueue-system",
    image_values=("controllerManager", "manager", "image"),
    # The chart's manager Deployment takes a nodeSelector and tolerations, no affinity (v0.17.0,
    # templates/manager/manager.yaml), and a nodeSelector cannot say "not preemptible".
    affinity_value=None,
    crd="clusterqueues.kueue.x-k8s.io",
    kinds=("ResourceFlavor", "Topology", "ClusterQueue", "LocalQueue"),
)
"""Kueue v0.17.0 (charts/kueue of sigs.k8s.io/kueue@v0.17.0: Chart.yaml version 0.17.0): the controller of
:class:`~together_clusters.components.WorkloadQueue`'s kinds and of every workload submitted to a queue."""

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
"""The Kueue API the components write (v0.17.0 stores v1beta2 and still serves v1beta1)."""

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
"""Label on a Job or JobSet naming the LocalQueue it is submitted to: Kueue's webhook suspends it at creation,
Kueue unsuspends it once admitted."""

DESCHEDULER = ChartFacts(
    controller=Controller.DESCHEDULER,
    title="the descheduler",
    chart_name="descheduler",
    official_repository="https://kubernetes-sigs.github.io/descheduler/",
    version="0.36.0",
    image_repository="registry.k8s.io/descheduler/descheduler",
    image_tag="v0.36.0",
    namespace="descheduler-system",
    image_values=("image",),
    affinity_value=("affinity",),
    crd=None,
)
"""The descheduler v0.36.0, published in its Helm repository (not OCI). The module
sigs.k8s.io/descheduler@v0.36.0 still ships its chart as version 0.35.0 (the chart is bumped after the tag),
so a local copy taken from that module as it is is refused as the wrong version; the chart published as 0.36.0
(tag descheduler-helm-chart-0.36.0) is that folder with Chart.yaml's version and appVersion bumped, which is
how scripts/install-kubernetes copies it for the twin. Its policy:
:mod:`together_clusters.components.controllers.move_back`."""

CHARTS: dict[Controller, ChartFacts] = {facts.controller: facts for facts in (JOBSET, KUEUE, DESCHEDULER)}
"""Every chart, by controller."""

NEEDED_BY_KIND: dict[str, ChartFacts] = {kind: facts for facts in CHARTS.values() for kind in facts.kinds}
"""The chart whose controller serves each kind the components render (``JobSet`` -> JobSet)."""
