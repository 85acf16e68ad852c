"""The ``together-clusters remediations`` subcommand: list a cluster's node repairs and what they touch,
approve one once its node is drained (the gate), reject one, or run the gate unattended. What needs the
Kubernetes client (the ``remediations`` extra) loads only when a command runs."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from together_clusters._extras import requires_extra
from together_clusters.errors import GateError, MissingExtraError, TogetherError
from together_clusters.platform import REMEDIATION_MODES_BY_NAME

from ..arguments import print_error
from ..exit_codes import ExitCode

CLUSTER_ID_ENV = "TOGETHER_CLUSTER_ID"
MODES = tuple(REMEDIATION_MODES_BY_NAME)

DESCRIPTION = """List, approve and reject a cluster's node remediations (repairs), approving only once the
node's work has checkpointed and moved.

  list              the remediations not ended (awaiting approval, pending, quarantining, running), per node:
                    the workloads on it, their class, whether they checkpoint and the age of their last one
  approve ID        cordon the node, evict its pods through the Eviction API (PodDisruptionBudgets hold;
                    each pod gets SIGTERM and its grace period, in which the checkpoint runtime saves), wait
                    until no pod of the drain still runs there and each workload runs or is queued
                    elsewhere, then approve through the API. --dry-run shows what would be drained and
                    changes nothing; --force approves at once and names the workloads at risk. Interrupted
                    (or past --timeout), the node stays cordoned and the remediation pending: run it again.
  reject ID         reject it (it ends CANCELLED) with --comment; the gate's cordon, if any, is lifted
  gate              the same approval, unattended: approve automated remediations in --modes once drained,
                    one at a time, every --interval seconds (what the RemediationGate component runs)

The cluster: --cluster-id or $TOGETHER_CLUSTER_ID; the API: $TOGETHER_API_KEY and $TOGETHER_BASE_URL; its
Kubernetes API: --kubeconfig/--context, else $KUBECONFIG or ~/.kube/config, else the pod's service account
(in the cluster).

When a remediation that kept the node (a reboot or power cycle) ends, or one is rejected, cancelled or
fails, the next list, reject or gate pass uncordons the nodes the gate cordoned for it.
"""
DESCRIPTION += (
    f"\nExit {ExitCode.OK:d} done (a dry run: the plan shown), {ExitCode.NOT_DRAINED:d} the drain did not hold "
    f"within --timeout (not approved), {ExitCode.ERROR:d} refused or failed (every code: together-clusters "
    "--help).\n"
)


def _mode(text: str) -> frozenset[str]:
    modes = frozenset(m.strip() for m in text.split(",") if m.strip())
    unknown = sorted(modes - set(MODES))
    if unknown or not modes:
        raise argparse.ArgumentTypeError(
            f"unknown mode(s) {', '.join(unknown) or text!r}; choose from {', '.join(MODES)}"
        )
    return modes


def _seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0; got {text}")
    return value


def add_parser(sub: Any) -> None:
    """Register ``together-clusters remediations``."""
    p = sub.add_parser(
        "remediations",
        help="list node repairs, approve one once its node's work has checkpointed and moved, reject one",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--cluster-id", default=None, help=f"the cluster (default: ${CLUSTER_ID_ENV})")
        q.add_argument(
            "--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
        )
        q.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
        q.add_argument("--json", action="store_true", help="print JSON for machines")

    listing = actions.add_parser("list", help="the remediations not ended, per node, and what they touch")
    common(listing)
    approve = actions.add_parser(
        "approve", help="drain the node, wait for its work to checkpoint and move, approve"
    )
    approve.add_argument("id", help="the remediation's id")
    common(approve)
    approve.add_argument(
        "--timeout", type=_seconds, default=900.0, help="seconds to wait for the drain (default 900)"
    )
    approve.add_argument("--comment", default=None, help="the review comment sent with the approval")
    approve.add_argument("--dry-run", action="store_true", help="show what would be drained; change nothing")
    approve.add_argument(
        "--force", action="store_true", help="approve without waiting; warns naming the workloads at risk"
    )
    reject = actions.add_parser("reject", help="reject a remediation awaiting approval")
    reject.add_argument("id", help="the remediation's id")
    common(reject)
    reject.add_argument("--comment", required=True, help="why (the review comment)")
    gate = actions.add_parser("gate", help="approve automated remediations unattended, once drained")
    common(gate)
    gate.add_argument(
        "--modes",
        type=_mode,
        required=True,
        help=f"comma-separated modes it may approve ({', '.join(MODES)})",
    )
    gate.add_argument("--interval", type=_seconds, default=30.0, help="seconds between passes (default 30)")
    gate.add_argument(
        "--timeout", type=_seconds, default=900.0, help="seconds to wait for each drain (default 900)"
    )
    gate.add_argument("--once", action="store_true", help="one pass, then exit")


def run(ns: argparse.Namespace) -> ExitCode:
    """The ``remediations`` subcommand."""
    try:
        with requires_extra("remediations", "together-clusters remediations"):
            from kubernetes.client.exceptions import ApiException
            from kubernetes.config import ConfigException

            from . import gate, render
    except MissingExtraError as error:
        print_error("remediations", str(error))
        return ExitCode.ERROR
    from together_clusters.provider.client import TogetherClient

    cluster_id = ns.cluster_id or os.environ.get(CLUSTER_ID_ENV)
    if not cluster_id:
        print_error("remediations", f"no cluster: give --cluster-id ID or set {CLUSTER_ID_ENV}")
        return ExitCode.ERROR
    progress: Callable[[str], None] = lambda line: print(  # noqa: E731
        f"{_stamp()} {line}", file=sys.stderr, flush=True
    )
    try:
        with TogetherClient() as api:
            kube_api = _kubernetes(ns)
            if ns.action == "list":
                return _list(api, kube_api, cluster_id, ns.json)
            if ns.action == "reject":
                target = gate.find(api, cluster_id, ns.id)
                rejected = gate.reject(api, kube_api, target, ns.comment)
                print(
                    render.remediation_json(rejected) if ns.json else f"remediation {ns.id}: {rejected.state}"
                )
                return ExitCode.OK
            if ns.action == "approve":
                return _approve(api, kube_api, cluster_id, ns, progress)
            return _gate_loop(api, kube_api, cluster_id, ns, progress)
    except GateError as exc:
        print_error("remediations", str(exc))
        if ns.json:
            print(json.dumps({"exit_code": int(_code_of(exc)), "error": str(exc)}, indent=2))
        return _code_of(exc)
    except (TogetherError, ApiException, ConfigException, OSError) as exc:
        detail = (
            f"HTTP {exc.status} {exc.reason}" if isinstance(exc, ApiException) else " ".join(str(exc).split())
        )
        print_error("remediations", detail)
        return ExitCode.ERROR


def _code_of(exc: GateError) -> ExitCode:
    return ExitCode.NOT_DRAINED if str(exc).startswith("not approved:") else ExitCode.ERROR


def _stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")


def _kubernetes(ns: argparse.Namespace) -> Any:
    """The cluster's Kubernetes client: the kubeconfig (given, $KUBECONFIG, ~/.kube/config), else in-cluster."""
    from kubernetes import client, config

    default = os.path.expanduser("~/.kube/config")
    if ns.kubeconfig or os.environ.get("KUBECONFIG") or os.path.exists(default) or ns.context:
        return config.new_client_from_config(config_file=ns.kubeconfig, context=ns.context)
    config.load_incluster_config()
    return client.ApiClient()


def _list(api: Any, kube_api: Any, cluster_id: str, as_json: bool) -> ExitCode:
    from . import gate, render

    gate.release_ended(api, kube_api, cluster_id)
    targets = gate.active(api, cluster_id)
    rows = [render.row(t, render.touched(kube_api, t)) for t in targets]
    print(
        json.dumps({"cluster_id": cluster_id, "remediations": rows}, indent=2)
        if as_json
        else render.table(rows)
    )
    return ExitCode.OK


def _approve(
    api: Any, kube_api: Any, cluster_id: str, ns: argparse.Namespace, progress: Callable[[str], None]
) -> ExitCode:
    from . import gate, render

    target = gate.find(api, cluster_id, ns.id)
    if ns.dry_run:
        plan = gate.plan_for(kube_api, target)
        print(render.dry_run_json(target, plan) if ns.json else render.dry_run_text(target, plan), end="")
        return ExitCode.OK
    options = gate.GateOptions(timeout_seconds=ns.timeout, comment=ns.comment, force=ns.force)
    outcome = gate.approve(api, kube_api, target, options, progress)
    print(render.outcome_json(outcome) if ns.json else render.outcome_text(outcome), end="")
    return ExitCode.OK


def _gate_loop(
    api: Any, kube_api: Any, cluster_id: str, ns: argparse.Namespace, progress: Callable[[str], None]
) -> ExitCode:
    """Approve automated remediations in the allowed modes once drained, one at a time, pass after pass.
    A drain that times out is reported and tried again on the next pass (its plan is on the Node)."""
    from kubernetes.client.exceptions import ApiException

    from . import gate

    modes = frozenset(REMEDIATION_MODES_BY_NAME[m] for m in ns.modes)
    options = gate.GateOptions(
        timeout_seconds=ns.timeout, comment="approved by the remediation gate once drained"
    )
    progress(
        f"remediation gate for cluster {cluster_id}: approving {', '.join(sorted(ns.modes))} once drained"
    )
    while True:
        for node in gate.release_ended(api, kube_api, cluster_id):
            progress(f"node {node} uncordoned: its remediation ended leaving it in place")
        for target in gate.approvable(gate.active(api, cluster_id), modes):
            try:
                gate.approve(api, kube_api, target, options, progress)
            except (GateError, TogetherError, ApiException) as exc:
                # One remediation's trouble (a drain past its timeout, an API error) never stops the gate:
                # the node keeps its plan and the next pass goes on with it.
                detail = f"HTTP {exc.status} {exc.reason}" if isinstance(exc, ApiException) else str(exc)
                progress(f"remediation {target.remediation.id}: {' '.join(detail.split())}")
        if ns.once:
            return ExitCode.OK
        time.sleep(ns.interval)
