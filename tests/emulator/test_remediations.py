"""Node remediations in the emulator: the state machine on a frozen clock (no HTTP), then the API's replies,
errors, filters and pages over HTTP, each reply checked strictly against the official SDK's types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from together.types.clusters import Remediation, RemediationListResponse
from together.types.clusters import remediation as sdk_remediation

from together_clusters.emulator import remediations, shapes
from together_clusters.emulator.clock import EmulatedClock
from together_clusters.emulator.errors import EmulatorError
from together_clusters.emulator.remediations import RemediationTimings, RemediationTransition
from together_clusters.emulator.shapes import (
    ClusterCreateRequest,
    ClusterUpdateRequest,
    RemediationApproveRequest,
    RemediationCreateRequest,
    RemediationRejectRequest,
)
from together_clusters.emulator.state import Platform
from together_clusters.emulator.store import Store
from together_clusters.platform import compute_class_of_node

from .conftest import create_body
from .strict import strict, strict_cluster

START = 1_800_000_000.0
OWNER = "owner"
ACTOR = "key-owner"
VM_ONLY = "REMEDIATION_MODE_VM_ONLY"
HOST_AWARE = "REMEDIATION_MODE_HOST_AWARE"
EVICT = "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT"
REBOOT = "REMEDIATION_MODE_REBOOT_VM"
POWER_CYCLE = "REMEDIATION_MODE_HOST_POWER_CYCLE"
T = RemediationTimings()


class Recording(Platform):
    """A platform that keeps every remediation transition its hook hears of."""

    def __init__(self, **kwargs: Any) -> None:
        self.transitions: list[RemediationTransition] = []
        super().__init__(**kwargs)

    def _remediation_entered(self, transition: RemediationTransition) -> None:
        self.transitions.append(transition)


def _platform(store: Store | None = None) -> Recording:
    return Recording(clock=EmulatedClock(start=START, speed=0), store=store)


def _ready_cluster(platform: Platform, num_gpus: int = 16, preemptible: int = 8) -> str:
    req = ClusterCreateRequest.model_validate(
        create_body(num_gpus=num_gpus, num_preemptible_gpus=preemptible)
    )
    cluster_id = str(platform.create_cluster(OWNER, "proj-owner", req)["cluster_id"])
    platform.clock.advance(700)
    return cluster_id


def _nodes(platform: Platform, cluster_id: str) -> list[dict[str, Any]]:
    return list(platform.get_cluster(OWNER, cluster_id)["gpu_worker_nodes"])


def _instance(platform: Platform, cluster_id: str, compute_class: str = "standard") -> str:
    return next(
        n["instance_id"]
        for n in _nodes(platform, cluster_id)
        if compute_class_of_node(n["node_id"]) == compute_class
    )


def _create(platform: Platform, cluster_id: str, instance_id: str, mode: str, **extra: Any) -> dict[str, Any]:
    req = RemediationCreateRequest(mode=mode, **extra)  # type: ignore[arg-type]
    return platform.create_remediation(OWNER, ACTOR, cluster_id, instance_id, req)


def _get(platform: Platform, cluster_id: str, rem: dict[str, Any]) -> dict[str, Any]:
    return platform.get_remediation(OWNER, cluster_id, rem["instance_id"], rem["id"])


def _sdk(body: dict[str, Any]) -> Remediation:
    return strict(Remediation, pydantic.TypeAdapter(dict[str, Any]).dump_json(body).decode())


def _error(call: Any) -> EmulatorError:
    with pytest.raises(EmulatorError) as caught:
        call()
    return caught.value


# --- the state machine, on a frozen clock ------------------------------------------------------


def test_a_manual_vm_only_repair_runs_on_the_clock_and_replaces_the_instance() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    old = _instance(platform, cluster_id)
    rem = _create(platform, cluster_id, old, VM_ONLY, reason="ECC errors")
    parsed = _sdk(rem)
    assert (parsed.state, parsed.trigger, parsed.mode) == ("PENDING", "REMEDIATION_TRIGGER_MANUAL", VM_ONLY)
    assert parsed.reason == "ECC errors" and parsed.requested_by == ACTOR
    assert parsed.create_time is not None and parsed.start_time is None and parsed.end_time is None

    platform.clock.advance(T.pending_s)
    running = _get(platform, cluster_id, rem)
    assert running["state"] == "RUNNING" and running["start_time"] == running["update_time"]
    node = next(n for n in _nodes(platform, cluster_id) if n["instance_id"] == old)
    # The node is still listed while the repair runs, marked for deletion, with the repair as its latest.
    assert node["marked_for_deletion"] and node["latest_remediation"]["state"] == "RUNNING"

    platform.clock.advance(T.running_s[VM_ONLY] - 1)
    assert _get(platform, cluster_id, rem)["state"] == "RUNNING"
    platform.clock.advance(1)
    done = _sdk(_get(platform, cluster_id, rem))
    assert done.state == "SUCCEEDED" and done.end_time is not None and done.error_message is None

    cluster = platform.get_cluster(OWNER, cluster_id)
    live = {n["instance_id"] for n in cluster["gpu_worker_nodes"]}
    assert old not in live and len(live) == 3  # two standard, one preemptible: the count is kept
    assert cluster["num_gpus"] == 16
    [gone] = [n for n in cluster["deleted_gpu_worker_nodes"] if n["instance_id"] == old]
    assert gone["status"] == "Deleted" and gone["latest_remediation"]["state"] == "SUCCEEDED"
    [record] = [r for r in platform.all_remediations() if r["id"] == rem["id"]]
    new = next(
        n for n in cluster["gpu_worker_nodes"] if n["instance_id"] == record["replacement_instance_id"]
    )
    assert new["node_id"] == record["replacement_node_id"] != gone["node_id"]
    assert new["status"] == "Ready" and "latest_remediation" not in new
    assert [h["state"] for h in record["history"]] == ["PENDING", "RUNNING", "SUCCEEDED"]
    strict_cluster(pydantic.TypeAdapter(dict[str, Any]).dump_json(cluster).decode())


@pytest.mark.parametrize("mode", [HOST_AWARE, POWER_CYCLE])
def test_the_modes_that_cordon_the_host_pass_through_quarantine(mode: str) -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    rem = _create(platform, cluster_id, instance, mode)
    seen = []
    for dwell in (T.pending_s, T.quarantining_s, T.quarantined_s, T.running_s[mode]):
        platform.clock.advance(dwell)
        seen.append(_get(platform, cluster_id, rem)["state"])
    assert seen == ["QUARANTINING", "QUARANTINED", "RUNNING", "SUCCEEDED"]
    live = {n["instance_id"] for n in _nodes(platform, cluster_id)}
    # A power cycle keeps the node's identity; a host-aware repair brings a new instance.
    assert (instance in live) == (mode == POWER_CYCLE)
    # start_time: when processing began (the quarantine), not when the repair itself ran.
    done = _get(platform, cluster_id, rem)
    assert done["start_time"] < done["end_time"]


def test_a_reboot_keeps_the_instance() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    rem = _create(platform, cluster_id, instance, REBOOT)
    platform.clock.advance(T.pending_s + T.running_s[REBOOT])
    assert _get(platform, cluster_id, rem)["state"] == "SUCCEEDED"
    [node] = [n for n in _nodes(platform, cluster_id) if n["instance_id"] == instance]
    assert node["status"] == "Ready" and node["latest_remediation"]["mode"] == REBOOT


def test_an_eviction_without_replacement_leaves_the_cluster_one_node_short() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    standard = _instance(platform, cluster_id)
    preemptible = _instance(platform, cluster_id, "preemptible")
    for instance in (standard, preemptible):
        _create(platform, cluster_id, instance, EVICT)
    platform.clock.advance(T.pending_s + T.running_s[EVICT])
    cluster = platform.get_cluster(OWNER, cluster_id)
    assert {n["instance_id"] for n in cluster["gpu_worker_nodes"]}.isdisjoint({standard, preemptible})
    assert len(cluster["gpu_worker_nodes"]) == 1
    # The counts follow: nothing refills them (no replacement), even long after.
    assert (cluster["num_gpus"], cluster["desired_preemptible_gpus"]) == (8, 0)
    platform.clock.advance(3600)
    cluster = platform.get_cluster(OWNER, cluster_id)
    assert (cluster["num_gpus"], cluster["allocated_preemptible_gpus"], len(cluster["gpu_worker_nodes"])) == (
        8,
        0,
        1,
    )
    # An update asking for the old count again brings a new node.
    platform.update_cluster(OWNER, cluster_id, ClusterUpdateRequest(num_gpus=16))
    platform.clock.advance(200)
    assert len(_nodes(platform, cluster_id)) == 2


def test_an_automated_remediation_waits_for_approval_and_runs_in_the_approved_mode() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    raised = _sdk(platform.raise_remediation(cluster_id, instance, xid_code="79", xid_count=3))
    assert (raised.state, raised.trigger, raised.mode) == (
        "PENDING_APPROVAL",
        "REMEDIATION_TRIGGER_AUTOMATED",
        HOST_AWARE,
    )
    assert raised.requested_by == "system" and raised.passive_health_check_event_id
    [alert] = raised.linked_alerts or []
    assert alert.alert_name == "DmesgXidError" and alert.instance_id == instance
    assert alert.node_remediation_intent_id == raised.id and alert.resolved_at is None
    assert alert.annotation.xid is not None
    assert [(e.xid_code, e.count) for e in alert.annotation.xid.events] == [("79", 3)]
    assert alert.annotation.xid.events[0].mnemonic == "GPU has fallen off the bus"

    platform.clock.advance(86_400)  # no deadline: it waits
    assert _get(platform, cluster_id, raised.model_dump())["state"] == "PENDING_APPROVAL"
    node = next(n for n in _nodes(platform, cluster_id) if n["instance_id"] == instance)
    assert node["latest_remediation"]["state"] == "PENDING_APPROVAL" and not node["marked_for_deletion"]

    approved = _sdk(
        platform.approve_remediation(
            OWNER,
            "key-reviewer",
            cluster_id,
            instance,
            raised.id,
            RemediationApproveRequest(comment="drained", mode=REBOOT),
        )
    )
    assert (approved.state, approved.mode, approved.reviewed_by, approved.review_comment) == (
        "PENDING",
        REBOOT,
        "key-reviewer",
        "drained",
    )
    assert approved.review_time is not None and approved.requested_by == "system"
    platform.clock.advance(T.pending_s + T.running_s[REBOOT])
    done = _sdk(_get(platform, cluster_id, approved.model_dump()))
    assert done.state == "SUCCEEDED"
    assert done.linked_alerts and done.linked_alerts[0].resolved_at == done.end_time
    assert instance in {n["instance_id"] for n in _nodes(platform, cluster_id)}


def test_reject_cancels_with_the_review_recorded() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    raised = platform.raise_remediation(cluster_id, instance)
    rejected = _sdk(
        platform.reject_remediation(
            OWNER, ACTOR, cluster_id, instance, raised["id"], RemediationRejectRequest(comment="false alarm")
        )
    )
    assert (rejected.state, rejected.reviewed_by, rejected.review_comment) == (
        "CANCELLED",
        ACTOR,
        "false alarm",
    )
    assert rejected.end_time == rejected.review_time
    # The alert keeps firing: nobody repaired anything.
    assert rejected.linked_alerts and rejected.linked_alerts[0].resolved_at is None


@pytest.mark.parametrize("automated", [False, True], ids=["pending", "pending-approval"])
def test_cancel_in_a_cancellable_state_frees_the_instance(automated: bool) -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    rem = (
        platform.raise_remediation(cluster_id, instance)
        if automated
        else _create(platform, cluster_id, instance, VM_ONLY)
    )
    cancelled = platform.cancel_remediation(OWNER, cluster_id, instance, rem["id"])
    assert cancelled["state"] == "CANCELLED" and cancelled["end_time"]
    assert "reviewed_by" not in cancelled  # a cancel is no review
    platform.clock.advance(3600)
    assert _get(platform, cluster_id, rem)["state"] == "CANCELLED"
    assert instance in {n["instance_id"] for n in _nodes(platform, cluster_id)}
    # A new one may start now.
    assert _create(platform, cluster_id, instance, REBOOT)["state"] == "PENDING"


def test_the_admin_api_makes_one_fail_or_auto_resolve() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    standard = _instance(platform, cluster_id)
    rem = _create(platform, cluster_id, standard, VM_ONLY)
    planned = platform.set_remediation_outcome(rem["id"], "fail", "no capacity for a new VM")
    assert planned["state"] == "PENDING" and "error_message" not in planned  # it fails when it runs
    platform.clock.advance(T.pending_s + T.running_s[VM_ONLY])
    failed = _sdk(_get(platform, cluster_id, rem))
    assert (failed.state, failed.error_message) == ("FAILED", "no capacity for a new VM")
    # A failed repair changes no node.
    assert standard in {n["instance_id"] for n in _nodes(platform, cluster_id)}

    other = platform.raise_remediation(cluster_id, standard, outcome="fail")
    platform.approve_remediation(OWNER, ACTOR, cluster_id, standard, other["id"], RemediationApproveRequest())
    platform.clock.advance(T.pending_s + T.quarantining_s + T.quarantined_s + T.running_s[HOST_AWARE])
    failed = _sdk(_get(platform, cluster_id, other))
    assert failed.state == "FAILED" and failed.error_message and "HOST_AWARE" in failed.error_message

    resolving = platform.raise_remediation(cluster_id, standard)
    resolved = _sdk(platform.set_remediation_outcome(resolving["id"], "auto_resolve"))
    assert resolved.state == "AUTO_RESOLVED" and resolved.linked_alerts
    assert resolved.linked_alerts[0].resolved_at == resolved.end_time

    running = _create(platform, cluster_id, standard, REBOOT)
    platform.clock.advance(T.pending_s)
    assert _error(lambda: platform.set_remediation_outcome(running["id"], "auto_resolve")).status == 409
    assert _error(lambda: platform.set_remediation_outcome(resolved.id, "fail")).status == 409
    assert _error(lambda: platform.set_remediation_outcome("nope", "fail")).status == 404


def test_auto_remediation_enabled_starts_the_health_checks_repairs_without_approval() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    assert all(n["auto_remediation_enabled"] is False for n in _nodes(platform, cluster_id))
    shown = platform.set_auto_remediation(cluster_id, True, [instance])
    assert shown["auto_remediation_enabled"][instance] is True
    [node] = [n for n in _nodes(platform, cluster_id) if n["instance_id"] == instance]
    assert node["auto_remediation_enabled"] is True
    rem = platform.raise_remediation(cluster_id, instance, mode=VM_ONLY)
    assert rem["state"] == "PENDING" and rem["reviewed_by"] == "system"
    platform.clock.advance(T.pending_s + T.running_s[VM_ONLY])
    [record] = platform.all_remediations()
    # The new instance keeps the setting of the one it replaced.
    new = next(
        n for n in _nodes(platform, cluster_id) if n["instance_id"] == record["replacement_instance_id"]
    )
    assert new["auto_remediation_enabled"] is True
    assert _error(lambda: platform.set_auto_remediation(cluster_id, True, ["i-nope"])).status == 404


def test_a_node_preempted_under_a_remediation_cancels_it() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    preemptible = _instance(platform, cluster_id, "preemptible")
    rem = platform.raise_remediation(cluster_id, preemptible)
    platform.preempt(cluster_id)
    # Cordoned by the preemption: no new remediation of it.
    assert _error(lambda: _create(platform, cluster_id, preemptible, VM_ONLY)).status == 409
    platform.clock.advance(platform.grace_seconds)
    gone = _sdk(_get(platform, cluster_id, rem))
    assert gone.state == "CANCELLED" and gone.error_message and "preempted" in gone.error_message


def test_the_hook_hears_every_transition_with_the_mode_and_the_replacement() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    rem = _create(platform, cluster_id, instance, HOST_AWARE)
    platform.clock.advance(T.pending_s + T.quarantining_s + T.quarantined_s + T.running_s[HOST_AWARE])
    platform.get_cluster(OWNER, cluster_id)
    heard = [(t.state, t.mode, t.instance_id) for t in platform.transitions if t.remediation_id == rem["id"]]
    assert heard == [
        (state, HOST_AWARE, instance)
        for state in ("PENDING", "QUARANTINING", "QUARANTINED", "RUNNING", "SUCCEEDED")
    ]
    last = platform.transitions[-1]
    assert last.finished and last.replacement_instance_id and last.replacement_instance_id != instance
    assert last.at == START + 700 + T.pending_s + T.quarantining_s + T.quarantined_s + T.running_s[HOST_AWARE]


def test_timings_are_settings_and_the_speed_shortens_them() -> None:
    platform = Recording(clock=EmulatedClock(start=START, speed=0))
    cluster_id = _ready_cluster(platform)
    settings = platform.settings(remediation_timings={"pending_s": 5, "running_s": {REBOOT: 20}})
    assert settings["remediation_timings"]["pending_s"] == 5
    assert settings["remediation_timings"]["running_s"][VM_ONLY] == T.running_s[VM_ONLY]
    rem = _create(platform, cluster_id, _instance(platform, cluster_id), REBOOT)
    platform.clock.advance(25)
    assert _get(platform, cluster_id, rem)["state"] == "SUCCEEDED"
    assert _error(lambda: platform.settings(remediation_timings={"pending_s": -1})).status == 400
    assert _error(lambda: platform.settings(remediation_timings={"typo_s": 1})).status == 400
    # At speed 60 a minute of the platform takes a real second.
    wall = [START]
    fast = Recording(clock=EmulatedClock(start=START, speed=60, real=lambda: wall[0]))
    cluster_id = _ready_cluster(fast)
    rem = _create(fast, cluster_id, _instance(fast, cluster_id), REBOOT)
    assert T.pending_s == 60
    wall[0] += 0.5
    assert _get(fast, cluster_id, rem)["state"] == "PENDING"
    wall[0] += 0.5
    assert _get(fast, cluster_id, rem)["state"] == "RUNNING"


def test_remediations_and_their_timers_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    platform = _platform(Store(path))
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    platform.settings(remediation_timings={"pending_s": 10})
    rem = _create(platform, cluster_id, instance, VM_ONLY)
    platform.flush()
    platform._store.close()  # type: ignore[union-attr]

    again = Recording(store=Store(path), speed=0)
    assert _get(again, cluster_id, rem)["state"] == "PENDING"
    assert again.settings()["remediation_timings"]["pending_s"] == 10
    again.clock.advance(10 + T.running_s[VM_ONLY])
    assert _get(again, cluster_id, rem)["state"] == "SUCCEEDED"
    assert instance not in {n["instance_id"] for n in _nodes(again, cluster_id)}


# --- what the API refuses -------------------------------------------------------------------------


def test_requests_the_service_refuses() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    other = _instance(platform, cluster_id, "preemptible")
    # Unknown cluster, another owner's cluster, unknown instance, '-' for a create.
    assert _error(lambda: _create(platform, "c-nope", instance, VM_ONLY)).status == 404
    assert (
        _error(
            lambda: platform.create_remediation(
                "intruder", ACTOR, cluster_id, instance, RemediationCreateRequest(mode=VM_ONLY)
            )
        ).status
        == 404
    )
    unknown = _error(lambda: _create(platform, cluster_id, "i-nope", VM_ONLY))
    assert (unknown.status, unknown.param) == (404, "instance_id") and instance in unknown.message
    assert _error(lambda: _create(platform, cluster_id, "-", VM_ONLY)).status == 400

    rem = _create(platform, cluster_id, instance, VM_ONLY)
    # A second active remediation of one instance.
    second = _error(lambda: _create(platform, cluster_id, instance, REBOOT))
    assert second.status == 409 and rem["id"] in second.message
    assert _error(lambda: platform.raise_remediation(cluster_id, instance)).status == 409
    # Unknown remediation; one asked for under another instance.
    assert _error(lambda: platform.get_remediation(OWNER, cluster_id, instance, "r-nope")).status == 404
    assert _error(lambda: platform.get_remediation(OWNER, cluster_id, other, rem["id"])).status == 404
    assert _error(lambda: platform.get_remediation(OWNER, cluster_id, "i-nope", rem["id"])).status == 404
    # Approve and reject only what awaits approval.
    approve = _error(
        lambda: platform.approve_remediation(
            OWNER, ACTOR, cluster_id, instance, rem["id"], RemediationApproveRequest()
        )
    )
    assert approve.status == 409 and "PENDING_APPROVAL" in approve.message
    reject = _error(
        lambda: platform.reject_remediation(
            OWNER, ACTOR, cluster_id, instance, rem["id"], RemediationRejectRequest()
        )
    )
    assert reject.status == 409
    # HOST_POWER_CYCLE is never an approval override (400, whatever the remediation's state).
    raised = platform.raise_remediation(cluster_id, other)
    override = _error(
        lambda: platform.approve_remediation(
            OWNER, ACTOR, cluster_id, other, raised["id"], RemediationApproveRequest(mode=POWER_CYCLE)
        )
    )
    assert (override.status, override.param) == (400, "mode")
    assert _get(platform, cluster_id, raised)["state"] == "PENDING_APPROVAL"
    # Cancel: not once it runs, nor once it is over.
    platform.clock.advance(T.pending_s)
    running = _error(lambda: platform.cancel_remediation(OWNER, cluster_id, instance, rem["id"]))
    assert running.status == 409 and "RUNNING" in running.message
    platform.clock.advance(T.running_s[VM_ONLY])
    assert _error(lambda: platform.cancel_remediation(OWNER, cluster_id, instance, rem["id"])).status == 409
    # The replaced instance is gone: no new remediation of it (but its old ones can still be read).
    gone = _error(lambda: _create(platform, cluster_id, instance, REBOOT))
    assert gone.status == 404 and "deleted" in gone.message
    assert _get(platform, cluster_id, rem)["state"] == "SUCCEEDED"
    # A cluster being deleted takes no new remediation.
    platform.delete_cluster(OWNER, cluster_id)
    node = _instance(platform, cluster_id)
    assert _error(lambda: _create(platform, cluster_id, node, REBOOT)).status == 409


def test_listing_filters_orders_and_pages() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    first, second = [n["instance_id"] for n in _nodes(platform, cluster_id)][:2]
    made = []
    for _ in range(3):
        rem = _create(platform, cluster_id, first, REBOOT)
        made.append(platform.cancel_remediation(OWNER, cluster_id, first, rem["id"])["id"])
        platform.clock.advance(1)
    made.append(platform.raise_remediation(cluster_id, second)["id"])
    made.append(_create(platform, cluster_id, first, VM_ONLY)["id"])

    def listed(instance: str = "-", **query: Any) -> dict[str, Any]:
        return platform.list_remediations(OWNER, cluster_id, instance, **query)

    everything = listed()
    assert [r["id"] for r in everything["remediations"]] == made[::-1]  # newest first
    assert (everything["has_next"], everything["next_page_token"]) == (False, "")
    strict(RemediationListResponse, pydantic.TypeAdapter(dict[str, Any]).dump_json(everything).decode())
    assert [r["id"] for r in listed(order_by="create_time asc")["remediations"]] == made
    assert {r["id"] for r in listed(second)["remediations"]} == {made[3]}
    # Any of several states, as the SDK sends them (comma-separated) or repeated.
    assert {r["id"] for r in listed(state=["PENDING,PENDING_APPROVAL"])["remediations"]} == set(made[3:])
    assert {r["id"] for r in listed(state=["PENDING", "PENDING_APPROVAL"])["remediations"]} == set(made[3:])
    assert {r["id"] for r in listed(trigger=["REMEDIATION_TRIGGER_AUTOMATED"])["remediations"]} == {made[3]}
    assert {r["id"] for r in listed(first, mode=[VM_ONLY])["remediations"]} == {made[4]}

    # Pages of two, following the tokens: every remediation once, in order.
    seen, token, pages = [], None, 0
    while True:
        page = listed(page_size=2, page_token=token)
        pages += 1
        seen += [r["id"] for r in page["remediations"]]
        if not page["has_next"]:
            assert page["next_page_token"] == ""
            break
        token = page["next_page_token"]
    assert (seen, pages) == (made[::-1], 3)
    # A token stays valid while remediations are added (no repeats, no skips).
    page = listed(page_size=2)
    platform.cancel_remediation(OWNER, cluster_id, first, made[4])
    newer = _create(platform, cluster_id, first, REBOOT)["id"]
    rest = listed(page_size=10, page_token=page["next_page_token"])
    assert [r["id"] for r in rest["remediations"]] == made[::-1][2:] and newer not in seen
    # A page larger than the maximum is cut to it; refusals.
    assert remediations.MAX_PAGE_SIZE == 100
    assert _error(lambda: listed(state=["BROKEN"])).status == 400
    assert _error(lambda: listed(page_size=-1)).status == 400
    assert _error(lambda: listed(page_token="garbage!")).status == 400
    assert _error(lambda: listed(second, page_token=page["next_page_token"])).status == 400
    assert _error(lambda: listed(order_by="mode")).status == 400
    assert _error(lambda: listed("i-nope")).status == 404


def test_page_size_above_the_maximum_is_cut() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    instance = _instance(platform, cluster_id)
    for _ in range(remediations.MAX_PAGE_SIZE + 1):
        rem = _create(platform, cluster_id, instance, REBOOT)
        platform.cancel_remediation(OWNER, cluster_id, instance, rem["id"])
    page = platform.list_remediations(OWNER, cluster_id, "-", page_size=500)
    assert len(page["remediations"]) == remediations.MAX_PAGE_SIZE and page["has_next"]
    default = platform.list_remediations(OWNER, cluster_id, instance)
    assert len(default["remediations"]) == remediations.DEFAULT_PAGE_SIZE


# --- shapes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (shapes.Remediation, sdk_remediation.Remediation),
        (shapes.LinkedAlert, sdk_remediation.LinkedAlert),
        (shapes.LinkedAlertAnnotation, sdk_remediation.LinkedAlertAnnotation),
        (shapes.LinkedAlertAnnotationXid, sdk_remediation.LinkedAlertAnnotationXid),
        (shapes.LinkedAlertAnnotationXidEvent, sdk_remediation.LinkedAlertAnnotationXidEvent),
        (
            shapes.LinkedAlertAnnotationSlurmNodeUnavailable,
            sdk_remediation.LinkedAlertAnnotationSlurmNodeUnavailable,
        ),
        (shapes.RemediationList, RemediationListResponse),
    ],
    ids=lambda m: m.__name__,
)
def test_remediation_shapes_name_the_sdks_fields(
    ours: type[pydantic.BaseModel], theirs: type[pydantic.BaseModel]
) -> None:
    def fields(model: type[pydantic.BaseModel]) -> tuple[set[str], set[str]]:
        return set(model.model_fields), {n for n, f in model.model_fields.items() if f.is_required()}

    assert fields(ours) == fields(theirs)


def test_a_slurm_alert_parses_too() -> None:
    platform = _platform()
    cluster_id = _ready_cluster(platform)
    rem = _sdk(
        platform.raise_remediation(
            cluster_id,
            _instance(platform, cluster_id),
            alert="slurm_node_unavailable",
            reason="Kill task failed",
        )
    )
    [alert] = rem.linked_alerts or []
    assert alert.annotation.slurm_node_unavailable is not None
    assert alert.annotation.slurm_node_unavailable.reason == "Kill task failed"
    assert alert.severity == "PHC_SEVERITY_WARNING"


# --- over HTTP --------------------------------------------------------------------------------------


def test_http_errors_have_the_emulators_error_body(emu: Any, http: Any) -> None:
    client = http("key-alice")
    cluster = client.post("/v1/compute/clusters", json=create_body(num_gpus=8)).json()
    emu.admin.advance(700)
    instance = client.get(f"/v1/compute/clusters/{cluster['cluster_id']}").json()["gpu_worker_nodes"][0][
        "instance_id"
    ]
    base = f"/v1/compute/clusters/{cluster['cluster_id']}/instances"
    made = client.post(f"{base}/{instance}/remediations", json={"mode": REBOOT})
    assert made.status_code == 200, made.text
    rem = _sdk(made.json())
    again = client.post(f"{base}/{instance}/remediations", json={"mode": REBOOT})
    assert again.status_code == 409 and again.headers["x-should-retry"] == "false"
    assert again.json()["error"]["type"] == "conflict" and again.json()["error"]["param"] == "instance_id"
    bad_mode = client.post(f"{base}/{instance}/remediations", json={"mode": "REMEDIATION_MODE_FIX_IT"})
    assert bad_mode.status_code == 400 and bad_mode.json()["error"]["param"] == "mode"
    assert client.post(f"{base}/{instance}/remediations", json={}).status_code == 400
    missing = client.get(f"{base}/{instance}/remediations/r-nope")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
    # Approve and reject with no body at all are understood as empty ones (and refused here: not awaiting).
    assert client.post(f"{base}/{instance}/remediations/{rem.id}/approve").status_code == 409
    override = client.post(
        f"{base}/{instance}/remediations/{rem.id}/approve", json={"mode": POWER_CYCLE, "comment": "x"}
    )
    assert override.status_code == 400 and override.json()["error"]["param"] == "mode"
    listed = client.get(f"{base}/-/remediations", params={"state": "PENDING,RUNNING", "page_size": 1})
    assert listed.status_code == 200
    assert [r.id for r in strict(RemediationListResponse, listed.text).remediations] == [rem.id]
    repeated = client.get(f"{base}/-/remediations", params=[("state", "CANCELLED"), ("state", "PENDING")])
    assert [r["id"] for r in repeated.json()["remediations"]] == [rem.id]
    assert client.get(f"{base}/-/remediations", params={"state": "NOPE"}).status_code == 400
    cancelled = client.post(f"{base}/{instance}/remediations/{rem.id}/cancel")
    assert cancelled.status_code == 200 and _sdk(cancelled.json()).state == "CANCELLED"
    assert http("key-bob").get(f"{base}/-/remediations").status_code == 404


def test_the_sdk_lists_every_page(emu: Any, sdk: Any) -> None:
    client = sdk("key-alice")
    cluster = client.clusters.create(**create_body(num_gpus=8))
    emu.admin.advance(700)
    instance = client.clusters.retrieve(cluster.cluster_id).gpu_worker_nodes[0].instance_id
    made = []
    for _ in range(5):
        rem = client.clusters.remediations.create(instance, cluster_id=cluster.cluster_id, mode=REBOOT)
        client.clusters.remediations.cancel(rem.id, cluster_id=cluster.cluster_id, instance_id=instance)
        made.append(rem.id)
    seen: list[str] = []
    token: str | None = None
    while True:
        page = client.clusters.remediations.list(
            "-",
            cluster_id=cluster.cluster_id,
            page_size=2,
            state=["CANCELLED"],
            **({"page_token": token} if token else {}),
        )
        seen += [r.id for r in page.remediations]
        if not page.has_next:
            break
        token = page.next_page_token
    assert seen == made[::-1]
    node = client.clusters.retrieve(cluster.cluster_id).gpu_worker_nodes[0]
    assert node.latest_remediation is not None and node.latest_remediation.id == made[-1]


def test_the_admin_client_steers_remediations(emu: Any, http: Any, admin: Any) -> None:
    client = http("key-alice")
    cluster_id = client.post("/v1/compute/clusters", json=create_body(num_gpus=16)).json()["cluster_id"]
    admin.advance(700)
    first, second = [
        n["instance_id"] for n in client.get(f"/v1/compute/clusters/{cluster_id}").json()["gpu_worker_nodes"]
    ]
    assert (
        admin.settings(remediation_timings={"running_s": {REBOOT: 10}})["remediation_timings"]["running_s"][
            REBOOT
        ]
        == 10
    )
    shown = admin.set_auto_remediation(cluster_id, True, [first])
    assert shown["auto_remediation_enabled"] == {first: True, second: False}
    started = _sdk(admin.raise_remediation(cluster_id, first, mode=REBOOT, xid_code="48"))
    assert started.state == "PENDING" and started.trigger == "REMEDIATION_TRIGGER_AUTOMATED"
    failing = admin.remediation_outcome(started.id, "fail", "the VM did not boot")
    assert failing["state"] == "PENDING"
    waiting = _sdk(admin.raise_remediation(cluster_id, second, alert="slurm_node_unavailable", reason="down"))
    assert waiting.state == "PENDING_APPROVAL"
    assert _sdk(admin.remediation_outcome(waiting.id, "auto_resolve")).state == "AUTO_RESOLVED"
    admin.advance(T.pending_s + 10)
    records = {r["id"]: r for r in admin.remediations()}
    assert [h["state"] for h in records[started.id]["history"]] == ["PENDING", "RUNNING", "FAILED"]
    assert records[started.id]["error_message"] == "the VM did not boot"
    assert [h["state"] for h in records[waiting.id]["history"]] == ["PENDING_APPROVAL", "AUTO_RESOLVED"]
    assert records[started.id]["node_id"] and records[started.id]["replacement_instance_id"] is None
    refused = http(None).post(f"/_emulator/remediations/{waiting.id}/outcome", json={"outcome": "fail"})
    assert refused.status_code == 409
    unknown = http(None).post(
        "/_emulator/remediations", json={"cluster_id": cluster_id, "instance_id": "i-x"}
    )
    assert unknown.status_code == 404
