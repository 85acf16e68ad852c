"""BatchInference's objects: a Deployment of draining workers, a Service and a budget when they apply."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from together_clusters.platform import ComputeClass

from ..args import BatchInferenceArgs
from ..checkpoint import contract
from ..placement import placement_for
from ..violations import Violation, argument_violation
from .awaiting import DEPLOYMENT_ACCEPTED_ANNOTATIONS
from .checks import at_least, container_violations, refuse_invalid, shared_settings_violations
from .common import (
    Manifest,
    env_entry,
    labels_for,
    object_metadata,
    pod_annotations,
    pod_labels_of,
    selector_for,
    template_metadata_of,
)
from .pods import container, pod_spec

DEFAULT_PRE_STOP_SECONDS = 5


def argument_violations(name: str, args: BatchInferenceArgs) -> list[Violation]:
    """Every problem of a BatchInference's arguments (the guard then checks what they render)."""
    pre_stop = _pre_stop_seconds(args)
    found = [*at_least("replicas", args.replicas, 1), *shared_settings_violations(args.pod)]
    if args.service_port is None and pre_stop:
        found.append(
            argument_violation(
                "pre-stop",
                "pre_stop_seconds",
                pre_stop,
                f"pre_stop_seconds={pre_stop} without service_port: nothing routes to queue workers, so a "
                "preStop pause only takes time from the drain",
                "set service_port or leave pre_stop_seconds out",
            )
        )
    if not 0 <= pre_stop < args.pod.grace_period_seconds:
        found.append(
            argument_violation(
                "pre-stop",
                "pre_stop_seconds",
                pre_stop,
                f"pre_stop_seconds={pre_stop} must be >= 0 and below "
                f"grace_period_seconds={args.pod.grace_period_seconds}",
                "shorten it: the preStop hook spends the grace period",
            )
        )
    return [*found, *container_violations(args.container)]


def _pre_stop_seconds(args: BatchInferenceArgs) -> int:
    """The preStop pause: by default only for workers a Service routes to, so endpoints drop them first."""
    if args.pre_stop_seconds is not None:
        return args.pre_stop_seconds
    return DEFAULT_PRE_STOP_SECONDS if args.service_port is not None else 0


def batch_inference(name: str, args: BatchInferenceArgs) -> list[Manifest]:
    """Request workers (Deployment) with a drain budget; a Service and preStop pause when they are routed
    to; a PodDisruptionBudget only on standard nodes (see :class:`BatchInferenceArgs`)."""
    refuse_invalid(f"BatchInference {name!r}", argument_violations(name, args))
    deployment_name = args.deployment_name or name
    labels = labels_for(deployment_name, "inference-worker", args.pod.labels)
    selector = selector_for(deployment_name, "inference-worker")
    objects: list[Manifest] = [_deployment(deployment_name, args, labels, selector)]
    if args.service_port is not None:
        objects.append(_service(deployment_name, args.service_port, args, labels, selector))
    if args.placement.compute_class is ComputeClass.STANDARD:
        objects.append(_disruption_budget(deployment_name, args, labels, selector))
    return objects


def _deployment(
    deployment_name: str, args: BatchInferenceArgs, labels: Mapping[str, str], selector: Mapping[str, str]
) -> Manifest:
    """The workers: SIGTERM starts a drain of the grace period less the preStop pause and a margin."""
    pre_stop = _pre_stop_seconds(args)
    budget = contract.drain_budget_seconds(args.pod.grace_period_seconds, pre_stop)
    extra: Manifest = {}
    if pre_stop:
        extra["lifecycle"] = {"preStop": {"sleep": {"seconds": pre_stop}}}
    spec = args.container
    if args.service_port is not None and args.service_port not in spec.ports.values():
        spec = dataclasses.replace(spec, ports={**spec.ports, "serving": args.service_port})
    main = container(spec, [env_entry(contract.ENV_DRAIN_BUDGET, str(budget))], extra=extra)
    placement = placement_for(args.placement.compute_class, selector, args.placement.preemptible_taint)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            **object_metadata(deployment_name, args.pod.namespace, labels),
            "annotations": dict(DEPLOYMENT_ACCEPTED_ANNOTATIONS),
        },
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": template_metadata_of(
                    pod_labels_of(labels, args.placement.critical, placement), pod_annotations(args.container)
                ),
                "spec": pod_spec(
                    [main],
                    placement,
                    args.pod.grace_period_seconds,
                    service_account_name=args.pod.service_account_name,
                    container_specs=[args.container],
                ),
            },
        },
    }


def _service(
    deployment_name: str,
    port: int,
    args: BatchInferenceArgs,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
) -> Manifest:
    """The Service that routes requests to the workers."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(deployment_name, args.pod.namespace, labels),
        "spec": {
            "selector": dict(selector),
            "ports": [{"name": "serving", "port": port, "targetPort": port}],
        },
    }


def _disruption_budget(
    deployment_name: str, args: BatchInferenceArgs, labels: Mapping[str, str], selector: Mapping[str, str]
) -> Manifest:
    """On standard nodes only: a budget against voluntary disruptions such as upgrades."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_metadata(deployment_name, args.pod.namespace, labels),
        "spec": {
            "maxUnavailable": args.max_unavailable,
            "selector": {"matchLabels": dict(selector)},
            # A drain must not be blocked by workers that are not serving anyway.
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
