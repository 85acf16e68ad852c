"""The official CLI as the oracle of the remediation API: every ``tg clusters remediations`` command runs
against the emulator as a real subprocess with ``--json``, and the SDK's own models parse every answer
strictly; every refusal is printed by ``tg``, which exits non-zero."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from together.types.clusters import Remediation, RemediationListResponse

from together_clusters.emulator.remediations import RemediationTimings
from together_clusters.emulator.server import RunningEmulator

from .conftest import create_body
from .strict import strict
from .test_tg_cli import KEY, TG, _run_tg, _tg

T = RemediationTimings()
REMEDIATIONS = ("clusters", "remediations")


def _remediation(raw: str) -> Remediation:
    return strict(Remediation, raw)


def _listing(raw: str) -> RemediationListResponse:
    return strict(RemediationListResponse, raw)


def _refused(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """What ``tg`` printed for a refused command; it must exit non-zero and name each of ``words``."""
    printed = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"tg should have failed:\n{printed}"
    for word in words:
        assert word in printed, f"{word!r} not in what tg printed:\n{printed}"
    return printed


def _cluster(emu: RunningEmulator, http: Any, num_gpus: int = 24) -> tuple[str, list[str]]:
    """A Ready cluster of the CLI's key, and its instances."""
    client = http(KEY)
    cluster_id = client.post("/v1/compute/clusters", json=create_body(num_gpus=num_gpus)).json()["cluster_id"]
    emu.admin.advance(700)
    nodes = client.get(f"/v1/compute/clusters/{cluster_id}").json()["gpu_worker_nodes"]
    return cluster_id, [n["instance_id"] for n in nodes]


def test_every_remediations_command_answers_as_the_sdk_documents(
    emu: RunningEmulator, http: Any, tmp_path: Path
) -> None:
    assert TG.exists(), f"the together package's tg entry point is not at {TG}"
    cluster_id, (first, second, third) = _cluster(emu, http)

    def tg(*args: str) -> str:
        return _tg(emu, tmp_path, *REMEDIATIONS, *args)

    def refused(*args: str) -> subprocess.CompletedProcess[str]:
        return _run_tg(emu, tmp_path, *REMEDIATIONS, *args)

    # create: a user's remediation starts PENDING.
    made = _remediation(tg("create", cluster_id, first, "--mode", "VM_ONLY", "--reason", "ECC errors"))
    assert (made.state, made.trigger, made.mode, made.reason) == (
        "PENDING",
        "REMEDIATION_TRIGGER_MANUAL",
        "REMEDIATION_MODE_VM_ONLY",
        "ECC errors",
    )
    assert (made.cluster_id, made.instance_id) == (cluster_id, first) and made.requested_by

    # list: the whole cluster, then one instance with a state filter of several values.
    assert [r.id for r in _listing(tg("list", cluster_id)).remediations] == [made.id]
    one = _listing(tg("list", cluster_id, "--instance-id", first, "--state", "PENDING", "--state", "RUNNING"))
    assert [r.id for r in one.remediations] == [made.id] and not one.has_next
    assert _listing(tg("list", cluster_id, "--instance-id", second)).remediations == []
    assert _listing(tg("list", cluster_id, "--state", "SUCCEEDED")).remediations == []

    # retrieve, then cancel while PENDING.
    assert _remediation(tg("retrieve", made.id)).model_dump() == made.model_dump()
    cancelled = _remediation(tg("cancel", made.id))
    assert cancelled.state == "CANCELLED" and cancelled.end_time is not None

    # approve an automated one (the health checks raise it), in another mode.
    raised = emu.admin.raise_remediation(cluster_id, second, xid_code="79")
    pending = _listing(tg("list", cluster_id, "--state", "PENDING_APPROVAL", "--trigger", "AUTOMATED"))
    [proposal] = pending.remediations
    assert proposal.id == raised["id"] and proposal.linked_alerts
    assert proposal.linked_alerts[0].annotation.xid is not None
    approved = _remediation(tg("approve", raised["id"], "--comment", "drained", "--mode", "REBOOT_VM"))
    assert (approved.state, approved.mode, approved.review_comment) == (
        "PENDING",
        "REMEDIATION_MODE_REBOOT_VM",
        "drained",
    )
    assert approved.reviewed_by and approved.review_time is not None

    # reject another.
    rejectable = emu.admin.raise_remediation(cluster_id, third)
    rejected = _remediation(tg("reject", rejectable["id"], "--comment", "false alarm"))
    assert (rejected.state, rejected.review_comment) == ("CANCELLED", "false alarm")

    # What the service refuses, each printed by tg with a non-zero exit.
    _refused(refused("create", cluster_id, "i-nope", "--mode", "REBOOT_VM"), "i-nope", "not found")
    _refused(refused("create", cluster_id, second, "--mode", "REBOOT_VM"), "active remediation")
    _refused(refused("approve", made.id), "PENDING_APPROVAL")  # cancelled: not awaiting approval
    _refused(refused("reject", approved.id, "--comment", "late"), "PENDING_APPROVAL")
    proposal_of_first = emu.admin.raise_remediation(cluster_id, first)
    _refused(refused("approve", proposal_of_first["id"], "--mode", "HOST_POWER_CYCLE"), "HOST_POWER_CYCLE")
    emu.admin.advance(T.pending_s)
    running = _remediation(tg("retrieve", approved.id))
    assert running.state == "RUNNING" and running.start_time is not None
    _refused(refused("cancel", approved.id), "RUNNING", "PENDING_APPROVAL or PENDING")
    emu.admin.advance(T.running_s["REMEDIATION_MODE_REBOOT_VM"])
    assert _remediation(tg("retrieve", approved.id)).state == "SUCCEEDED"
    _refused(refused("cancel", approved.id), "SUCCEEDED")
    _refused(refused("retrieve", "r-nope"), "not found")
    _refused(refused("list", cluster_id, "--instance-id", "i-nope"), "not found")
    _refused(refused("list", "c-nope"), "not found")


def test_tg_follows_the_next_page_token(emu: RunningEmulator, http: Any, tmp_path: Path) -> None:
    cluster_id, (instance, *_) = _cluster(emu, http, num_gpus=8)
    client = http(KEY)
    base = f"/v1/compute/clusters/{cluster_id}/instances/{instance}/remediations"
    made = []
    for _ in range(55):  # more than a page of the CLI's listing (50)
        rem = client.post(base, json={"mode": "REMEDIATION_MODE_REBOOT_VM"}).json()
        client.post(f"{base}/{rem['id']}/cancel")
        made.append(rem["id"])
    first = _listing(_tg(emu, tmp_path, *REMEDIATIONS, "list", cluster_id, "--state", "CANCELLED"))
    assert first.has_next and first.next_page_token and len(first.remediations) == 50
    rest = _listing(
        _tg(
            emu,
            tmp_path,
            *REMEDIATIONS,
            "list",
            cluster_id,
            "--state",
            "CANCELLED",
            "--after",
            first.next_page_token,
        )
    )
    assert not rest.has_next and rest.next_page_token == ""
    assert [r.id for r in first.remediations + rest.remediations] == made[::-1]
    # retrieve finds the oldest one by walking every page of the cluster-wide listing itself.
    oldest = json.loads(_tg(emu, tmp_path, *REMEDIATIONS, "retrieve", made[0]))
    assert oldest["id"] == made[0] and oldest["state"] == "CANCELLED"
