"""The ``together-clusters drill`` subcommand: its arguments and exit codes (the drill itself, and the Kubernetes
client it needs, load only when it runs, so ``drift`` and ``status`` start as fast as before)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from together_clusters._extras import requires_extra
from together_clusters.errors import MissingExtraError
from together_clusters.platform import GRACE_PERIOD_LIMIT_SECONDS, TerminationMode

from .drill_report import drill_json, drill_text

EXIT_SURVIVED = 0
EXIT_NOT_SURVIVED = 3
"""A workload failed or got no replacement in time (1 stays "the drill itself failed")."""

DESCRIPTION = """Play the platform's preemption of one preemptible node, watch what it hits.

Two ways to preempt, one way to watch:

- **twin** (``--twin URL``, an emulator with ``--kubernetes``): the emulator's admin API preempts the node, so
  the sequence is the platform's own (cordon, ``TogetherPreemptionNotified`` Event, termination by the chosen
  mode, the Node deleted once its pods have exited, at the latest at T+grace, a refill later).
- **game day** (a real cluster, the default): cordon, a ``TogetherPreemptionNotified`` Event on the Node,
  eviction of its pods with their grace capped at 300 s (retried while a PodDisruptionBudget refuses), watch,
  then uncordon instead of deleting the node.

Every workload (Job, JobSet, Deployment, StatefulSet, ...) that had pods on the node is watched until each
lost pod has a Running replacement, the workload completes or fails, or the timeout. The step a replacement
resumed from is read from its log (the checkpoint runtime's ``resumed step=`` line); the twin's simulated
pods write no log, so there it stays unknown and the report says why.
"""


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
        default=TerminationMode.EVICTION.value,
        help="twin only: how the pods are terminated (default: eviction)",
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
    p.add_argument("--json", action="store_true", help="print JSON for machines instead of a table")


def run(ns: argparse.Namespace) -> int:
    """The ``drill`` subcommand: 0 every workload survived, 3 one did not, 1 the drill could not run."""
    try:
        with requires_extra("drill", "together-clusters drill"):
            from kubernetes import config
            from kubernetes.client.exceptions import ApiException

            from .drill import DrillArgs, DrillError, run_drill
    except MissingExtraError as error:
        print(f"together-clusters drill: error: {error}", file=sys.stderr)
        return 1

    if ns.twin is None and ns.termination != TerminationMode.EVICTION.value:
        print(
            "together-clusters drill: error: --termination needs --twin (a game day evicts)", file=sys.stderr
        )
        return 1
    args = DrillArgs(
        node=ns.node,
        twin_url=ns.twin,
        termination=TerminationMode(ns.termination),
        grace_seconds=ns.grace,
        timeout_seconds=ns.timeout,
        log_wait_seconds=ns.log_wait,
    )
    try:
        api = config.new_client_from_config(config_file=ns.kubeconfig, context=ns.context)
        with api:
            report = run_drill(api, args, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except (DrillError, ApiException, httpx.HTTPError, config.ConfigException, OSError) as exc:
        detail = f"HTTP {exc.status} {exc.reason}" if isinstance(exc, ApiException) else str(exc)
        print(f"together-clusters drill: error: {detail}", file=sys.stderr)
        return 1
    print(drill_json(report) if ns.json else drill_text(report), end="\n" if ns.json else "")
    return EXIT_SURVIVED if report.ok else EXIT_NOT_SURVIVED
