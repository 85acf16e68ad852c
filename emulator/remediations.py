"""Node remediations: the platform's state machine over plain records (no HTTP, no lock, no clock of its own).

What the official SDK (``together`` 3.1.1, ``resources/clusters/remediations.py`` and
``types/clusters/remediation.py``) documents, and what this emulator chose where it is silent:

- A remediation a user creates (trigger ``REMEDIATION_TRIGGER_MANUAL``) starts ``PENDING``. One the
  platform's health checks raise (``REMEDIATION_TRIGGER_AUTOMATED``, with ``linked_alerts``) starts
  ``PENDING_APPROVAL`` and waits, without a deadline, for ``approve`` (then ``PENDING``; an optional ``mode``
  replaces the proposed one, never with ``HOST_POWER_CYCLE``: 400) or ``reject`` (then ``CANCELLED``). On an
  instance whose ``auto_remediation_enabled`` is true (the emulator's reading of that flag: the platform
  repairs it without asking) an automated remediation starts ``PENDING`` instead.
- From ``PENDING`` the platform picks it up after ``pending_s``. The modes that cordon the host first
  (``HOST_AWARE``, ``HOST_POWER_CYCLE``: "Cordons the host ...") pass through ``QUARANTINING`` and
  ``QUARANTINED``; the others go straight to ``RUNNING``. ``RUNNING`` lasts the mode's ``running_s``, then
  the remediation ``SUCCEEDED`` (or ``FAILED``, when the admin API said it would).
- Cancellable: ``PENDING_APPROVAL`` and ``PENDING`` only (the SDK: "Only remediations in PENDING_APPROVAL or
  PENDING state can be cancelled"). Cancelling one in any other state is a 409, as is approving or
  rejecting one that is not ``PENDING_APPROVAL`` (the SDK: "Only remediations with state PENDING_APPROVAL
  can be approved/rejected"): the request clashes with the remediation's state, and retrying will not help.
- One active remediation per instance (``PENDING_APPROVAL`` through ``RUNNING``): a second is a 409.
- ``AUTO_RESOLVED`` ("resolved before processing") only from ``PENDING_APPROVAL`` or ``PENDING``, through the
  admin API, as is making one fail.
- When an instance leaves the cluster under an active remediation (preempted, scaled down), the platform
  cancels the remediation ("Cancelled by user or system") with an ``error_message`` saying why.

What a remediation does to the cluster's node list, when it SUCCEEDS (the Kubernetes twin acts on the
transitions, see :class:`RemediationTransition`): ``VM_ONLY`` and ``HOST_AWARE`` replace the instance by a
new one (new instance id and node name, same compute class); ``EVICT_WITHOUT_REPLACEMENT`` removes it (see
:func:`evicted_counts`); ``REBOOT_VM`` and ``HOST_POWER_CYCLE`` keep it. A remediation that FAILS changes no
node.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from together_clusters.platform import ComputeClass

from .catalog import GPUS_PER_NODE
from .clock import nominal
from .errors import conflict, invalid, not_found
from .lifecycle import Duration
from .records import ClusterRecord, NodeRecord, RemediationRecord, Timed
from .shapes import RemediationMode, RemediationState, RemediationTrigger

MANUAL: Final = "REMEDIATION_TRIGGER_MANUAL"
AUTOMATED: Final = "REMEDIATION_TRIGGER_AUTOMATED"
VM_ONLY: Final = "REMEDIATION_MODE_VM_ONLY"
HOST_AWARE: Final = "REMEDIATION_MODE_HOST_AWARE"
EVICT: Final = "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT"
REBOOT_VM: Final = "REMEDIATION_MODE_REBOOT_VM"
HOST_POWER_CYCLE: Final = "REMEDIATION_MODE_HOST_POWER_CYCLE"

MODES: Final[tuple[str, ...]] = get_args(RemediationMode)
STATES: Final[tuple[str, ...]] = get_args(RemediationState)
TRIGGERS: Final[tuple[str, ...]] = get_args(RemediationTrigger)

ACTIVE_STATES: Final = frozenset({"PENDING_APPROVAL", "PENDING", "QUARANTINING", "QUARANTINED", "RUNNING"})
"""States of a remediation not over yet: an instance has at most one remediation in them."""
FINISHED_STATES: Final = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "AUTO_RESOLVED"})
CANCELLABLE_STATES: Final = frozenset({"PENDING_APPROVAL", "PENDING"})
"""What ``cancel`` accepts (the SDK's words); any other state answers 409."""
RESOLVABLE_STATES: Final = frozenset({"PENDING_APPROVAL", "PENDING"})
"""What can end ``AUTO_RESOLVED``: "resolved before processing"."""
QUARANTINE_MODES: Final = frozenset({HOST_AWARE, HOST_POWER_CYCLE})
"""The modes that cordon the host before they run, so pass through QUARANTINING and QUARANTINED."""
REPLACING_MODES: Final = frozenset({VM_ONLY, HOST_AWARE})
"""The modes that delete the VM and bring a new instance in its place."""
REMOVING_MODES: Final = frozenset({VM_ONLY, HOST_AWARE, EVICT})
"""The modes whose instance is gone once they succeed (``marked_for_deletion`` while they run)."""

SYSTEM_ACTOR: Final = "system"
"""``requested_by`` of an automated remediation, ``reviewed_by`` of one the platform approves itself."""
DEFAULT_AUTOMATED_MODE: Final = HOST_AWARE
"""What the health checks propose for a GPU fault: a new VM on another host."""
DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 100
"""Larger pages are cut to this (the official CLI asks for 100)."""
ORDERS: Final = {"create_time desc": "desc", "create_time asc": "asc", "create_time": "asc"}
"""``order_by`` expressions understood; the default is newest first."""

# NVIDIA's Xid catalog: the codes a health check reports, with the driver's mnemonic.
XID_MNEMONICS: Final[Mapping[str, str]] = {
    "13": "Graphics Engine Exception",
    "31": "GPU memory page fault",
    "43": "GPU stopped processing",
    "48": "Double Bit ECC Error",
    "63": "ECC page retirement or row remapping recording event",
    "64": "ECC page retirement or row remapper recording failure",
    "74": "NVLINK Error",
    "79": "GPU has fallen off the bus",
    "92": "High single-bit ECC error rate",
    "94": "Contained ECC error",
    "95": "Uncontained ECC error",
    "119": "GSP RPC Timeout",
}

Outcome = Literal["succeed", "fail", "auto_resolve"]


def _default_running_s() -> dict[RemediationMode, float]:
    """How long each mode's repair runs: a new VM takes a node's bring-up and more, a power cycle longest."""
    return {VM_ONLY: 480.0, HOST_AWARE: 600.0, EVICT: 120.0, REBOOT_VM: 300.0, HOST_POWER_CYCLE: 900.0}


class RemediationTimings(BaseModel):
    """How long (nominal seconds of the platform) a remediation stays in each state it leaves by itself.

    Changed with the admin API's settings (``remediation_timings``); the clock's speed shortens them.
    """

    model_config = ConfigDict(extra="forbid")

    pending_s: float = 60.0
    quarantining_s: float = 120.0
    quarantined_s: float = 30.0
    running_s: dict[RemediationMode, float] = Field(default_factory=_default_running_s)

    def changed(self, changes: Mapping[str, Any]) -> RemediationTimings:
        """These timings with ``changes`` applied (``running_s`` merged mode by mode); 400 on a bad value."""
        data = self.model_dump()
        for key, value in changes.items():
            if key == "running_s" and isinstance(value, Mapping):
                data["running_s"] = {**data["running_s"], **value}
            else:
                data[key] = value
        try:
            timings = RemediationTimings.model_validate(data)
        except ValueError as exc:
            raise invalid(f"remediation_timings: {exc}", "remediation_timings") from None
        values = [
            timings.pending_s,
            timings.quarantining_s,
            timings.quarantined_s,
            *timings.running_s.values(),
        ]
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise invalid(
                "remediation_timings: every duration must be a finite number >= 0", "remediation_timings"
            )
        return timings

    def dwell(self, state: str, mode: str) -> float | None:
        """How long ``state`` lasts before the platform moves on; ``None``: it waits for someone, or is over."""
        if state == "PENDING":
            return self.pending_s
        if state == "QUARANTINING":
            return self.quarantining_s
        if state == "QUARANTINED":
            return self.quarantined_s
        if state == "RUNNING":
            return self.running_s.get(mode, 0.0)  # type: ignore[call-overload]
        return None


@dataclass(frozen=True)
class RemediationTransition:
    """Remediation ``remediation_id`` of instance ``instance_id`` entered ``state`` at ``at``.

    What a Kubernetes twin acts on: ``RUNNING`` (the node goes down as ``mode`` implies) and the finished
    states. ``replacement_*`` name the new instance of a successful ``VM_ONLY``/``HOST_AWARE`` repair.
    """

    cluster_id: str
    remediation_id: str
    instance_id: str
    node_id: str
    compute_class: ComputeClass
    mode: str
    trigger: str
    state: str
    at: float
    replacement_instance_id: str | None = None
    replacement_node_id: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


def transition_of(rem: RemediationRecord) -> RemediationTransition:
    """The transition ``rem`` made last."""
    return RemediationTransition(
        cluster_id=rem.cluster_id,
        remediation_id=rem.remediation_id,
        instance_id=rem.instance_id,
        node_id=rem.node_id,
        compute_class=rem.compute_class,
        mode=rem.mode,
        trigger=rem.trigger,
        state=rem.state,
        at=rem.history[-1].at,
        replacement_instance_id=rem.replacement_instance_id,
        replacement_node_id=rem.replacement_node_id,
    )


# --- creating ----------------------------------------------------------------------------------


def live_instance(record: ClusterRecord, instance_id: str, now: float) -> NodeRecord:
    """The cluster's GPU node ``instance_id`` that can be remediated now; 400/404/409 otherwise."""
    if instance_id == "-":
        raise invalid(
            "instance_id '-' (every instance) is only accepted when listing remediations; name one instance",
            "instance_id",
        )
    node = next((n for n in record.nodes if n.instance_id == instance_id and n.appears_at <= now), None)
    if node is None:
        gone = any(n.instance_id == instance_id for n in record.deleted_nodes)
        why = "was deleted" if gone else "is not an instance of it"
        live = ", ".join(n.instance_id for n in record.nodes if n.appears_at <= now) or "none"
        raise not_found(
            f"instance {instance_id} of cluster {record.cluster_id} not found: it {why}; its instances: {live}",
            "instance_id",
        )
    if record.deleting:
        raise conflict(
            f"cluster {record.cluster_id} is being deleted: its instances can no longer be remediated"
        )
    if node.cordoned_at is not None:
        raise conflict(
            f"instance {instance_id} is being preempted (cordoned, deleted after its grace period): "
            "it cannot be remediated",
            "instance_id",
        )
    active = next(
        (r for r in record.remediations if r.instance_id == instance_id and r.state in ACTIVE_STATES), None
    )
    if active is not None:
        raise conflict(
            f"instance {instance_id} already has an active remediation {active.remediation_id} ({active.state}); "
            "wait for it to finish, or cancel it while it is PENDING_APPROVAL or PENDING",
            "instance_id",
        )
    return node


def new_remediation(
    record: ClusterRecord,
    node: NodeRecord,
    *,
    mode: str,
    trigger: str,
    now: float,
    reason: str | None = None,
    requested_by: str | None = None,
    linked_alerts: list[dict[str, Any]] | None = None,
) -> RemediationRecord:
    """A remediation of ``node``, added to ``record``; not in any state yet: :func:`enter` its first."""
    record.remediation_seq += 1
    remediation_id = str(uuid.uuid4())
    alerts = [a | {"node_remediation_intent_id": remediation_id} for a in linked_alerts or []]
    rem = RemediationRecord(
        remediation_id=remediation_id,
        seq=record.remediation_seq,
        cluster_id=record.cluster_id,
        instance_id=node.instance_id,
        node_id=node.node_id,
        compute_class=node.compute_class,
        mode=mode,  # type: ignore[arg-type]
        trigger=trigger,  # type: ignore[arg-type]
        state="PENDING",
        created_at=now,
        updated_at=now,
        history=[],
        reason=reason,
        requested_by=requested_by,
        linked_alerts=alerts,
        passive_health_check_event_id=str(uuid.uuid4()) if alerts else None,
    )
    record.remediations.append(rem)
    return rem


def first_state(trigger: str, node: NodeRecord) -> RemediationState:
    """Where a new remediation starts: a user's at once, the health checks' after approval unless the
    instance is remediated without asking."""
    if trigger == MANUAL or node.auto_remediation_enabled:
        return "PENDING"
    return "PENDING_APPROVAL"


def xid_alert(
    record: ClusterRecord, node: NodeRecord, xid_code: str, count: int, started_at: float
) -> dict[str, Any]:
    """A ``DmesgXidError`` passive health check alert on ``node`` (times as epoch seconds)."""
    mnemonic = XID_MNEMONICS.get(xid_code, f"Xid {xid_code}")
    summary = f"Xid {xid_code} ({mnemonic}) seen {count} time(s) in dmesg on {node.node_id}"
    return {
        "alert_name": "DmesgXidError",
        "annotation": {
            "description": "The NVIDIA driver reported Xid errors: the GPU or its host may need repair.",
            "summary_line": summary,
            "title": "NVIDIA Xid error",
            "xid": {"events": [{"count": count, "mnemonic": mnemonic, "xid_code": xid_code}]},
        },
        "annotations": {"summary": "NVIDIA Xid error", "evidence": summary},
        "cluster_id": record.cluster_id,
        "passive_health_check_alert_id": str(uuid.uuid4()),
        "severity": "PHC_SEVERITY_CRITICAL",
        "started_at": started_at,
        "target_vm": node.node_id,
        "instance_id": node.instance_id,
    }


def slurm_unavailable_alert(
    record: ClusterRecord, node: NodeRecord, reason: str, started_at: float
) -> dict[str, Any]:
    """A ``SlurmNodeUnavailable`` passive health check alert on ``node`` (times as epoch seconds)."""
    summary = f"Slurm node {node.node_id} unavailable: {reason}"
    return {
        "alert_name": "SlurmNodeUnavailable",
        "annotation": {
            "description": "Slurm marked the node unavailable (drained or down).",
            "summary_line": summary,
            "title": "Slurm node unavailable",
            "slurm_node_unavailable": {"reason": reason},
        },
        "annotations": {"summary": "Slurm node unavailable", "evidence": summary},
        "cluster_id": record.cluster_id,
        "passive_health_check_alert_id": str(uuid.uuid4()),
        "severity": "PHC_SEVERITY_WARNING",
        "started_at": started_at,
        "target_vm": node.node_id,
        "instance_id": node.instance_id,
    }


# --- moving along ------------------------------------------------------------------------------


def enter(
    rem: RemediationRecord,
    state: RemediationState,
    at: float,
    timings: RemediationTimings,
    duration: Duration = nominal,
) -> None:
    """``rem`` enters ``state`` at ``at``: its times follow, and when it leaves by itself (if it does)."""
    rem.state = state
    rem.history.append(Timed(phase=state, at=at))
    rem.updated_at = at
    if state in ("QUARANTINING", "RUNNING") and rem.start_time is None:
        rem.start_time = at
    dwell = timings.dwell(state, rem.mode)
    rem.next_at = None if dwell is None else at + duration(dwell)
    if state in FINISHED_STATES:
        rem.end_time = at
        if state in ("SUCCEEDED", "AUTO_RESOLVED"):
            for alert in rem.linked_alerts:
                alert.setdefault("resolved_at", at)


def next_state(rem: RemediationRecord) -> RemediationState | None:
    """Where the platform moves ``rem`` when its time in the current state is up."""
    if rem.state == "PENDING":
        return "QUARANTINING" if rem.mode in QUARANTINE_MODES else "RUNNING"
    if rem.state == "QUARANTINING":
        return "QUARANTINED"
    if rem.state == "QUARANTINED":
        return "RUNNING"
    if rem.state == "RUNNING":
        return "FAILED" if rem.outcome == "fail" else "SUCCEEDED"
    return None


def check_approve_mode(mode: str | None) -> None:
    """400 for an override the API refuses."""
    if mode == HOST_POWER_CYCLE:
        raise invalid(
            "mode: REMEDIATION_MODE_HOST_POWER_CYCLE cannot be set as an approval override; "
            "create a host power-cycle remediation directly",
            "mode",
        )


def review(rem: RemediationRecord, action: Literal["approved", "rejected"]) -> None:
    """409 unless ``rem`` awaits approval."""
    if rem.state != "PENDING_APPROVAL":
        raise conflict(
            f"remediation {rem.remediation_id} is {rem.state}: only a remediation in PENDING_APPROVAL "
            f"can be {action}",
            "remediation_id",
        )


def approve(rem: RemediationRecord, actor: str, comment: str | None, mode: str | None, at: float) -> None:
    """Record the approval (the caller then enters PENDING)."""
    check_approve_mode(mode)
    review(rem, "approved")
    if mode is not None:
        rem.mode = mode  # type: ignore[assignment]
    rem.reviewed_by, rem.review_comment, rem.review_time = actor, comment, at


def reject(rem: RemediationRecord, actor: str, comment: str | None, at: float) -> None:
    """Record the rejection (the caller then enters CANCELLED)."""
    review(rem, "rejected")
    rem.reviewed_by, rem.review_comment, rem.review_time = actor, comment, at


def check_cancellable(rem: RemediationRecord) -> None:
    """409 unless ``rem`` may still be cancelled."""
    if rem.state not in CANCELLABLE_STATES:
        raise conflict(
            f"remediation {rem.remediation_id} is {rem.state}: only a remediation in PENDING_APPROVAL or "
            "PENDING can be cancelled",
            "remediation_id",
        )


def check_outcome(rem: RemediationRecord, outcome: Outcome) -> None:
    """409 when ``rem`` can no longer end as ``outcome``."""
    if outcome == "auto_resolve" and rem.state not in RESOLVABLE_STATES:
        raise conflict(
            f"remediation {rem.remediation_id} is {rem.state}: only one in PENDING_APPROVAL or PENDING "
            "(not processed yet) can be auto-resolved",
            "outcome",
        )
    if rem.state in FINISHED_STATES:
        raise conflict(f"remediation {rem.remediation_id} is already {rem.state}", "outcome")


def failure_message(rem: RemediationRecord) -> str:
    """What a failed repair reports when the admin API gave no message."""
    what = {
        VM_ONLY: "no replacement VM could be provisioned",
        HOST_AWARE: "no replacement VM could be provisioned on another host",
        EVICT: "the VM could not be evicted",
        REBOOT_VM: "the VM did not come back after its reboot",
        HOST_POWER_CYCLE: "the host did not come back healthy after its power cycle",
    }[rem.mode]
    return f"{rem.mode} of instance {rem.instance_id} failed: {what}"


# --- what the cluster looks like after -----------------------------------------------------------


def evicted_counts(record: ClusterRecord, node: NodeRecord) -> None:
    """Lower the cluster's GPU count by the evicted node's GPUs.

    ``EVICT_WITHOUT_REPLACEMENT`` "evicts the VM without provisioning a replacement". The platform keeps a
    cluster at its counts (a preemptible shortfall is refilled, ``num_gpus`` is what the user ordered), so a
    count left as it was would bring a replacement back: the eviction lowers the count it belongs to,
    ``num_gpus`` for a standard node (the reserved and capacity-pool shares never above it) or
    ``desired_preemptible_gpus`` for a preemptible one (``allocated_preemptible_gpus`` follows the nodes). The
    GPUs do not go back to the preemptible pool: the host is out for repair. The cluster is one node short of
    what its owner declared; an update asking for the old count again brings a new node.
    """
    if node.compute_class == ComputeClass.STANDARD:
        record.num_gpus = max(0, record.num_gpus - GPUS_PER_NODE)
        record.num_reserved_gpus = min(record.num_reserved_gpus, record.num_gpus)
        record.num_capacity_pool_gpus = min(record.num_capacity_pool_gpus, record.num_gpus)
    else:
        record.desired_preemptible_gpus = max(0, record.desired_preemptible_gpus - GPUS_PER_NODE)


def latest_by_instance(record: ClusterRecord) -> dict[str, RemediationRecord]:
    """Each instance's newest remediation (a node's ``latest_remediation``)."""
    latest: dict[str, RemediationRecord] = {}
    for rem in record.remediations:
        latest[rem.instance_id] = rem
    return latest


def active_by_node(record: ClusterRecord) -> dict[str, RemediationRecord]:
    """The active remediation of each node that has one, by node id."""
    return {r.node_id: r for r in record.remediations if r.state in ACTIVE_STATES}


# --- reading -----------------------------------------------------------------------------------


def known_instance(record: ClusterRecord, instance_id: str) -> None:
    """404 unless ``instance_id`` is ``-`` or an instance the cluster has (or had)."""
    if instance_id == "-":
        return
    if any(n.instance_id == instance_id for n in (*record.nodes, *record.deleted_nodes)):
        return
    if any(r.instance_id == instance_id for r in record.remediations):
        return
    raise not_found(f"instance {instance_id} of cluster {record.cluster_id} not found", "instance_id")


def find(record: ClusterRecord, instance_id: str, remediation_id: str) -> RemediationRecord:
    """Remediation ``remediation_id`` of the cluster's instance ``instance_id``; 404 otherwise."""
    known_instance(record, instance_id)
    rem = next((r for r in record.remediations if r.remediation_id == remediation_id), None)
    if rem is None or rem.instance_id != instance_id:
        raise not_found(
            f"remediation {remediation_id} of instance {instance_id} in cluster {record.cluster_id} not found",
            "remediation_id",
        )
    return rem


def parse_filter(field: str, values: Iterable[str] | None, allowed: tuple[str, ...]) -> frozenset[str]:
    """A list filter as the SDK sends it (comma-separated, ``state=A,B``) or repeated (``state=A&state=B``)."""
    given = {v.strip() for value in values or () for v in value.split(",") if v.strip()}
    unknown = sorted(given - set(allowed))
    if unknown:
        raise invalid(f"{field}: unknown value(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}", field)
    return frozenset(given)


@dataclass(frozen=True)
class Page:
    items: list[RemediationRecord]
    next_page_token: str

    @property
    def has_next(self) -> bool:
        return bool(self.next_page_token)


def page(
    record: ClusterRecord,
    instance_id: str,
    *,
    states: frozenset[str] = frozenset(),
    modes: frozenset[str] = frozenset(),
    triggers: frozenset[str] = frozenset(),
    order_by: str | None = None,
    page_size: int | None = None,
    page_token: str | None = None,
) -> Page:
    """One page of the remediations of an instance (``-``: of every instance), filtered, newest first.

    ``page_size`` 0 or absent means 50; above 100 it is cut to 100. The token is opaque; it is only valid
    for the same instance, filters and order (400 otherwise), and stays valid while remediations are added.
    """
    known_instance(record, instance_id)
    order = ORDERS.get(" ".join((order_by or "create_time desc").lower().split()))
    if order is None:
        raise invalid(
            f"order_by must be one of {', '.join(repr(o) for o in ORDERS)}; got {order_by!r}", "order_by"
        )
    if page_size is not None and page_size < 0:
        raise invalid(f"page_size must be >= 0; got {page_size}", "page_size")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    key = _filter_key(instance_id, states, modes, triggers, order)
    after = _decode_token(page_token, key) if page_token else None
    chosen = [
        r
        for r in record.remediations
        if (instance_id == "-" or r.instance_id == instance_id)
        and (not states or r.state in states)
        and (not modes or r.mode in modes)
        and (not triggers or r.trigger in triggers)
    ]
    chosen.sort(key=lambda r: r.seq, reverse=order == "desc")
    if after is not None:
        chosen = [r for r in chosen if (r.seq < after if order == "desc" else r.seq > after)]
    items = chosen[:size]
    more = len(chosen) > size
    return Page(items=items, next_page_token=_encode_token(items[-1].seq, key) if more else "")


def _filter_key(instance_id: str, *parts: Any) -> str:
    text = json.dumps([instance_id, *[sorted(p) if isinstance(p, frozenset) else p for p in parts]])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _encode_token(seq: int, key: str) -> str:
    raw = json.dumps({"after": seq, "query": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str, key: str) -> int:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after, query = int(data["after"]), str(data["query"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise invalid(f"page_token is not a token this API gave: {token!r}", "page_token") from None
    if query != key:
        raise invalid(
            "page_token belongs to a listing with another instance, filters or order: list from the first "
            "page again",
            "page_token",
        )
    return after
