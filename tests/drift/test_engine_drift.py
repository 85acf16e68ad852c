"""``together-clusters drift`` and ``status`` end to end: real engine, real emulator, one deployed stack.

The tests share one deployed quickstart stack (see conftest.py); each first restores the cluster to the
code's shape out of band. The out-of-band deletion runs last because it cannot be undone without an ``up``.
"""

from __future__ import annotations

import json

import matplotlib
import matplotlib.image
import pytest

from tests.drift.conftest import GPU, REGION, Deployed, engine_env_for, free_port_url

matplotlib.use("Agg")

pytestmark = pytest.mark.engine


def test_in_sync_exits_0_and_leaves_the_state_untouched(deployed: Deployed):
    deployed.restore()
    before = deployed.files()
    proc = deployed.cli("drift")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Stack drifttest: in sync (no drift).")
    assert deployed.files() == before


def test_out_of_band_scale_is_drift_with_field_and_both_values(deployed: Deployed):
    deployed.restore()
    deployed.set_preemptible(16)
    before = deployed.files()

    proc = deployed.cli("drift")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "DRIFT FOUND (1 changed field)" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if "num_preemptible_gpus" in line)
    assert row.split() == ["quickstart", "together_clusters:Cluster", "num_preemptible_gpus", "8", "16"]

    as_json = deployed.cli("drift", "--json")
    assert as_json.returncode == 2, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["in_sync"] is False and data["missing"] == []
    assert [(d["resource"], d["field"], d["code"], d["live"]) for d in data["drift"]] == [
        ("quickstart", "num_preemptible_gpus", 8, 16)
    ]
    assert deployed.files() == before
    # The refresh ran on a copy: the real state still holds the deployed value.
    state = deployed.export()
    [cluster] = [
        r for r in state["deployment"]["resources"] if r["type"].endswith("together_clusters:Cluster")
    ]
    assert cluster["inputs"]["num_preemptible_gpus"] == 8


def test_preemption_and_shortfall_alone_are_information_not_drift(deployed: Deployed):
    deployed.restore()
    deployed.emu.admin.set_capacity(REGION, GPU, 0)  # nothing to refill from
    deployed.emu.admin.preempt(deployed.cluster_id, 1)
    deployed.wait_for("the preempted node to go", lambda c: c.allocated_preemptible_gpus == 0)

    proc = deployed.cli("drift")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "in sync" in proc.stdout
    assert "capacity shortfall: quickstart has 0 of 8 preemptible GPUs allocated (8 short" in proc.stdout
    assert "preemption churn: quickstart had 1 preemption since the last deployment" in proc.stdout

    data = json.loads(deployed.cli("drift", "--json").stdout)
    assert data["exit_code"] == 0 and data["drift"] == [] and data["missing"] == []
    assert data["info"]["capacity_shortfall"][0]["shortfall_gpus"] == 8
    assert data["info"]["preemption_churn"][0]["preemptions_since_deployment"] == 1


def test_status_reports_allocation_events_saving_and_draws_a_png(deployed: Deployed, tmp_path):
    deployed.restore()
    # Earlier tests may have left deleted nodes already: wait for this preemption's own.
    deleted_before = len(deployed.cluster().deleted_gpu_worker_nodes or [])
    deployed.emu.admin.preempt(deployed.cluster_id, 1)  # refilled from the pool after the grace period
    cluster = deployed.wait_for(
        "the refill after the preemption",
        lambda c: (
            c.allocated_preemptible_gpus == 8 and len(c.deleted_gpu_worker_nodes or []) > deleted_before
        ),
    )
    png = tmp_path / "capacity.png"  # look at it: pytest --basetemp=DIR keeps it
    before = deployed.files()

    proc = deployed.cli("status", "--price-per-gpu-hour", "2.5", "--png", str(png), "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    [status] = data["clusters"]
    assert status["resource"] == "quickstart" and status["cluster_id"] == deployed.cluster_id
    assert status["found"] is True and status["status"] == "Ready"
    assert (status["desired_preemptible_gpus"], status["allocated_preemptible_gpus"]) == (8, 8)
    assert (status["standard_nodes"], status["preemptible_nodes"]) == (1, 1)
    assert status["hourly_saving"] == pytest.approx(8 * 2.5 * 0.5)
    reasons = [e["reason"] for e in status["events"]]
    live_reasons = [e.reason for e in cluster.node_lifecycle_events or []]
    assert reasons.count("TogetherPreempted") == live_reasons.count("TogetherPreempted") >= 1
    assert "TogetherScaledUp" in reasons
    assert all(e["timestamp"] for e in status["events"])

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert deployed.files() == before

    text = deployed.cli("status", "--price-per-gpu-hour", "2.5")
    assert text.returncode == 0, text.stderr
    assert "8/8" in text.stdout and "$10.00" in text.stdout and "TogetherPreempted" in text.stdout


def test_api_down_exits_1_with_a_clear_message(deployed: Deployed):
    env = engine_env_for(deployed.state_dir.parent, free_port_url())
    before = deployed.files()
    proc = deployed.cli("drift", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "together-clusters drift: error:" in proc.stderr
    assert "pulumi refresh" in proc.stderr and "failed" in proc.stderr
    assert "127.0.0.1" in proc.stderr  # names the API address it could not reach
    assert deployed.files() == before

    status = deployed.cli("status", env=env)
    assert status.returncode == 1
    assert "the Together API failed" in status.stderr


def test_unknown_stack_and_bad_arguments_exit_1(deployed: Deployed):
    proc = deployed.cli("drift", stack="no-such-stack")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error" in proc.stderr
    bad = deployed.cli("drift", "--no-such-flag")
    assert bad.returncode == 1


def test_cluster_deleted_out_of_band_is_missing(deployed: Deployed):
    """Runs last: the cluster stays deleted."""
    deployed.restore()
    with deployed.api() as client:
        client.delete_cluster(deployed.cluster_id)
    before = deployed.files()

    proc = deployed.cli("drift")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "DRIFT FOUND (1 missing resource)" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if deployed.cluster_id in line)
    assert row.split() == ["quickstart", "together_clusters:Cluster", deployed.cluster_id]
    assert deployed.files() == before

    status = deployed.cli("status")
    assert status.returncode == 0, status.stderr
    assert "MISSING" in status.stdout
