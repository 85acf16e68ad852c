"""``together-clusters drift`` and ``status`` end to end: real engine, real emulator, one deployed stack.

The tests share one deployed quickstart stack (see conftest.py); each first puts the cluster back in the
code's shape out of band. Every check is followed by the proof that it wrote nothing: the backend, the
project and the user's stack selection are byte for byte what they were, and so is ``pulumi stack export``.
The out-of-band deletion runs last because it cannot be undone without an ``up``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager

import matplotlib
import matplotlib.image
import pytest

from tests import _engine
from tests.cli.conftest import API_KEY, GPU, REGION, STACK, Deployed

matplotlib.use("Agg")

pytestmark = pytest.mark.engine

CLUSTER_ROW = ["quickstart", "together_clusters:Cluster"]


@contextmanager
def writes_nothing(deployed: Deployed) -> Iterator[None]:
    before, exported = deployed.files(), deployed.pulumi("stack", "export").stdout.encode()
    yield
    deployed.unchanged(before, exported)


def drift_rows(stdout: str) -> list[list[str]]:
    """The rows of the drift table of a text report."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Drift (live differs"))
    rows = []
    for line in lines[start + 3 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def test_in_sync_exits_0_and_writes_nothing(deployed: Deployed):
    deployed.restore()
    with writes_nothing(deployed):
        proc = deployed.cli("drift")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"Stack {STACK}: in sync (no drift).")


def test_out_of_band_scale_is_drift_with_field_code_and_live_value(deployed: Deployed):
    deployed.restore()
    deployed.set_preemptible(16)
    with writes_nothing(deployed):
        proc = deployed.cli("drift")
        as_json = deployed.cli("drift", "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "DRIFT FOUND (1 changed field)" in proc.stdout
    assert drift_rows(proc.stdout) == [[*CLUSTER_ROW, "num_preemptible_gpus", "8", "16"]]

    assert as_json.returncode == 2, as_json.stderr
    data = json.loads(as_json.stdout)
    [stack] = data["stacks"]
    assert data["exit_code"] == 2 and stack["in_sync"] is False and stack["missing"] == []
    assert [(d["resource"], d["field"], d["code"], d["live"]) for d in stack["drift"]] == [
        ("quickstart", "num_preemptible_gpus", 8, 16)
    ]


def test_out_of_band_scale_stays_drift_after_one_and_after_two_refreshes(deployed: Deployed):
    """Issue 10's reproduction: a plain `pulumi refresh` writes the live 16 into the state."""
    deployed.restore()
    deployed.set_preemptible(16)
    for refreshes in (1, 2):
        deployed.pulumi("refresh", *_engine.UP_FLAGS)
        [cluster] = [
            r for r in deployed.export()["deployment"]["resources"] if r.get("id") == deployed.cluster_id
        ]
        assert cluster["inputs"]["num_preemptible_gpus"] == 16  # the refresh absorbed the change
        with writes_nothing(deployed):
            proc = deployed.cli("drift")
        assert proc.returncode == 2, f"after {refreshes} refresh(es):\n{proc.stdout}{proc.stderr}"
        assert drift_rows(proc.stdout) == [[*CLUSTER_ROW, "num_preemptible_gpus", "8", "16"]]
        assert "Changes pending" not in proc.stdout
    # Put the cluster and the state back to the code: live 8 again, and an `up` writes 8 into the state.
    deployed.restore()
    deployed.pulumi("up", *_engine.UP_FLAGS)


def test_a_targeted_up_after_the_refresh_does_not_hide_the_drift(deployed: Deployed):
    """The history's last operation is an update, but the cluster's state was last written by a refresh."""
    deployed.restore()
    deployed.set_preemptible(16)
    try:
        deployed.pulumi("refresh", *_engine.UP_FLAGS)
        resources = deployed.export()["deployment"]["resources"]
        [stack_urn] = [r["urn"] for r in resources if r["type"] == "pulumi:pulumi:Stack"]
        deployed.pulumi("up", *_engine.UP_FLAGS, "--target", stack_urn)
        history = json.loads(deployed.pulumi("stack", "history", "--json").stdout)
        [cluster] = [
            r for r in deployed.export()["deployment"]["resources"] if r.get("id") == deployed.cluster_id
        ]
        assert history[0]["kind"] == "update" and cluster["inputs"]["num_preemptible_gpus"] == 16
        with writes_nothing(deployed):
            proc = deployed.cli("drift")
        said = [(h["kind"], h["startTime"], h.get("endTime"), h.get("resourceChanges")) for h in history]
        assert proc.returncode == 2, f"{proc.stdout}{proc.stderr}\nmodified {cluster.get('modified')}\n{said}"
        assert drift_rows(proc.stdout) == [[*CLUSTER_ROW, "num_preemptible_gpus", "8", "16"]]
    finally:
        deployed.restore()
        deployed.pulumi("up", *_engine.UP_FLAGS)


def test_code_change_not_deployed_is_pending_and_fails_only_with_the_flag(deployed: Deployed):
    deployed.restore()
    deployed.pulumi("config", "set", "numPreemptibleGpus", "16")
    try:
        with writes_nothing(deployed):
            proc = deployed.cli("drift")
            strict = deployed.cli("drift", "--fail-on-pending", "--json")
    finally:
        deployed.pulumi("config", "set", "numPreemptibleGpus", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"Stack {STACK}: in sync (no drift); 1 change pending.")
    assert "Drift (live differs" not in proc.stdout
    pending = proc.stdout[proc.stdout.index("Changes pending") :].splitlines()
    assert pending[3].split() == [*CLUSTER_ROW, "update", "num_preemptible_gpus", "8", "16"]

    assert strict.returncode == 3, strict.stdout + strict.stderr
    [stack] = json.loads(strict.stdout)["stacks"]
    assert stack["drift"] == [] and stack["result"] == "changes pending"
    assert [(p["field"], p["live"], p["code"]) for p in stack["pending"]] == [("num_preemptible_gpus", 8, 16)]


def test_a_refresh_that_only_saw_a_preemption_keeps_a_code_change_pending(deployed: Deployed):
    """Refreshes that rewrote nothing the code owns leave the last deployment's values trusted."""
    deployed.restore()
    deployed.emu.admin.set_capacity(REGION, GPU, 0)
    deployed.emu.admin.preempt(deployed.cluster_id, 1)
    deployed.wait_for("the preempted node to go", lambda c: c.allocated_preemptible_gpus == 0)
    deployed.pulumi("refresh", *_engine.UP_FLAGS)  # writes the new allocation (an output) into the state
    deployed.pulumi("config", "set", "numPreemptibleGpus", "16")
    try:
        with writes_nothing(deployed):
            proc = deployed.cli("drift")
    finally:
        deployed.pulumi("config", "set", "numPreemptibleGpus", "8")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 change pending" in proc.stdout and "Drift (live differs" not in proc.stdout


def test_preemption_and_shortfall_alone_are_information_not_drift(deployed: Deployed):
    deployed.restore()
    deployed.emu.admin.set_capacity(REGION, GPU, 0)  # nothing to refill from
    deployed.emu.admin.preempt(deployed.cluster_id, 1)
    deployed.wait_for("the preempted node to go", lambda c: c.allocated_preemptible_gpus == 0)

    with writes_nothing(deployed):
        proc = deployed.cli("drift", "--fail-on-pending")
        data = json.loads(deployed.cli("drift", "--json").stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "in sync" in proc.stdout
    assert "capacity shortfall: quickstart has 0 of 8 preemptible GPUs allocated (8 short" in proc.stdout
    assert "preemption churn: quickstart had 1 preemption since the state was written" in proc.stdout

    [stack] = data["stacks"]
    assert (
        stack["exit_code"] == 0 and stack["drift"] == [] and stack["missing"] == [] and stack["pending"] == []
    )
    assert stack["info"]["capacity_shortfall"][0]["shortfall_gpus"] == 8
    assert stack["info"]["preemption_churn"][0]["preemptions_since_deployment"] == 1
    # The emulator without its twin has no Kubernetes API: its workloads are not read, said on one line, and
    # that changes no exit code (it is information too).
    [unread] = stack["info"]["workloads_unread"]
    assert unread.startswith("quickstart: its Kubernetes API at https://") and "did not answer" in unread
    assert stack["info"]["stalled_for_capacity"] == []


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
    with writes_nothing(deployed):
        proc = deployed.cli("status", "--price-per-gpu-hour", "2.5", "--png", str(png), "--json")
        text = deployed.cli("status", "--price-per-gpu-hour", "2.5")
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

    assert text.returncode == 0, text.stderr
    assert "8/8" in text.stdout and "$10.00" in text.stdout and "TogetherPreempted" in text.stdout


def test_status_and_drift_take_key_and_endpoint_from_the_stack_config(deployed: Deployed):
    """As the provider does: `together:apiKey` and `together:baseUrl` first, the environment after.

    The key and endpoint stay in the stack config for the tests after this one (the same values as the
    environment's): the engine refreshes with the provider settings of the last deployment.
    """
    deployed.restore()
    deployed.pulumi("config", "set", "--secret", "together:apiKey", API_KEY)
    deployed.pulumi("config", "set", "together:baseUrl", deployed.emu.base_url)
    deployed.pulumi("up", *_engine.UP_FLAGS)
    bare = {k: v for k, v in deployed.env.items() if k not in ("TOGETHER_API_KEY", "TOGETHER_BASE_URL")}
    # The environment is only the fallback: a wrong one does not matter when the config says.
    wrong = {**bare, "TOGETHER_API_KEY": "someone-else", "TOGETHER_BASE_URL": "http://127.0.0.1:9"}
    with writes_nothing(deployed):
        status = deployed.cli("status", "--json", env=bare)
        drift = deployed.cli("drift", env=bare)
        status_wrong_env = deployed.cli("status", "--json", env=wrong)
    assert status.returncode == 0, status.stdout + status.stderr
    [cluster] = json.loads(status.stdout)["clusters"]
    assert cluster["found"] is True and cluster["allocated_preemptible_gpus"] == 8
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert status_wrong_env.returncode == 0, status_wrong_env.stdout + status_wrong_env.stderr
    assert json.loads(status_wrong_env.stdout)["clusters"][0]["found"] is True
    assert API_KEY not in status.stdout + status.stderr + drift.stdout + drift.stderr


def test_status_with_another_projects_key_exits_1_naming_the_projects(deployed: Deployed):
    """Before: the other project's key got a 404, the live cluster showed as 'MISSING (not found by the
    API)' and status exited 0."""
    deployed.restore()
    other = "tgp_v1_another-project-key"
    bare = {**deployed.env, "TOGETHER_API_KEY": other}
    deployed.pulumi("config", "set", "--secret", "together:apiKey", other)
    try:
        with writes_nothing(deployed):
            status = deployed.cli("status", env=bare)
    finally:
        deployed.pulumi("config", "set", "--secret", "together:apiKey", API_KEY)
    assert status.returncode == 1, status.stdout + status.stderr
    [message] = status.stderr.splitlines()
    assert f"cluster {deployed.cluster_id}" in message and "which cannot see it" in message
    assert "together:apiKey" in message and "MISSING" not in status.stdout


def test_api_down_exits_1_with_the_cause_on_one_line(deployed: Deployed):
    deployed.restore()
    # Every API request answered 503 at once (no Retry-After wait): the provider gives up after its retries.
    deployed.emu.admin.add_fault(status=503, count=10_000, retry_after=0, message="down for maintenance")
    try:
        with writes_nothing(deployed):
            proc = deployed.cli("drift")
            status = deployed.cli("status")
    finally:
        deployed.emu.admin.clear_faults()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"Stack {STACK}: ERROR: ")]
    assert "503" in line and "down for maintenance" in line
    assert "Traceback" not in proc.stdout

    assert status.returncode == 1
    [message] = status.stderr.splitlines()
    assert (
        message.startswith("together-clusters status: error: the Together API failed:") and "503" in message
    )


def test_unknown_stack_wrong_passphrase_and_bad_arguments_exit_1_with_the_cause(deployed: Deployed):
    with writes_nothing(deployed):
        unknown = deployed.cli("drift", stack="no-such-stack")
        wrong = deployed.cli("drift", env={**deployed.env, "PULUMI_CONFIG_PASSPHRASE": "not-the-passphrase"})
        bad = deployed.cli("drift", "--no-such-flag")
    assert unknown.returncode == 1, unknown.stdout + unknown.stderr
    assert "Stack no-such-stack: ERROR: " in unknown.stdout and "no-such-stack" in unknown.stdout
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    [line] = [ln for ln in wrong.stdout.splitlines() if ln.startswith(f"Stack {STACK}: ERROR: ")]
    assert "passphrase" in line
    assert bad.returncode == 1


def test_fleet_of_three_where_one_drifted_names_only_that_one(deployed: Deployed, tmp_path):
    deployed.restore()
    others = {"fleet-b": "drift-fleet-b", "fleet-c": "drift-fleet-c"}
    ids = {}
    try:
        for stack, cluster_name in others.items():
            _engine.run_pulumi(
                ["stack", "init", stack, "--no-select"], cwd=deployed.project, env=deployed.env, check=True
            )
            deployed.pulumi("config", "set", "clusterName", cluster_name, stack=stack)
            deployed.pulumi("up", *_engine.UP_FLAGS, stack=stack)
            [cluster] = [
                r for r in deployed.export(stack)["deployment"]["resources"] if r["type"].endswith(":Cluster")
            ]
            ids[stack] = cluster["id"]
        with deployed.api() as client:
            from together_clusters.provider.models import ClusterUpdateRequest

            client.update_cluster(ids["fleet-b"], ClusterUpdateRequest(num_preemptible_gpus=0))
        junit, markdown = tmp_path / "drift.xml", tmp_path / "drift.md"
        with writes_nothing(deployed):
            proc = deployed.cli(
                "drift", "--stack", "fleet-b", "--stack", "fleet-c", "--json",
                "--junit", str(junit), "--markdown", str(markdown),
            )  # fmt: skip
            every = deployed.cli("drift", "--all-stacks", stack=None)
    finally:
        for stack in others:
            _engine.run_pulumi(
                ["destroy", *_engine.UP_FLAGS, "--stack", stack], cwd=deployed.project, env=deployed.env
            )
            _engine.run_pulumi(["stack", "rm", "--yes", stack], cwd=deployed.project, env=deployed.env)

    assert proc.returncode == 2, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["exit_code"] == 2
    assert data["summary"] == {
        "in_sync": ["fleet-c", STACK],
        "drift": ["fleet-b"],
        "changes_pending": [],
        "error": [],
    }
    by_stack = {s["stack"]: s for s in data["stacks"]}
    assert [(d["field"], d["code"], d["live"]) for d in by_stack["fleet-b"]["drift"]] == [
        ("num_preemptible_gpus", 8, 0)
    ]

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        "3",
        "1",
        "0",
    )
    failed = [c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None]
    assert failed == ["stack fleet-b"]

    summary = markdown.read_text()
    assert summary.startswith("## Drift check: ❌ drift in 1 stack of 3 (exit 2)")
    assert "| fleet-b | ❌ drift | 1 | 0 | 0 |" in summary
    assert summary.count("**Drift (live differs") == 1

    assert every.returncode == 2, every.stdout + every.stderr
    table = every.stdout[every.stdout.index("Summary of 3 stacks (exit 2):") :].splitlines()[3:]
    assert sorted((row.split()[0], row.split()[1]) for row in table) == [
        (STACK, "in"),
        ("fleet-b", "drift"),
        ("fleet-c", "in"),
    ]


def test_cluster_deleted_out_of_band_is_missing(deployed: Deployed):
    """Runs last: the cluster stays deleted."""
    deployed.restore()
    with deployed.api() as client:
        client.delete_cluster(deployed.cluster_id)
    with writes_nothing(deployed):
        proc = deployed.cli("drift")
        status = deployed.cli("status")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "DRIFT FOUND (1 missing resource)" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if deployed.cluster_id in line)
    assert row.split() == [*CLUSTER_ROW, deployed.cluster_id]

    assert status.returncode == 0, status.stderr
    assert "MISSING" in status.stdout
