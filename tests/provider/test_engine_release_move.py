"""A stack written by a release moves its ``Cluster`` to the plugin's ``together:index:Cluster`` under the real
engine (issue 39, part 4): the checked-in state of test_engine_release_state (``old_state/release-2d0b321.json``:
the dynamic type, snake_case inputs and outputs, the pickled ``ClusterProvider``, a Volume the cluster uses and
a CheckpointStore on a rendering Kubernetes provider), imported as that test imports it, with the release's
program changed as docs/plugin.md says: the cluster declared on the native type under the same name with one
``Alias(type_=<the dynamic type>)``, nothing else changed. The preview is all 'same'; ``up --refresh
--run-program`` keeps the id and sends the API no create, update or delete; a change of
``numPreemptibleGpus`` afterwards is one PUT in place; destroy deletes the cluster once (and the Volume
through its pickled provider). test_engine_native_move does the same on a state made by today's dynamic
provider; this one is the state a user's stack holds."""

from __future__ import annotations

import json
import re

import pytest

from tests import _engine
from tests.faultproxy import FaultProxy
from tests.provider.old_state import record_release as record
from tests.provider.test_engine_native import PLUGIN_DIR, PREVIEW, UP
from tests.provider.test_engine_native_move import CLUSTERS, NATIVE_TYPE, _cluster_calls
from tests.provider.test_engine_release_state import (
    CLUSTER_TYPE,
    KUBERNETES_PROVIDER_TYPE,
    VOLUME_TYPE,
    ReleaseStack,
    _records,
    _resource,
    _summary,
    import_release_state,
)

pytestmark = pytest.mark.engine

# The release's cluster, as record_release.PROGRAM declares it...
RELEASE_CLUSTER = f'''cluster = Cluster(
    "cluster",
    ClusterArgs(
        cluster_name="{record.CLUSTER_NAME}",
        region="{record.REGION}",
        gpu_type="H100_SXM",
        num_gpus=8,
        num_preemptible_gpus=8,
        volume_id=volume.volume_id,
    ),
)
'''
# ...and the same cluster on the native type: the schema's camelCase names, the dynamic type as the one alias.
NATIVE_CLUSTER = f'''cluster = pulumi.CustomResource(
    "{NATIVE_TYPE}",
    "cluster",
    {{
        "clusterName": "{record.CLUSTER_NAME}",
        "region": "{record.REGION}",
        "gpuType": "H100_SXM",
        "numGpus": 8,
        "numPreemptibleGpus": config.get_int("numPreemptibleGpus") if config.get_int("numPreemptibleGpus") is not None else 8,
        "volumeId": volume.volume_id,
        "status": None,
        "kubeConfig": None,
    }},
    pulumi.ResourceOptions(aliases=[pulumi.Alias(type_="{CLUSTER_TYPE}")]),
)
'''
assert RELEASE_CLUSTER in record.PROGRAM and "cluster.cluster_id" in record.PROGRAM
# The stack output was the cluster's id: ``id`` is that on either type, before and after a refresh.
NATIVE_PROGRAM = record.PROGRAM.replace(RELEASE_CLUSTER, NATIVE_CLUSTER).replace(
    "cluster.cluster_id", "cluster.id"
)


@pytest.fixture(scope="module")
def proxy(emu):
    with FaultProxy(upstream=emu.base_url) as running:
        yield running


@pytest.fixture(scope="module")
def stack(emu, proxy, tmp_path_factory) -> ReleaseStack:
    """The release's state imported, its program declaring the cluster on the native type, the plugin named."""
    stack = import_release_state(tmp_path_factory.mktemp("release-move"), emu, proxy.url)
    (stack.dir / "__main__.py").write_text(NATIVE_PROGRAM)
    with (stack.dir / "Pulumi.yaml").open("a") as pulumi_yaml:
        pulumi_yaml.write(
            f"plugins:\n  providers:\n    - name: together\n      path: {json.dumps(str(PLUGIN_DIR))}\n"
        )
    return stack


def _ops(stack: ReleaseStack, *args: str) -> list[tuple[str, str]]:
    """The steps of ``pulumi preview --json ARGS``: (op, type) each."""
    preview = stack.run(*PREVIEW, "--json", *args)
    assert preview.returncode == 0, _engine.output(preview)
    return [(step["op"], step["urn"].rsplit("::", 2)[-2]) for step in json.loads(preview.stdout)["steps"]]


def _live(emu) -> list[str]:
    return [c["cluster_id"] for c in emu.admin.clusters() if c["status"] != "Deleting"]


def test_the_preview_of_the_move_is_all_same(stack):
    ops = _ops(stack, "--show-sames")
    assert ("same", NATIVE_TYPE) in ops and ("same", VOLUME_TYPE) in ops, ops
    assert [op for op in ops if op[0] != "same"] == [], ops
    assert CLUSTER_TYPE not in [type_ for _, type_ in ops], ops
    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)


def test_up_refreshing_through_the_program_moves_it_with_no_call_that_changes(stack, emu, proxy):
    before_state = stack.exported()
    before = len(proxy.requests)
    # The refresh of the rendered claim needs REFRESH_ENV, which pulumi-kubernetes also reads into the inputs
    # of its provider when the program runs: that provider's one change, and the test setup's, not the move's.
    stack.env.update(record.REFRESH_ENV)
    proc = stack.run(*UP, "--refresh", "--run-program")
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [], proxy.requests[before:]
    summary = _summary(proc.stdout)
    assert summary[0] == "~ 1 updated" and re.fullmatch(r"\d+ unchanged", summary[1]), _engine.output(proc)
    assert len(summary) == 2, _engine.output(proc)
    assert re.search(
        r"pulumi:providers:kubernetes k8s updated .*\[diff: \+skipUpdateUnreachable\]$", proc.stdout, re.M
    )
    state = stack.exported()
    k8s = _resource(before_state, KUBERNETES_PROVIDER_TYPE)
    assert _resource(state, KUBERNETES_PROVIDER_TYPE)["inputs"] == k8s["inputs"] | {
        "skipUpdateUnreachable": "true"
    }
    unmoved = {
        urn: r
        for urn, r in _records(before_state).items()
        if r["type"] not in (CLUSTER_TYPE, KUBERNETES_PROVIDER_TYPE)
    }
    # Nothing else changed, but that an update records each input's dependencies (none) where a release's
    # refresh recorded no map.
    after = {urn: _records(state)[urn] for urn in unmoved}
    for record_after in after.values():
        assert not any(record_after.pop("propertyDependencies", {}).values()), record_after
    assert after == unmoved
    assert not [r for r in state["deployment"]["resources"] if r["type"] == CLUSTER_TYPE]
    moved = _resource(state, NATIVE_TYPE)
    assert moved["id"] == stack.cluster_id and "::pulumi:providers:together::default" in moved["provider"]
    outputs = moved["outputs"]
    assert "__provider" not in outputs and outputs["clusterId"] == stack.cluster_id, sorted(outputs)
    assert outputs["volumeId"] == stack.volume_id and outputs["status"] == "Ready", sorted(outputs)
    assert stack.cluster_id in _live(emu)
    assert stack.outputs()["cluster_id"] == stack.cluster_id
    proc = stack.run("refresh", *_engine.UP_FLAGS, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [], proxy.requests[before:]


def test_a_change_of_preemptible_gpus_afterwards_is_one_update_in_place(stack, emu, proxy):
    stack.config("numPreemptibleGpus", 0)
    ops = _ops(stack)
    assert ("update", NATIVE_TYPE) in ops and not [op for op, _ in ops if op not in ("same", "update")], ops
    before = len(proxy.requests)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [("PUT", f"{CLUSTERS}/{stack.cluster_id}")], proxy.requests[
        before:
    ]
    assert _resource(stack.exported(), NATIVE_TYPE)["id"] == stack.cluster_id
    assert [
        c["desired_preemptible_gpus"] for c in emu.admin.clusters() if c["cluster_id"] == stack.cluster_id
    ] == [0]
    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)


def test_destroy_deletes_the_moved_cluster_once(stack, emu, proxy):
    before = len(proxy.requests)
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    deletes = [
        call for call in _cluster_calls(proxy, before) if call[1].startswith(f"{CLUSTERS}/{stack.cluster_id}")
    ]
    assert deletes == [("DELETE", f"{CLUSTERS}/{stack.cluster_id}")], proxy.requests[before:]
    assert _engine.stack_resources(stack.dir, stack.env) == []
    assert not stack.claim_file.exists()
    emu.admin.advance(record.SETTLE_S)
    assert [c for c in emu.admin.clusters() if c["cluster_id"] == stack.cluster_id] == []
    assert [v for v in emu.admin.volumes() if v["volume_id"] == stack.volume_id] == []
