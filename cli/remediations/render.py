"""What ``together-clusters remediations`` prints, for people and machines (and what ``list`` reads of each
node's workloads: their class, whether they checkpoint, the age of their last checkpoint)."""

from __future__ import annotations

import datetime
import json
from typing import Any

from kubernetes import client as k8s

from together_clusters.platform import PLACEMENT_LABEL
from together_clusters.platform import remediation_mode_name as short_mode
from together_clusters.provider.models import Remediation

from . import cluster as kube
from .gate import Outcome, Target, plan_for
from .plan import DrainPlan


def remediation_json(remediation: Remediation) -> str:
    return json.dumps(remediation.model_dump(mode="json", exclude_none=True), indent=2)


def touched(kube_api: Any, target: Target) -> list[dict[str, Any]]:
    """The workloads with pods on the target's node now: per workload its pods, its class (the pods'
    placement label), whether they checkpoint, and the newest checkpoint their logs report (step, age)."""
    if kube_api is None or target.node is None:
        return []
    plan = plan_for(kube_api, target)
    if plan is None:
        return []
    core = k8s.CoreV1Api(kube_api)
    pods = {str((p.get("metadata") or {}).get("uid")): p for p in kube.pods_on(core, plan.node)}
    now = datetime.datetime.now(datetime.UTC)
    rows: dict[str, dict[str, Any]] = {}
    for drained in plan.pods:
        key = str(drained.workload) if drained.workload is not None else f"Pod/{drained.ref}"
        row = rows.setdefault(
            key, {"workload": key, "class": None, "pods": [], "checkpointing": False, "last_checkpoint": None}
        )
        row["pods"].append(drained.ref)
        labels = ((pods.get(drained.uid) or {}).get("metadata") or {}).get("labels") or {}
        row["class"] = row["class"] or labels.get(PLACEMENT_LABEL)
        row["checkpointing"] = row["checkpointing"] or drained.checkpointing
        if drained.checkpointing:
            last = kube.read_last_checkpoint(core, drained.namespace, drained.name)
            if last is not None and (
                row["last_checkpoint"] is None or last[0] > row["last_checkpoint"]["step"]
            ):
                row["last_checkpoint"] = {
                    "step": last[0],
                    "at": last[1].isoformat(),
                    "age_seconds": round((now - last[1]).total_seconds()),
                }
    return sorted(rows.values(), key=lambda r: str(r["workload"]))


def row(target: Target, workloads: list[dict[str, Any]]) -> dict[str, Any]:
    rem = target.remediation
    return {
        "id": rem.id,
        "instance_id": rem.instance_id,
        "node": target.node,
        "mode": short_mode(rem.mode),
        "state": rem.state,
        "trigger": (rem.trigger or "").removeprefix("REMEDIATION_TRIGGER_") or None,
        "created": rem.create_time.isoformat() if rem.create_time else None,
        "reason": rem.reason,
        "workloads": workloads,
    }


def _age(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no remediation pending or running\n"
    lines = []
    for r in rows:
        lines.append(
            f"{r['id']}  {r['state']}  {r['mode']}  {r['trigger'] or ''}  node {r['node'] or '(none)'}"
        )
        if not r["workloads"]:
            lines.append("    no workload on the node")
        for w in r["workloads"]:
            last = w["last_checkpoint"]
            if last is not None:
                saved = f"last checkpoint step {last['step']}, {_age(last['age_seconds'])} ago"
            elif w["checkpointing"]:
                saved = "checkpointing, no checkpoint in its log"
            else:
                saved = "no checkpoint runtime"
            lines.append(f"    {w['workload']}  class {w['class'] or '-'}  {len(w['pods'])} pod(s)  {saved}")
    return "\n".join(lines) + "\n"


def _plan_dict(plan: DrainPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "node": plan.node,
        "evict": [
            {
                "pod": p.ref,
                "workload": None if p.workload is None else str(p.workload),
                "checkpointing": p.checkpointing,
            }
            for p in plan.pods
        ],
        "left_on_node": list(plan.left),
        "bare_pods": list(plan.bare_pods),
    }


def dry_run_json(target: Target, plan: DrainPlan | None) -> str:
    return (
        json.dumps({"dry_run": True, "remediation": row(target, []), "drain": _plan_dict(plan)}, indent=2)
        + "\n"
    )


def dry_run_text(target: Target, plan: DrainPlan | None) -> str:
    rem = target.remediation
    lines = [f"dry run: remediation {rem.id} ({short_mode(rem.mode)}, {rem.state}); nothing is changed"]
    if plan is None:
        lines.append(
            "  its instance has no Kubernetes Node now: nothing to drain; approve would approve at once"
        )
        return "\n".join(lines) + "\n"
    lines.append(
        f"  would cordon node {plan.node} and evict {len(plan.pods)} pod(s) through the Eviction API:"
    )
    for pod in plan.pods:
        owner = str(pod.workload) if pod.workload is not None else "bare pod: nothing replaces it"
        lines.append(f"    {pod.ref}  ({owner}{', checkpointing' if pod.checkpointing else ''})")
    if plan.left:
        lines.append(f"  would leave on the node (a drain leaves them): {', '.join(plan.left)}")
    lines.append(
        "  then wait until none of them runs on the node and each workload runs or is queued elsewhere, "
        "then approve"
    )
    return "\n".join(lines) + "\n"


def outcome_json(outcome: Outcome) -> str:
    return (
        json.dumps(
            {
                "remediation": row(outcome.target, []),
                "drain": _plan_dict(outcome.plan),
                "moved": dict(outcome.progress.moved) if outcome.progress is not None else {},
                "at_risk": list(outcome.at_risk),
                "approved": outcome.approved is not None,
                "state": outcome.approved.state if outcome.approved is not None else None,
                "notes": outcome.notes,
            },
            indent=2,
        )
        + "\n"
    )


def outcome_text(outcome: Outcome) -> str:
    rem = outcome.target.remediation
    state = outcome.approved.state if outcome.approved is not None else "not approved"
    lines = [f"remediation {rem.id} ({short_mode(rem.mode)}) approved: {state}"]
    if outcome.progress is not None:
        for workload, where in sorted(outcome.progress.moved.items()):
            lines.append(f"  {workload}: {where}")
    if outcome.at_risk:
        lines.append(f"  approved with --force while at risk: {', '.join(outcome.at_risk)}")
    lines += [f"  {note}" for note in outcome.notes]
    return "\n".join(lines) + "\n"
