"""The Cluster resource under the real Pulumi engine, against the emulator (clock sped up).

One stack of the quickstart program goes through a user's whole story: up, no-op preview,
in-place update, replacement, refused changes, drift seen and not seen, faults survived, secrets
kept out of the state, failed creates cleaned up, destroy.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests import _engine
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.models import ClusterUpdateRequest

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "tgp_v1_engine-test-secret-key-0123456789"
PREVIEW = ["preview", *_engine.PREVIEW_FLAGS]
UP = ["up", *_engine.UP_FLAGS]


class Stack(_engine.ProjectStack):
    """A copy of the top-level quickstart project with its own state, run through scripts/pulumi."""

    def __init__(self, workdir: Path, base_url: str, name: str = "test") -> None:
        self.dir = workdir / "project"
        self.dir.mkdir(parents=True)
        pulumi_yaml = (ROOT / "Pulumi.yaml").read_text()
        pulumi_yaml = re.sub(r"(?m)^main: .*\n", "", pulumi_yaml)
        (self.dir / "Pulumi.yaml").write_text(pulumi_yaml)
        shutil.copy(ROOT / "examples" / "quickstart" / "__main__.py", self.dir / "__main__.py")
        # The program runs in the project's .venv through PULUMI_RUNTIME_VIRTUALENV, as with scripts/pulumi.
        self.env = _engine.engine_env(
            workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY}
        )
        self.run("stack", "init", name, check=True)

    def up(self):
        return self.run(*UP)


@pytest.fixture(scope="module")
def api(emu):
    with TogetherClient(api_key=API_KEY, base_url=emu.base_url) as client:
        yield client


@pytest.fixture(scope="module")
def stack(emu, tmp_path_factory):
    stack = Stack(tmp_path_factory.mktemp("quickstart"), emu.base_url)
    proc = stack.up()
    assert proc.returncode == 0, _engine.output(proc)
    yield stack
    stack.run("destroy", *_engine.UP_FLAGS)


def _server_cluster(api: TogetherClient, cluster_id: str):
    return api.get_cluster(cluster_id)


def test_up_creates_a_ready_cluster_and_preview_is_clean(stack, api, emu):
    outs = stack.outputs()
    assert outs["status"] == "Ready"
    assert outs["num_gpus"] == 8 and outs["desired_preemptible_gpus"] == 8
    cluster = _server_cluster(api, outs["cluster_id"])
    assert cluster.cluster_name == "quickstart-test"
    assert cluster.desired_preemptible_gpus == 8

    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)


def test_progress_is_shown_while_waiting(stack):
    # The first `up` printed the provider's progress; a fresh create shows it again.
    stack.config("clusterName", "quickstart-progress")
    proc = stack.up()
    assert proc.returncode == 0, _engine.output(proc)
    assert "waiting for cluster" in proc.stdout + proc.stderr
    stack.run("config", "rm", "clusterName", check=True)
    assert stack.up().returncode == 0


def test_preemptible_8_to_16_updates_in_place(stack, api):
    before = stack.outputs()["cluster_id"]
    stack.config("numPreemptibleGpus", 16)
    preview = stack.run(*PREVIEW, "--diff")
    assert preview.returncode == 0, _engine.output(preview)
    assert "num_preemptible_gpus" in preview.stdout
    assert "replace" not in preview.stdout.lower().split("resources:")[-1]
    proc = stack.up()
    assert proc.returncode == 0, _engine.output(proc)
    outs = stack.outputs()
    assert outs["cluster_id"] == before
    assert api.get_cluster(before).desired_preemptible_gpus == 16


def test_refused_changes_fail_at_preview_and_touch_nothing(stack, api, emu):
    cluster_id = stack.outputs()["cluster_id"]
    before = api.get_cluster(cluster_id)

    # 8 standard + 16 preemptible -> 16 standard + 8 preemptible: a conversion.
    stack.config("numGpus", 16)
    stack.config("numPreemptibleGpus", 8)
    for command in (PREVIEW, UP):
        proc = stack.run(*command)
        assert proc.returncode != 0
        assert "convert preemptible nodes into standard ones" in proc.stdout + proc.stderr
        assert "Change one class per update" in proc.stdout + proc.stderr

    stack.config("numGpus", 0)
    stack.config("numPreemptibleGpus", 16)
    proc = stack.run(*UP)
    assert proc.returncode != 0
    assert "num_gpus is 0: a cluster needs at least one standard node" in proc.stdout + proc.stderr

    after = api.get_cluster(cluster_id)
    assert (after.num_gpus, after.desired_preemptible_gpus) == (
        before.num_gpus,
        before.desired_preemptible_gpus,
    )
    stack.config("numGpus", 8)
    stack.config("numPreemptibleGpus", 16)
    assert stack.run(*PREVIEW, "--expect-no-changes").returncode == 0


def test_out_of_band_change_is_drift_but_shortfall_and_preemption_are_not(stack, api, emu):
    cluster_id = stack.outputs()["cluster_id"]

    emu.admin.preempt(cluster_id, 1)
    emu.admin.set_capacity("us-central-8", "H100_SXM", 0)
    emu.admin.advance(900)
    proc = stack.run(*PREVIEW, "--refresh", "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)

    api.update_cluster(cluster_id, ClusterUpdateRequest(num_preemptible_gpus=24))
    proc = stack.run(*PREVIEW, "--refresh", "--expect-no-changes", "--diff")
    assert proc.returncode == _engine.EXIT_CHANGES_PROPOSED, _engine.output(proc)
    assert "num_preemptible_gpus" in proc.stdout

    # Bring the cluster back to what the code says.
    emu.admin.set_capacity("us-central-8", "H100_SXM", 64)
    assert stack.run("refresh", *_engine.UP_FLAGS).returncode == 0
    assert stack.up().returncode == 0
    assert api.get_cluster(cluster_id).desired_preemptible_gpus == 16
    assert stack.run(*PREVIEW, "--refresh", "--expect-no-changes").returncode == 0


def test_injected_429_and_503_during_up_are_survived(stack, api, emu):
    cluster_id = stack.outputs()["cluster_id"]
    stack.config("numPreemptibleGpus", 24)
    emu.admin.add_fault(status=429, count=2, method="GET", retry_after=1)
    emu.admin.add_fault(status=503, count=2, method="PUT", retry_after=1)
    proc = stack.up()
    assert proc.returncode == 0, _engine.output(proc)
    assert api.get_cluster(cluster_id).desired_preemptible_gpus == 24


def test_state_holds_neither_the_api_key_nor_the_kubeconfig(stack, api):
    outs = stack.outputs()
    kube_config = outs["kube_config"]
    token = re.search(r"token:\s*(\S+)", kube_config)
    assert token, "the emulator's kubeconfig carries a bearer token"
    state_text = stack.run("stack", "export", check=True).stdout
    assert API_KEY not in state_text
    assert kube_config not in state_text
    assert token.group(1) not in state_text
    shown = stack.run("stack", "output", "kube_config", check=True).stdout
    assert "secret" in shown.lower() and token.group(1) not in shown


def test_region_change_replaces_naming_the_field(stack, api, emu):
    old_id = stack.outputs()["cluster_id"]
    stack.config("region", "us-east-2")
    preview = stack.run(*PREVIEW, "--diff")
    assert preview.returncode == 0, _engine.output(preview)
    assert "replace" in preview.stdout
    assert "region" in preview.stdout
    proc = stack.up()
    assert proc.returncode == 0, _engine.output(proc)
    new = stack.outputs()
    assert new["cluster_id"] != old_id
    assert api.get_cluster(new["cluster_id"]).region == "us-east-2"
    live = [c for c in emu.admin.clusters() if c["status"] != "Deleting"]
    assert [c["cluster_id"] for c in live] == [new["cluster_id"]]


def test_cluster_deleted_out_of_band_leaves_state_on_refresh(stack, api, emu):
    cluster_id = stack.outputs()["cluster_id"]
    api.delete_cluster(cluster_id)
    emu.admin.advance(3600)
    proc = stack.run("refresh", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    types = [r["type"] for r in _engine.stack_resources(stack.dir, stack.env)]
    assert "pulumi-python:dynamic/together_clusters:Cluster" not in types
    # The next up makes it again.
    assert stack.up().returncode == 0
    assert api.get_cluster(stack.outputs()["cluster_id"]).status == "Ready"


def test_create_that_never_gets_ready_leaves_no_cluster(emu, tmp_path):
    doomed = Stack(tmp_path, emu.base_url, name="doomed")
    doomed.config("clusterName", "never-ready")
    emu.admin.add_provisioning_fault("acceptance_tests_failed", count=1)
    proc = doomed.up()
    assert proc.returncode != 0
    assert "CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED" in proc.stdout + proc.stderr
    emu.admin.advance(3600)
    assert [c for c in emu.admin.clusters() if c["cluster_name"] == "never-ready"] == []
    assert _engine.stack_resources(doomed.dir, doomed.env) == [] or all(
        r["type"] != "pulumi-python:dynamic/together_clusters:Cluster"
        for r in _engine.stack_resources(doomed.dir, doomed.env)
    )


def test_destroy_leaves_the_emulator_empty(stack, emu):
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    emu.admin.advance(3600)
    assert [c for c in emu.admin.clusters() if c["cluster_name"].startswith("quickstart-")] == []


def test_api_key_from_secret_stack_config(emu, tmp_path):
    keyed = Stack(tmp_path, emu.base_url, name="keyed")
    del keyed.env["TOGETHER_API_KEY"]
    keyed.config("clusterName", "keyed-by-config")
    keyed.run("config", "set", "--secret", "together:apiKey", API_KEY, check=True)
    proc = keyed.up()
    assert proc.returncode == 0, _engine.output(proc)
    state_text = keyed.run("stack", "export", check=True).stdout
    assert API_KEY not in state_text
    assert API_KEY not in (keyed.dir / "Pulumi.keyed.yaml").read_text()
    proc = keyed.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
