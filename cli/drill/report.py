"""What a drill found, per workload (and, for a remediation drill, how the remediation ended), for people (a
table) and machines (JSON). Pure."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from enum import StrEnum

from together_clusters.components.checkpoint.contract import REPORT_PREFIX

from ..table import table

RESUMED_LINE = re.compile(re.escape(REPORT_PREFIX) + r" resumed step=(\d+) checkpoint=(\S+)")
"""The line the checkpoint runtime writes to stderr when a restarted pod restores a checkpoint."""


class Outcome(StrEnum):
    SURVIVED = "survived"
    """A replacement for every lost pod ran (or the workload completed)."""
    FAILED = "failed"
    """The workload's controller gave up on it (a Job or JobSet condition ``Failed``)."""
    NOT_REPLACED = "not-replaced"
    """No replacement ran before the drill's timeout: as good as failed for a paid GPU hour."""


@dataclass(frozen=True)
class Resumed:
    """Where a replacement picked up, as the checkpoint runtime reported it in the pod's log."""

    step: int
    checkpoint: str


@dataclass(frozen=True)
class WorkloadReport:
    kind: str
    namespace: str
    name: str
    pods_lost: int
    outcome: Outcome
    seconds_to_replacement: float | None
    """From T+0 (the preemption, or the request of the remediation) to the last lost pod having a Running
    replacement."""
    resumed: Resumed | None
    detail: str
    """Why it failed, or why the resumed step is unknown (simulated pods have no logs)."""


@dataclass(frozen=True)
class RemediationReport:
    """The remediation a drill asked for, as it ended."""

    id: str
    mode: str
    """As ``--remediation`` spells it: ``vm-only``..."""
    cluster_id: str
    instance_id: str
    state: str
    """The state it ended in: ``SUCCEEDED``, or ``FAILED``, ``CANCELLED``, ``AUTO_RESOLVED``."""
    states: tuple[str, ...]
    """Each state the drill saw it in, in order (a state shorter than the drill's poll may be missed)."""
    error_message: str = ""

    @property
    def succeeded(self) -> bool:
        return self.state == "SUCCEEDED"


@dataclass(frozen=True)
class DrillReport:
    mode: str
    """``twin`` or ``game-day`` (a preemption), or ``remediation``."""
    node: str
    termination: str
    """The preemption's termination mode, or the remediation's mode (``vm-only``...)."""
    workloads: tuple[WorkloadReport, ...]
    remediation: RemediationReport | None = None

    @property
    def ok(self) -> bool:
        """Every workload survived (the remediation's own end is :attr:`RemediationReport.succeeded`)."""
        return all(w.outcome is Outcome.SURVIVED for w in self.workloads)


def parse_resumed(log: str) -> Resumed | None:
    """The last ``resumed step=`` line of a pod's log (a pod restarted in place reports again)."""
    found = RESUMED_LINE.findall(log)
    if not found:
        return None
    step, checkpoint = found[-1]
    return Resumed(int(step), checkpoint)


def drill_json(report: DrillReport) -> str:
    body = asdict(report)
    body["ok"] = report.ok
    return json.dumps(body, indent=2, sort_keys=True)


def drill_text(report: DrillReport) -> str:
    head = f"Preemption drill ({report.mode}, {report.termination}) of node {report.node}\n"
    rem = report.remediation
    if rem is not None:
        seen = " -> ".join(rem.states)
        error = f" ({rem.error_message})" if rem.error_message else ""
        head = (
            f"Remediation drill ({rem.mode}) of node {report.node}, instance {rem.instance_id}: remediation "
            f"{rem.id} {rem.state}{error} [{seen}]\n"
        )
    if not report.workloads:
        return head + "  no workload had pods on the node\n"
    rows = [
        [
            f"{w.kind}/{w.name}",
            w.namespace,
            str(w.pods_lost),
            w.outcome.value,
            "-" if w.seconds_to_replacement is None else f"{w.seconds_to_replacement:.1f}s",
            "-" if w.resumed is None else f"{w.resumed.step} ({w.resumed.checkpoint})",
            w.detail,
        ]
        for w in report.workloads
    ]
    headers = ["WORKLOAD", "NAMESPACE", "PODS LOST", "OUTCOME", "REPLACED AFTER", "RESUMED STEP", "DETAIL"]
    verdict = "every workload survived" if report.ok else "a workload did not survive"
    return head + table(headers, rows) + f"\n{verdict}\n"
