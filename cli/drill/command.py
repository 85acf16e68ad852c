"""The ``together-clusters drill`` subcommand: its arguments, and the drill it runs (the drill itself,
``runner``, and the Kubernetes client it needs, load only when it runs, so ``drift`` and ``status`` start as
fast as before). Without ``--remediation`` a preemption; with it, a node remediation through the compute
API."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from together_clusters._extras import requires_extra
from together_clusters.errors import DrillError, MissingExtraError, TogetherError
from together_clusters.platform import GRACE_PERIOD_LIMIT_SECONDS, TerminationMode

from ..arguments import print_error
from ..exit_codes import ExitCode
from .modes import REMEDIATION_MODES
from .report import DrillReport, drill_json, drill_text

DESCRIPTION = """Play the platform's preemption of one preemptible node (the default), or have the platform
remediate one node of either class (--remediation MODE), and watch what it hits.

Two ways to preempt, one way to watch:

  twin (--twin URL, an emulator started with --kubernetes): the emulator's admin API preempts the node,
    so the sequence is the platform's own (cordon, a TogetherPreemptionNotified Event, termination by
    the emulator's own --termination mode unless this --termination names another, the Node deleted
    once its pods have exited, at the latest at T+grace, a refill later).
  game day (a real cluster, the default): cordon, a TogetherPreemptionNotified Event on the Node,
    eviction of its pods with their grace capped at 300 s (retried while a PodDisruptionBudget
    refuses), watch, then uncordon instead of deleting the node.

Before a game day touches the cluster it checks that every pod it would take has another schedulable
node with room (labels, taints, requests), and refuses naming the pod and why when one has none; it shows
the plan and the kubeconfig context and asks before going on (--yes: do not ask; needed when stdin is not
a terminal). --dry-run prints the plan and changes nothing.

A remediation (--remediation vm-only|host-aware|evict-without-replacement|reboot-vm|host-power-cycle)
is asked of the compute API (TOGETHER_API_KEY; TOGETHER_BASE_URL, or the emulator's --twin URL) for the
node's instance (--node: a schedulable node of either class, standard included; default the oldest
preemptible node, else the oldest standard one), in the cluster --cluster-id (on the twin: the node's own).
The platform runs it (PENDING, QUARANTINING and QUARANTINED for host-aware and host-power-cycle, RUNNING,
SUCCEEDED): vm-only and host-aware drain the node and replace its VM (a new node), evict-without-replacement
drains it and the cluster stays one node short, reboot-vm and host-power-cycle kill its pods and the same
node comes back. The drill shows each state, waits for the end (--remediation-timeout) and watches the
workloads as below. Its pre-check is the game day's, on the twin too, and it refuses a node whose instance
already has an active remediation (the API allows one at a time); the plan says what capacity the mode
costs (evict-without-replacement and host-aware lose it). On a real cluster it asks before going on
(--yes). Exit 1 when the remediation ends other than SUCCEEDED (the report is printed all the same).

Every workload (Job, JobSet, Deployment, StatefulSet, ...) that had pods on the node (in -n NAMESPACE
only, when given; the preemption takes every pod of the node all the same) is watched until each lost
pod has a Running replacement, the workload completes or fails, or the timeout. The step a replacement
resumed from is read from its log (the checkpoint runtime's "resumed step=" line); the twin's simulated
pods write no log, so there it stays unknown and the report says why.
"""
DESCRIPTION += (
    f"\nExit {ExitCode.OK:d} every workload survived (a dry run: the plan holds), {ExitCode.NOT_SURVIVED:d} one "
    f"did not, {ExitCode.ERROR:d} the drill could not run or was refused, or its remediation did not succeed "
    "(every code: together-clusters --help).\n"
)


def _grace(text: str) -> int:
    seconds = int(text)
    if not 1 <= seconds <= GRACE_PERIOD_LIMIT_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be 1-{GRACE_PERIOD_LIMIT_SECONDS} (the platform deletes the node after "
            f"{GRACE_PERIOD_LIMIT_SECONDS} s); got {text}"
        )
    return seconds


def add_parser(sub: Any) -> None:
    """Register ``together-clusters drill``."""
    p = sub.add_parser(
        "drill",
        help="preempt one preemptible node (twin: through the emulator; real cluster: a game day), or "
        "remediate one node through the compute API, and report whether each workload on it survived",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    p.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
    p.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="watch and report only the workloads of this namespace (default: all of the node's)",
    )
    p.add_argument(
        "--node",
        default=None,
        help="the preemptible node to reclaim (default: the oldest); with --remediation, a node of either "
        "class (default: the oldest preemptible one, else the oldest standard one)",
    )
    p.add_argument(
        "--remediation",
        metavar="MODE",
        choices=list(REMEDIATION_MODES),
        default=None,
        help="remediate the node instead of preempting it: ask the compute API for a manual remediation in "
        f"MODE ({', '.join(REMEDIATION_MODES)}), on the twin too",
    )
    p.add_argument(
        "--cluster-id",
        metavar="ID",
        default=None,
        help="--remediation: the compute API's id of the cluster the kubeconfig reaches (needed on a real "
        "cluster; on the twin, default: the cluster the emulator says the node belongs to)",
    )
    p.add_argument(
        "--remediation-timeout",
        metavar="SECONDS",
        type=float,
        default=3600.0,
        help="--remediation: seconds to wait for the remediation to end (default 3600; a real "
        "host-power-cycle takes about 20 minutes)",
    )
    p.add_argument(
        "--twin",
        metavar="URL",
        default=None,
        help="the cluster is the emulator's twin at URL: preempt through its admin API (the node is deleted "
        "at T+grace); without it, a game day (evict, then uncordon). With --remediation: the compute API "
        "is the emulator's at URL",
    )
    p.add_argument(
        "--termination",
        choices=[m.value for m in TerminationMode],
        default=None,
        help="twin only: how the pods are terminated (default: the emulator's own --termination; not with "
        "--remediation, whose mode decides)",
    )
    p.add_argument(
        "--grace",
        type=_grace,
        default=None,
        help=f"game day: the most a pod gets after SIGTERM (1-{GRACE_PERIOD_LIMIT_SECONDS} s, the default)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds to wait for replacements (default 900; with --remediation, from when it takes the "
        "node's pods)",
    )
    p.add_argument("--log-wait", type=float, default=60.0, help="seconds to wait for a 'resumed step=' line")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (context, node, its instance and the remediation's mode, pods and workloads hit, "
        "where each could go, capacity lost, the pre-check) and change nothing",
    )
    p.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="game day or remediation of a real cluster: do not ask before acting on the kubeconfig context",
    )
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")


def connect(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
    """The Kubernetes client of the kubeconfig context, and that context's name."""
    from kubernetes import config

    contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
    name = context or (current or {}).get("name", "")
    if context is not None and context not in {c.get("name") for c in contexts or []}:
        known = ", ".join(sorted(c.get("name", "") for c in contexts or []))
        raise config.ConfigException(f"--context {context} is not in the kubeconfig; its contexts: {known}")
    return config.new_client_from_config(config_file=kubeconfig, context=context), name


def emulator_termination(twin_url: str) -> TerminationMode:
    """The termination mode the emulator was started with (``GET /_emulator/kubernetes``)."""
    try:
        reply = httpx.get(f"{twin_url.rstrip('/')}/_emulator/kubernetes", timeout=30)
        reply.raise_for_status()
        return TerminationMode(reply.json()["termination"])
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise DrillError(
            f"cannot read the termination mode of the emulator at {twin_url} ({exc}); is it running with "
            "--kubernetes? Or give --termination"
        ) from None


def twin_cluster_of(twin_url: str, node: str) -> str:
    """The emulator's cluster the Node ``node`` belongs to (``GET /_emulator/kubernetes/nodes/{node}``)."""
    try:
        reply = httpx.get(f"{twin_url.rstrip('/')}/_emulator/kubernetes/nodes/{node}", timeout=30)
        if reply.status_code == 404:
            raise DrillError(f"node {node} belongs to no cluster of the emulator at {twin_url}")
        reply.raise_for_status()
        return str(reply.json()["cluster_id"])
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        raise DrillError(
            f"cannot ask the emulator at {twin_url} which cluster node {node} is in ({exc})"
        ) from None


def _finish(ns: argparse.Namespace, report: DrillReport) -> ExitCode:
    print(drill_json(report) if ns.json else drill_text(report), end="\n" if ns.json else "")
    rem = report.remediation
    if rem is not None and not rem.succeeded:
        error = f": {rem.error_message}" if rem.error_message else ""
        print_error("drill", f"remediation {rem.id} of {report.node} ended {rem.state}{error}")
        return ExitCode.ERROR
    return ExitCode.OK if report.ok else ExitCode.NOT_SURVIVED


def run(ns: argparse.Namespace) -> ExitCode:
    """The ``drill`` subcommand: ``OK`` every workload survived (or the dry run's plan holds),
    ``NOT_SURVIVED`` one did not, ``ERROR`` the drill could not run or was refused."""
    try:
        with requires_extra("drill", "together-clusters drill"):
            from kubernetes import client, config
            from kubernetes.client.exceptions import ApiException

            from . import runner
            from .safety import confirm, plan_text, read_plan
    except MissingExtraError as error:
        print_error("drill", str(error))
        return ExitCode.ERROR

    if ns.remediation is not None:
        return run_remediation(ns)
    if ns.cluster_id is not None:
        print_error("drill", "--cluster-id needs --remediation (a preemption needs no compute API)")
        return ExitCode.ERROR
    if ns.twin is None and ns.termination not in (None, TerminationMode.EVICTION.value):
        print_error("drill", "--termination needs --twin (a game day evicts)")
        return ExitCode.ERROR
    grace = GRACE_PERIOD_LIMIT_SECONDS if ns.grace is None else ns.grace
    try:
        if ns.twin is None:
            termination = TerminationMode.EVICTION
        elif ns.termination is not None:
            termination = TerminationMode(ns.termination)
        else:
            termination = emulator_termination(ns.twin)
        api, context = connect(ns.kubeconfig, ns.context)
        with api:
            core = client.CoreV1Api(api)
            plan = read_plan(
                core,
                context=context,
                server=api.configuration.host,
                mode="game-day" if ns.twin is None else "twin",
                node=runner.choose_node(core, ns.node),
                termination=termination.value,
                watched_namespace=ns.namespace,
                grace_seconds=grace,
                timeout_seconds=ns.timeout,
            )
            if ns.dry_run:
                print(plan_text(plan), end="")
                if plan.refusal and ns.twin is None:
                    raise DrillError(plan.refusal)
                return ExitCode.OK
            if ns.twin is None:
                # A game day cordons a real node: it waits out its timeout when nothing can take the pods,
                # and acts on whatever context the kubeconfig has current.
                if plan.refusal:
                    raise DrillError(plan.refusal)
                if not ns.yes:
                    confirm(plan, sys.stdin, sys.stderr)
            args = runner.DrillArgs(
                node=plan.node,
                twin_url=ns.twin,
                termination=termination,
                grace_seconds=grace,
                timeout_seconds=ns.timeout,
                log_wait_seconds=ns.log_wait,
                namespace=ns.namespace,
            )
            report = runner.run_drill(
                api, args, progress=lambda line: print(line, file=sys.stderr, flush=True)
            )
    except (DrillError, ApiException, httpx.HTTPError, config.ConfigException, OSError) as exc:
        detail = f"HTTP {exc.status} {exc.reason}" if isinstance(exc, ApiException) else str(exc)
        print_error("drill", detail)
        return ExitCode.ERROR
    return _finish(ns, report)


def run_remediation(ns: argparse.Namespace) -> ExitCode:
    """``drill --remediation MODE``: the plan from the cluster and the compute API, the pre-check, then the
    remediation and the watch (:func:`~together_clusters.cli.drill.runner.run_remediation_drill`)."""
    if ns.termination is not None or ns.grace is not None:
        print_error("drill", "--termination and --grace are a preemption's: a remediation's mode decides")
        return ExitCode.ERROR
    try:
        with requires_extra("drill", "together-clusters drill"):
            from kubernetes import client, config
            from kubernetes.client.exceptions import ApiException

            from together_clusters.provider.client import TogetherClient
            from together_clusters.provider.vocabulary import ACTIVE_REMEDIATION_STATES

            from . import runner
            from .safety import RemediationPlan, active_text, confirm, instance_of, plan_text, read_plan
    except MissingExtraError as error:
        print_error("drill", str(error))
        return ExitCode.ERROR

    mode = REMEDIATION_MODES[ns.remediation]
    try:
        if ns.cluster_id is None and ns.twin is None:
            raise DrillError(
                "--remediation on a real cluster needs --cluster-id (the compute API's id of the cluster the "
                "kubeconfig reaches)"
            )
        api, context = connect(ns.kubeconfig, ns.context)
        with api, TogetherClient(base_url=ns.twin) as compute:
            core = client.CoreV1Api(api)
            node = runner.choose_remediation_node(core, ns.node)
            cluster_id = ns.cluster_id or twin_cluster_of(ns.twin, node)
            instance = instance_of(node, cluster_id, compute.get_cluster(cluster_id).gpu_worker_nodes)
            active = compute.list_remediations(cluster_id, instance, states=list(ACTIVE_REMEDIATION_STATES))
            plan = read_plan(
                core,
                context=context,
                server=api.configuration.host,
                mode="remediation",
                node=node,
                termination=ns.remediation,
                watched_namespace=ns.namespace,
                grace_seconds=GRACE_PERIOD_LIMIT_SECONDS,
                timeout_seconds=ns.timeout,
                remediation=RemediationPlan(
                    mode, cluster_id, instance, compute.base_url, active_text(active)
                ),
            )
            if ns.dry_run:
                print(plan_text(plan), end="")
                if plan.refusal:
                    raise DrillError(plan.refusal)
                return ExitCode.OK
            if plan.refusal:
                raise DrillError(plan.refusal)
            if ns.twin is None and not ns.yes:
                confirm(plan, sys.stdin, sys.stderr)
            target = runner.RemediationTarget(
                mode=mode,
                cluster_id=cluster_id,
                instance_id=instance,
                # The twin's clock runs fast; a real API is asked every few seconds.
                poll_seconds=5.0 if ns.twin is None else 0.25,
                timeout_seconds=ns.remediation_timeout,
            )
            args = runner.DrillArgs(
                node=node,
                twin_url=ns.twin,
                timeout_seconds=ns.timeout,
                log_wait_seconds=ns.log_wait,
                namespace=ns.namespace,
                remediation=target,
            )
            report = runner.run_remediation_drill(
                api, compute, args, progress=lambda line: print(line, file=sys.stderr, flush=True)
            )
    except (TogetherError, ApiException, httpx.HTTPError, config.ConfigException, OSError) as exc:
        detail = f"HTTP {exc.status} {exc.reason}" if isinstance(exc, ApiException) else str(exc)
        print_error("drill", " ".join(detail.split()))
        return ExitCode.ERROR
    return _finish(ns, report)
