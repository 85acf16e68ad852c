"""ClusterControllers: the controllers the components' objects need (JobSet), installed from their official
Helm charts at pinned versions, unless the cluster already has them; and the PriorityClass ``PREEMPTIBLE_FIRST``
pods run at (:mod:`.controllers.priorities`), decided the same way.

How it decides, per controller, when the program runs (preview and up alike):

- The kubeconfig is not known yet (a preview of a cluster this stack is still to create): the cluster is
  taken as bare, and the preview shows the install.
- The kubeconfig is known: the cluster is asked for the controller's CustomResourceDefinition
  (``jobsets.jobset.x-k8s.io``). Absent: installed. Present and annotated
  ``together.ai/installed-by: <organization>/<project>/<stack>`` naming this stack: kept and managed (a
  bumped pin is one ``pulumi up``). Present otherwise (another stack, ``helm install``, ``kubectl apply``, a
  cluster that came with it): used and left alone, with a note in the preview naming who installed it and
  how to hand it to this stack. A second stack on the same cluster so uses the first one's controllers.
- The cluster cannot be asked (no ``kubernetes`` client, no answer): installed, with a warning saying why.

It looks at the CRD only: a CRD left behind by a removed controller counts as installed. The descheduler
serves no CRD, so it is always installed when asked for.

Every object a chart renders carries the annotation ``together.ai/installed-by`` and the label
``together.ai/installed-by-stack``; the controller pods get a required node affinity to standard nodes, so a
preemption never takes the controller down with the workloads it restarts. Each chart is a
``pulumi_kubernetes.helm.v4.Chart`` (CRDs included, server-side apply, forced, without the values the
controllers write: :mod:`.controllers.applied`). When it installs JobSet, its charts' Deployments and
Services are done once stored (pulumi-kubernetes would otherwise hold one of the engine's steps for each
until its pods are ready, and with every step so held before the CRDs and RBAC their controllers need were
applied, ``up`` stalled: :data:`~.manifests.awaiting.CHART_READY_WHEN_STORED`), and the component counts
JobSet as installed once the cluster admits a JobSet (through JobSet's webhooks and Kueue's, when the charts
install both: :mod:`.controllers.admission`); whatever waits for this component waits for that. Without a
JobSet of its own to probe, or no kubeconfig of the program's to probe with (a provider given to the plugin
by reference, as a YAML program does), the engine waits for each object to be ready.
``pulumi destroy`` removes the components that depend on it first.

Destroying the stack that installed the controllers removes them (and the JobSet CRD with every JobSet in
the cluster) for every stack that uses them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, ClassVar

import pulumi
import pulumi_kubernetes as k8s

from together_clusters.errors import ArgsError
from together_clusters.platform.charts import ChartFacts, Controller

from . import kube
from .controllers import admission
from .controllers.applied import DATA_FIELDS, controller_written
from .controllers.detection import Finding, Presence, find, find_priority_class
from .controllers.priorities import PRIORITY_CLASSES, PriorityClassFacts, priority_class_manifest
from .controllers.releases import (
    CHART_SOURCE_CONFIG,
    INSTALLED_BY_ANNOTATION,
    ClusterControllersArgs,
    Release,
    kept_off_preemptible,
    marked,
    release_values,
    releases,
    with_default_chart_source,
)
from .manifests.awaiting import CHART_READY_WHEN_STORED
from .resource_types import TYPE_PREFIX
from .violations import argument_violation

__all__ = ["ClusterControllers", "ClusterControllersArgs", "stack_identity"]

CHART_TYPE = "kubernetes:helm.sh/v4:Chart"


def stack_identity() -> str:
    """``<organization>/<project>/<stack>`` of the running program: what the installed objects are marked with."""
    return "/".join(
        part for part in (pulumi.get_organization(), pulumi.get_project(), pulumi.get_stack()) if part
    )


def left_alone_note(owner: str, facts: ChartFacts, finding: Finding) -> str:
    """The preview note of a controller found installed by someone else."""
    by = (
        f"by {finding.installed_by}"
        if finding.installed_by
        else f"without the {INSTALLED_BY_ANNOTATION} annotation"
    )
    return (
        f"{owner}: {facts.controller.value} is already installed in the cluster ({facts.crd} found, installed "
        f"{by}): using it, not installing it. To have this stack manage it, uninstall that one and run pulumi up "
        "again; to silence this note, leave it out of ClusterControllersArgs."
    )


class ClusterControllers(pulumi.ComponentResource):
    """Installs the controllers ``args`` asks for (JobSet by default) on the cluster of its Kubernetes
    provider, unless the cluster already has them (see the module's docstring for how that is decided).

    :func:`~together_clusters.components.provider_for` declares one for its provider; declare it yourself
    for a provider you make, before the components that use it::

        provider = k8s.Provider("k8s", kubeconfig=cluster.kube_config)
        ClusterControllers("controllers", opts=pulumi.ResourceOptions(provider=provider))

    The components on that provider then wait for it (a ``depends_on`` of it does the same). ``kubeconfig``:
    what the cluster is asked with; by default the provider's own.

    ``installed``: per controller, ``"installed"`` (by this stack) or what was found instead.
    """

    installed: pulumi.Output[dict[str, str]]
    type_token: ClassVar[str | None] = None
    """The Pulumi type it registers as, when not ``together:components:ClusterControllers``: the plugin
    ``together`` constructs it as the package schema names it (``together:index:ClusterControllers``)."""
    provider_by_reference: ClassVar[bool] = False
    """Whether the provider it is given may be a reference the engine reads back from its state (set by the
    plugin ``together``, which constructs it for YAML, TypeScript and Go programs): such a provider's kubeconfig
    is there in some runs and not in others, so it never decides whether the charts' objects are done once
    stored (the ``kubeconfig`` keyword does)."""

    def __init__(
        self,
        name: str,
        args: ClusterControllersArgs | None = None,
        opts: pulumi.ResourceOptions | None = None,
        *,
        kubeconfig: pulumi.Input[str] | None = None,
    ) -> None:
        namespace, key = CHART_SOURCE_CONFIG
        args = with_default_chart_source(
            args or ClusterControllersArgs(), pulumi.Config(namespace).get(key), os.environ
        )
        owner = f"ClusterControllers {name!r}"
        planned = releases(args, owner)  # an unusable chart source is refused before anything is registered
        super().__init__(self.type_token or f"{TYPE_PREFIX}:ClusterControllers", name, None, opts)
        self.args = args
        self.releases = planned
        self._multikueue: dict[str, Any] = {}
        self._declared = False
        provider = kube.kubernetes_provider(opts)
        if provider is not None:
            kube.register_controllers(provider, self)
        if kubeconfig is not None:
            asked: pulumi.Output[Any] = pulumi.Output.from_input(kubeconfig)
        elif provider is not None:
            asked = kube.kubeconfig_of(provider)
        else:
            asked = pulumi.Output.from_input(None)
        deleted_with = (opts.deleted_with if opts is not None else None) or kube.cluster_of(opts)
        this_stack = stack_identity()
        # A provider given to the plugin's construct by reference (a YAML program's) is read back from the
        # engine's state, its kubeconfig there in some runs and not in others: whether the charts' objects are
        # ready once stored must not follow it, or one run adds the annotations the next one removes.
        kubeconfig_of_the_program = kubeconfig is not None or not self.provider_by_reference

        def declare(kubeconfig_value: Any) -> pulumi.Output[dict[str, str]]:
            known = kubeconfig_value if isinstance(kubeconfig_value, str) else None
            outcome: dict[str, pulumi.Input[str]] = {}
            self._declared = True
            charts: list[k8s.helm.v4.Chart] = []
            jobset_namespace: str | None = None
            findings = {r.facts.controller: self._finding(r.facts, known, this_stack) for r in planned}
            # Installing JobSet, the component waits for the cluster to admit a JobSet (through JobSet's webhooks
            # and Kueue's): the charts' Deployments and Services need not hold the engine's steps until ready.
            # Only with a kubeconfig of the program's to probe with: otherwise its charts keep the engine's waits,
            # or a JobSet created right after met a webhook not yet served.
            admission_probed = (
                kubeconfig_of_the_program
                and known is not None
                and any(
                    r.facts.controller is Controller.JOBSET
                    and findings[r.facts.controller].presence is not Presence.THEIRS
                    for r in planned
                )
            )
            for release in planned:
                if release.facts.controller is Controller.KUEUE and self._multikueue:
                    release = dataclasses.replace(
                        release, values=release_values(release.facts, args, self._multikueue)
                    )
                finding = findings[release.facts.controller]
                if finding.presence is Presence.THEIRS:
                    pulumi.log.info(left_alone_note(owner, release.facts, finding), resource=self)
                    outcome[release.facts.controller.value] = (
                        f"found, installed by {finding.installed_by or 'another'}"
                    )
                    continue
                if finding.presence is Presence.UNKNOWN and known is not None:
                    pulumi.log.warn(
                        f"{owner}: could not ask the cluster whether {release.facts.controller.value} is installed "
                        f"({finding.reason}): installing it",
                        resource=self,
                    )
                chart = self._install(name, release, this_stack, deleted_with, admission_probed)
                charts.append(chart)
                outcome[release.facts.controller.value] = chart.urn.apply(lambda _: "installed")
                if release.facts.controller is Controller.JOBSET:
                    jobset_namespace = release.namespace
            if jobset_namespace is not None and known is not None:
                # Installed, JobSet is "installed" once the cluster admits a JobSet (after every chart: Kueue's
                # webhooks see JobSets too), so nothing creates one before its webhook answers (.admission).
                namespace_ = jobset_namespace
                outcome[Controller.JOBSET.value] = pulumi.Output.all(*[c.urn for c in charts]).apply(
                    lambda _: self._admitted(owner, known, namespace_)
                )
            for priority in PRIORITY_CLASSES.values() if args.priority_classes else ():
                outcome[priority.name] = self._priority_class(name, priority, known, this_stack, deleted_with)
            return pulumi.Output.all(**outcome) if outcome else pulumi.Output.from_input({})

        # What was installed or found holds nothing secret, though it is read with the (secret) kubeconfig: kept
        # plain, so its secrecy never changes between runs (a provider read back in the plugin's construct gives
        # the kubeconfig's secrecy as it pleases; the stash below showed as changed when it flipped).
        self.installed = pulumi.Output.unsecret(asked.apply(declare, run_with_unknowns=True))
        # A resource of the component's own, declared now: what depends on the component waits for it, and it
        # waits for the charts (declared once the kubeconfig is known), so depends_on=[this] is enough.
        ready = pulumi.Stash(f"{name}-ready", input=self.installed, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"installed": ready.input})

    def use_multikueue(self, owner: str, settings: Mapping[str, Any]) -> None:
        """Configure the Kueue this installs as a MultiKueue manager (its configuration's ``multiKueue``
        section): called by a ``FleetQueue`` on this provider, while the program runs, before the chart is
        declared (which waits for the cluster's kubeconfig).

        Raises :class:`ArgsError` when Kueue is not asked for, or when two fleets ask for different settings
        (a cluster's Kueue has one configuration).
        """
        problem = None
        if not self.args.kueue:
            problem = "installs no Kueue (kueue=False)"
        elif self._multikueue and dict(settings) != self._multikueue:
            problem = f"is already a MultiKueue manager with {self._multikueue}, not {dict(settings)}"
        elif self._declared:
            problem = "declared its charts before the fleet was created"
        if problem is not None:
            raise ArgsError(
                owner,
                [
                    argument_violation(
                        "fleet-manager-kueue",
                        "opts.provider",
                        self._name,
                        f"opts.provider is the manager's, whose ClusterControllers {self._name!r} {problem}",
                        "create the manager's provider with provider_for(hub, controllers=ClusterControllersArgs("
                        "kueue=True)) and give every FleetQueue on it the same worker_lost_timeout_seconds",
                    )
                ],
            )
        self._multikueue = dict(settings)

    async def _admitted(self, owner: str, kubeconfig: str, namespace: str) -> str:
        """``"installed"`` once the cluster admits a JobSet (at ``pulumi up``; a preview does not wait)."""
        if pulumi.runtime.is_dry_run():
            return "installed"
        refused = await admission.until_admitted(kubeconfig, namespace)
        if refused is not None and refused.final:
            pulumi.log.warn(
                f"{owner}: could not ask the cluster whether it admits a JobSet yet ({refused.why}): not "
                "waiting for JobSet's webhook",
                resource=self,
            )
        elif refused is not None:
            raise pulumi.RunError(f"{owner}: {refused.why}")
        return "installed"

    def _priority_class(
        self,
        name: str,
        facts: PriorityClassFacts,
        kubeconfig: str | None,
        this_stack: str,
        deleted_with: pulumi.Resource | None,
    ) -> pulumi.Input[str]:
        """Declare ``facts``' PriorityClass unless someone else's is there (then used, left alone, noted)."""
        finding = find_priority_class(facts.name, kubeconfig, this_stack)
        if finding.presence is Presence.THEIRS:
            pulumi.log.info(
                f"ClusterControllers {name!r}: the PriorityClass {facts.name} is already in the cluster (installed "
                f"by {finding.installed_by or 'another'}): using it, not installing it",
                resource=self,
            )
            return f"found, installed by {finding.installed_by or 'another'}"
        manifest = marked(priority_class_manifest(facts), this_stack)
        created = k8s.scheduling.v1.PriorityClass(
            f"{name}-{facts.name}",
            metadata=manifest["metadata"],
            value=manifest["value"],
            preemption_policy=manifest["preemptionPolicy"],
            global_default=manifest["globalDefault"],
            description=manifest["description"],
            opts=pulumi.ResourceOptions(parent=self, deleted_with=deleted_with),
        )
        return created.urn.apply(lambda _: "installed")

    @staticmethod
    def _finding(facts: ChartFacts, kubeconfig: str | None, this_stack: str) -> Finding:
        if facts.crd is None:
            return Finding(Presence.ABSENT, reason="it serves no CRD to look for")
        return find(facts.crd, kubeconfig, this_stack)

    def _install(
        self,
        name: str,
        release: Release,
        this_stack: str,
        deleted_with: pulumi.Resource | None,
        ready_when_stored: bool,
    ) -> k8s.helm.v4.Chart:
        controller = release.facts.controller.value
        namespace = k8s.core.v1.Namespace(
            f"{name}-{controller}-namespace",
            metadata=marked({"metadata": {"name": release.namespace}}, this_stack)["metadata"],
            opts=pulumi.ResourceOptions(parent=self, deleted_with=deleted_with),
        )
        reference = release.reference
        repository = (
            k8s.helm.v4.RepositoryOptsArgs(repo=reference.repository) if reference.repository else None
        )
        return k8s.helm.v4.Chart(
            f"{name}-{controller}",
            chart=reference.chart,
            version=reference.version,
            repository_opts=repository,
            name=release.facts.chart_name,
            namespace=release.namespace,
            values=dict(release.values),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[namespace],
                deleted_with=deleted_with,
                transforms=[chart_transform(this_stack, deleted_with, ready_when_stored)],
            ),
        )


def chart_transform(
    this_stack: str, deleted_with: pulumi.Resource | None, ready_when_stored: bool = False
) -> pulumi.ResourceTransform:
    """The transform of every object a chart renders: the marks naming this stack, the standard-node
    affinity where the chart has no value for it, a forced server-side apply of all but the values the
    controllers write (:mod:`.controllers.applied`), and ``deleted_with`` the cluster (a transform, as the
    objects are registered by the Kubernetes provider, out of the program's reach). ``ready_when_stored``
    (the component waits for admission itself): Deployments and Services ready once stored
    (:data:`~.manifests.awaiting.CHART_READY_WHEN_STORED`, which says why)."""

    async def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if not args.type_.startswith("kubernetes:") or args.type_ == CHART_TYPE:
            return None
        props: Mapping[str, Any] = args.props
        kind = args.type_.rsplit(":", 1)[-1]
        props = kept_off_preemptible(kind, props) or props
        # Forced, so a rerun after a killed `up` takes over what the killed run applied; and so declaring
        # nothing a controller writes (its rotated certificate), which a forced apply would take from it.
        # A Secret's values come as a secret Output: their values are awaited to be judged.
        known = {field: await _value(props.get(field)) for field in DATA_FIELDS} if kind == "Secret" else {}
        left = controller_written(kind, {**props, **known})
        props = marked({key: value for key, value in props.items() if key not in left}, this_stack)
        metadata = kube.with_forced_apply(props["metadata"])
        if ready_when_stored and kind in CHART_READY_WHEN_STORED:
            given = metadata.get("annotations") or {}
            metadata = {**metadata, "annotations": {**CHART_READY_WHEN_STORED[kind], **given}}
        props = {**props, "metadata": metadata}
        options = args.opts
        if deleted_with is not None and options.deleted_with is None:
            options = pulumi.ResourceOptions.merge(options, pulumi.ResourceOptions(deleted_with=deleted_with))
        return pulumi.ResourceTransformResult(props=props, opts=options)

    return transform


async def _value(value: Any) -> Any:
    """``value``, or the value of an Output (a Secret's data, given to a transform as a secret Output)."""
    return await value.future() if isinstance(value, pulumi.Output) else value
