"""The ``together-clusters drill`` subcommand: its arguments, and the drill it runs (the drill itself,
``runner``, and the Kubernetes client it needs, load only when it runs, so ``drift`` and ``status`` start as
fast as before)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from together_clusters._extras import requires_extra
from together_clusters.errors import DrillError, MissingExtraError
from together_clusters.platform import GRACE_PERIOD_LIMIT_SECONDS, TerminationMode

from ..arguments import print_error
from ..exit_codes import ExitCode
from .report import drill_json, drill_text

DESCRIPTION = """Play the platform's preemption of one preemptible node, watch what it hits.

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

Every workload (Job, JobSet, Deployment, StatefulSet, ...) that had pods on the node (in -n NAMESPACE
only, when given; the preemption takes every pod of the node all the same) is watched until each lost
pod has a Running replacement, the workload completes or fails, or the timeout. The step a replacement
resumed from is read from its log (the checkpoint runtime's "resumed step=" line); the twin's simulated
pods write no log, so there it stays unknown and the report says why.
"""
DESCRIPTION += (
    f"\nExit {ExitCode.OK:d} every workload survived (a dry run: the plan holds), {ExitCode.NOT_SURVIVED:d} one "
    f"did not, {ExitCode.ERROR:d} the drill could not run or was refused (every code: together-clusters --help).\n"
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
        help="preempt one preemptible node (twin: through the emulator; real cluster: a game day) and report "
        "whether each workload on it survived",
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
    p.add_argument("--node", default=None, help="the preemptible node to reclaim (default: the oldest)")
    p.add_argument(
        "--twin",
        metavar="URL",
        default=None,
        help="the cluster is the emulator's twin at URL: preempt through its admin API (the node is deleted "
        "at T+grace); without it, a game day (evict, then uncordon)",
    )
    p.add_argument(
        "--termination",
        choices=[m.value for m in TerminationMode],
        default=None,
        help="twin only: how the pods are terminated (default: the emulator's own --termination)",
    )
    p.add_argument(
        "--grace",
        type=_grace,
        default=GRACE_PERIOD_LIMIT_SECONDS,
        help=f"game day: the most a pod gets after SIGTERM (1-{GRACE_PERIOD_LIMIT_SECONDS} s, the default)",
    )
    p.add_argument(
        "--timeout", type=float, default=900.0, help="seconds to wait for replacements (default 900)"
    )
    p.add_argument("--log-wait", type=float, default=60.0, help="seconds to wait for a 'resumed step=' line")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (context, node, pods, where each could go, the pre-check) and change nothing",
    )
    p.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="game day: do not ask before acting on the kubeconfig context",
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

    if ns.twin is None and ns.termination not in (None, TerminationMode.EVICTION.value):
        print_error("drill", "--termination needs --twin (a game day evicts)")
        return ExitCode.ERROR
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
                grace_seconds=ns.grace,
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
                grace_seconds=ns.grace,
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
    print(drill_json(report) if ns.json else drill_text(report), end="\n" if ns.json else "")
    return ExitCode.OK if report.ok else ExitCode.NOT_SURVIVED
