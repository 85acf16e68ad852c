"""The twin's options and their command-line flags (no Kubernetes client imported here)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from together_clusters.platform import PREEMPTION_REASONS, LifecycleReason, TerminationMode

from . import binaries
from .nodes import NodeOptions


@dataclass(frozen=True)
class TwinOptions:
    """How the twin plays what the platform does not document."""

    termination: TerminationMode = TerminationMode.EVICTION
    """How a preempted node's pods are terminated unless a preemption names its own mode."""
    preemption_reason: LifecycleReason = LifecycleReason.PREEMPTION_NOTIFIED
    """The reason of the Kubernetes Event on a preempted Node: the documentation's name by default, the SDK's
    (and the announcement's) ``TogetherPreempted`` when asked; consumers must read either."""
    nodes: NodeOptions = field(default_factory=NodeOptions)
    job_pod_failure_backoff: str | None = None
    """Shorten the Job controller's delay before it replaces a failed pod (a Go duration; upstream 10s)."""
    jobset: bool = False
    """Pre-install JobSet (CRD, controller manager and its webhooks) in every cluster, as a cluster someone
    prepared has it. Off by default: a new Together cluster is bare Kubernetes, and what a user's stack
    installs (``ClusterControllers``) runs for real (:mod:`.controller_images`)."""
    audit_log: bool = False
    """Every API server writes an audit log (its control plane's ``audit_log`` in the twin's status, one JSON
    event per request at level Metadata: who, what, when), to count the requests a controller sends."""


def add_kubernetes_args(parser: argparse.ArgumentParser) -> None:
    """The twin's flags on the emulator's command line."""
    group = parser.add_argument_group("Kubernetes twin")
    group.add_argument(
        "--kubernetes",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="run a real Kubernetes control plane with kwok nodes behind every cluster (needs "
        "scripts/install-kubernetes); --no-kubernetes (the default) is the lightweight emulator",
    )
    group.add_argument(
        "--termination",
        choices=[m.value for m in TerminationMode],
        default=TerminationMode.EVICTION.value,
        help="how a preempted node's pods are terminated (default: eviction)",
    )
    group.add_argument(
        "--preemption-reason",
        choices=sorted(r.value for r in PREEMPTION_REASONS),
        default=LifecycleReason.PREEMPTION_NOTIFIED.value,
        help="the reason of the Kubernetes Event on a preempted Node (default: TogetherPreemptionNotified, "
        "the documentation's; TogetherPreempted is the SDK's)",
    )
    group.add_argument(
        "--preemptible-taint",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="taint preemptible nodes together.ai/compute-class=preemptible:NoSchedule (default: on)",
    )
    group.add_argument(
        "--job-pod-failure-backoff",
        default=None,
        metavar="DURATION",
        help="shorten the Job controller's delay before replacing a failed pod, e.g. 1s (upstream: 10s)",
    )
    group.add_argument(
        "--jobset",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pre-install JobSet (CRD, controller manager, webhooks) in every cluster, as a cluster someone "
        "prepared (default: off, a bare cluster as Together delivers it; a stack's ClusterControllers "
        "installs what it needs)",
    )
    group.add_argument(
        "--audit-log",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="every API server writes audit.log (JSON, level Metadata) in its data_dir, to count the requests "
        "each client sends (default: off)",
    )


def twin_options(args: argparse.Namespace) -> TwinOptions | None:
    """The options the flags ask for; ``None`` for the lightweight emulator. Exits with the fix when
    ``--kubernetes`` is asked for without the binaries."""
    if not args.kubernetes:
        return None
    try:
        binaries.require(jobset=args.jobset)
    except binaries.BinariesMissing as exc:
        raise SystemExit(f"emulator: {exc}") from None
    return TwinOptions(
        termination=TerminationMode(args.termination),
        preemption_reason=LifecycleReason(args.preemption_reason),
        nodes=NodeOptions(preemptible_taint=args.preemptible_taint),
        job_pod_failure_backoff=args.job_pod_failure_backoff,
        jobset=args.jobset,
        audit_log=args.audit_log,
    )
