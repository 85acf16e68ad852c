"""``drill --remediation MODE`` before it touches anything, on a fake Kubernetes client and a fake compute API:
the node of either class and its instance, the plan (mode, instance, pods and workloads hit, the capacity the
mode costs), the pre-check, the refusal of an instance already under remediation, ``--dry-run`` asking for
no remediation, and the exit code of a remediation that did not succeed."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill import command, modes, runner, safety
from together_clusters.cli.drill.report import DrillReport, Outcome, RemediationReport, WorkloadReport
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.main import main
from together_clusters.errors import DrillError
from together_clusters.provider import client as provider_client

from .test_drill_safety import FakeApi, FakeCore, model, node, pod

CLUSTER = "c-7f3a"


class AnyClassCore(FakeCore):
    """FakeCore that also answers an existence selector (``key``, as the remediation drill lists nodes)."""

    def list_node(self, label_selector: str = "", **_: Any) -> Any:
        if label_selector and "=" not in label_selector:
            items = [n for n in self.nodes if label_selector in n["metadata"]["labels"]]
            return model({"items": items}, "V1NodeList")
        return super().list_node(label_selector)


def anywhere(name: str, on: str, gpus: int = 0) -> dict[str, Any]:
    """A Deployment's pod that may run on a node of either class."""
    found = pod(name, on, gpus=gpus, owner="ReplicaSet")
    found["spec"]["nodeSelector"] = {}
    return found


def worker(host_name: str, instance_id: str) -> SimpleNamespace:
    return SimpleNamespace(host_name=host_name, instance_id=instance_id)


class FakeCompute:
    """What TogetherClient answers for one cluster; records every remediation asked for."""

    base_url = "https://api.together.example"

    def __init__(self, workers: list[SimpleNamespace], active: list[Any] | None = None) -> None:
        self.workers, self.active, self.created = workers, active or [], []
        self.listed: list[tuple[str, str, Any]] = []

    def __call__(self, api_key: str | None = None, base_url: str | None = None) -> FakeCompute:
        return self

    def __enter__(self) -> FakeCompute:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def get_cluster(self, cluster_id: str) -> Any:
        assert cluster_id == CLUSTER
        return SimpleNamespace(gpu_worker_nodes=self.workers)

    def list_remediations(self, cluster_id: str, instance_id: str = "-", **filters: Any) -> list[Any]:
        self.listed.append((cluster_id, instance_id, filters.get("states")))
        return self.active

    def create_remediation(self, *args: Any, **kwargs: Any) -> Any:
        self.created.append((args, kwargs))
        raise AssertionError("no remediation may be created here")


def plan_of(core: FakeCore, victim: str, mode: str, active: str = "") -> safety.Plan:
    rem = safety.RemediationPlan(modes.REMEDIATION_MODES[mode], CLUSTER, f"i-{victim}", "https://api", active)
    return safety.read_plan(
        core,
        context="prod-east",
        server="https://k8s.example",
        mode="remediation",
        node=victim,
        termination=mode,
        watched_namespace=None,
        grace_seconds=300,
        timeout_seconds=900,
        remediation=rem,
    )


# --- pure: the plan and the pre-check -----------------------------------------------------------------


def test_a_standard_node_can_be_planned_and_its_pods_placed_on_a_preemptible_node() -> None:
    core = AnyClassCore(
        [node("std-1", "standard"), node("pre-1", "preemptible")], [anywhere("web-0", "std-1")]
    )
    plan = plan_of(core, "std-1", "reboot-vm")
    assert plan.refusal == ""
    text = safety.plan_text(plan)
    assert f"instance: i-std-1 (cluster {CLUSTER})" in text
    assert (
        "mode:     remediation: ask the compute API (https://api) for a manual reboot-vm remediation" in text
    )
    assert "reboots the VM in place" in text
    assert "ml/web-0: replaced by ReplicaSet/web-0-owner, room on pre-1" in text
    assert "capacity: 8 GPU(s) out until the node is back" in text


@pytest.mark.parametrize(
    ("mode", "lost"),
    [
        ("evict-without-replacement", "capacity: LOST for good: 8 GPU(s)"),
        ("host-aware", "capacity: LOST: 8 GPU(s) from the quarantine until a new instance joins"),
    ],
)
def test_the_modes_that_lose_capacity_say_so(mode: str, lost: str) -> None:
    core = AnyClassCore([node("pre-1", "preemptible"), node("pre-2", "preemptible")], [pod("t-0", "pre-1")])
    assert lost in safety.plan_text(plan_of(core, "pre-1", mode))


@pytest.mark.parametrize("mode", list(modes.REMEDIATION_MODES))
def test_every_mode_is_refused_when_no_other_node_could_take_a_pod(mode: str) -> None:
    core = AnyClassCore([node("std-1", "standard"), node("pre-1", "preemptible")], [pod("train-0", "pre-1")])
    plan = plan_of(core, "pre-1", mode)
    assert plan.refusal.startswith("refusing to drill pre-1: no other node could take pod ml/train-0")
    assert "check:    refused: refusing to drill pre-1" in safety.plan_text(plan)


def test_an_instance_under_remediation_is_refused_on_one_line_before_the_placement() -> None:
    core = AnyClassCore([node("pre-1", "preemptible"), node("pre-2", "preemptible")], [pod("t-0", "pre-1")])
    plan = plan_of(core, "pre-1", "vm-only", active="rem-9 (host-aware, QUARANTINED)")
    assert plan.refusal == (
        "refusing to drill pre-1: its instance i-pre-1 already has an active remediation rem-9 (host-aware, "
        "QUARANTINED) (the API allows one at a time); wait for it to end, or choose another --node"
    )
    active = SimpleNamespace(id="rem-9", mode="REMEDIATION_MODE_HOST_AWARE", state="QUARANTINED")
    assert safety.active_text([active]) == "rem-9 (host-aware, QUARANTINED)"
    assert safety.active_text([]) == ""


def test_the_instance_is_found_through_the_platforms_node_name_rule() -> None:
    workers = [worker("GPU_Node.7", "i-7"), worker("gpu-node-8", "i-8"), worker("", "i-x")]
    assert safety.instance_of("gpu-node.7", CLUSTER, workers) == "i-7"
    with pytest.raises(DrillError) as refused:
        safety.instance_of("elsewhere-1", CLUSTER, workers)
    assert str(refused.value) == (
        f"node elsewhere-1 is not a worker node of cluster {CLUSTER} (its nodes: gpu-node-8, gpu-node.7); "
        "is the kubeconfig that cluster's?"
    )


def test_the_flag_spells_every_mode_of_the_api() -> None:
    assert {modes.short_mode(m): m for m in modes.REMEDIATION_MODES.values()} == modes.REMEDIATION_MODES


# --- which node -----------------------------------------------------------------------------------------


def test_the_default_node_is_the_preemption_drills_else_a_standard_one_and_any_class_may_be_named() -> None:
    std = node("std-1", "standard", created="2026-12-01T07:00:00Z")
    pre = [node("pre-2", "preemptible"), node("pre-1", "preemptible", created="2026-12-01T08:00:00Z")]
    core: Any = AnyClassCore([std, *pre], [])
    assert runner.choose_remediation_node(core, None) == "pre-1"
    assert runner.choose_remediation_node(core, "std-1") == "std-1"
    assert runner.choose_remediation_node(AnyClassCore([std], []), None) == "std-1"  # type: ignore[arg-type]
    cordoned = AnyClassCore([node("std-1", "standard", unschedulable=True), *pre], [])
    with pytest.raises(
        DrillError, match="--node std-1 is not a schedulable node .* choose one of: pre-1, pre-2"
    ):
        runner.choose_remediation_node(cordoned, "std-1")  # type: ignore[arg-type]


# --- the command ----------------------------------------------------------------------------------------


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]]:
    core = AnyClassCore(
        [
            node("std-1", "standard", created="2026-12-01T07:00:00Z"),
            node("pre-1", "preemptible", created="2026-12-01T08:00:00Z"),
            node("pre-2", "preemptible"),
        ],
        [pod("train-0", "pre-1"), anywhere("web-0", "std-1")],
    )
    compute = FakeCompute([worker("pre-1", "i-1"), worker("pre-2", "i-2"), worker("std-1", "i-s")])

    monkeypatch.setattr(command, "connect", lambda kubeconfig, context: (FakeApi(), context or "prod-east"))
    monkeypatch.setattr(client, "CoreV1Api", lambda api: core)
    monkeypatch.setattr(provider_client, "TogetherClient", compute)
    ran: list[runner.DrillArgs] = []

    def fake_run(api: Any, compute: Any, args: runner.DrillArgs, progress: Any) -> DrillReport:
        ran.append(args)
        target = args.remediation
        assert target is not None
        rem = RemediationReport("rem-1", "vm-only", target.cluster_id, target.instance_id, "SUCCEEDED", ())
        return DrillReport("remediation", args.node or "", "vm-only", (), remediation=rem)

    monkeypatch.setattr(runner, "run_remediation_drill", fake_run)
    return core, compute, ran


def test_dry_run_prints_the_plan_and_asks_for_no_remediation(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]], capsys: pytest.CaptureFixture[str]
) -> None:
    core, compute, ran = fake_cluster
    argv = ["drill", "--remediation", "host-aware", "--cluster-id", CLUSTER, "--node", "std-1", "--dry-run"]
    assert main(argv) == ExitCode.OK
    out = capsys.readouterr().out
    assert "node:     std-1" in out and f"instance: i-s (cluster {CLUSTER})" in out
    assert "manual host-aware remediation of instance i-s" in out
    assert "ml/web-0: replaced by ReplicaSet/web-0-owner, room on pre-" in out
    assert "capacity: LOST" in out and "check:    every replacement has a node with room" in out
    assert compute.listed == [(CLUSTER, "i-s", list(provider_client.ACTIVE_REMEDIATION_STATES))]
    assert compute.created == [] and core.writes == [] and ran == []


def test_an_active_remediation_is_refused_on_one_line_and_nothing_is_asked_for(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]], capsys: pytest.CaptureFixture[str]
) -> None:
    core, compute, ran = fake_cluster
    compute.active = [SimpleNamespace(id="rem-3", mode="REMEDIATION_MODE_REBOOT_VM", state="RUNNING")]
    assert main(["drill", "--remediation", "vm-only", "--cluster-id", CLUSTER, "--yes"]) == ExitCode.ERROR
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        "together-clusters drill: error: refusing to drill pre-1: its instance i-1 already has an active "
        "remediation rem-3 (reboot-vm, RUNNING) (the API allows one at a time); wait for it to end, or "
        "choose another --node"
    )
    assert compute.created == [] and ran == []


def test_the_pre_check_refuses_a_remediation_whose_pods_have_nowhere_to_go(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]], capsys: pytest.CaptureFixture[str]
) -> None:
    core, compute, ran = fake_cluster
    core.nodes = [n for n in core.nodes if n["metadata"]["name"] != "pre-2"]
    assert main(["drill", "--remediation", "reboot-vm", "--cluster-id", CLUSTER, "--yes"]) == ExitCode.ERROR
    [line] = capsys.readouterr().err.splitlines()
    assert "refusing to drill pre-1: no other node could take pod ml/train-0" in line
    assert ran == []


def test_yes_runs_the_remediation_of_the_planned_node_and_instance(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, ran = fake_cluster
    assert main(["drill", "--remediation", "vm-only", "--cluster-id", CLUSTER, "--yes", "-n", "ml"]) == 0
    [args] = ran
    assert args.remediation is not None
    assert (args.node, args.namespace, args.remediation.instance_id) == ("pre-1", "ml", "i-1")
    assert (args.remediation.mode, args.remediation.cluster_id) == ("REMEDIATION_MODE_VM_ONLY", CLUSTER)
    assert "Remediation drill (vm-only) of node pre-1, instance i-1: remediation rem-1 SUCCEEDED" in (
        capsys.readouterr().out
    )


def test_a_real_cluster_asks_before_remediating(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, _, ran = fake_cluster

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["drill", "--remediation", "reboot-vm", "--cluster-id", CLUSTER]) == ExitCode.ERROR
    assert (
        "Remediate node pre-1 (instance i-1, reboot-vm) in context prod-east? [y/N]"
        in capsys.readouterr().err
    )
    assert ran == []


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "--remediation on a real cluster needs --cluster-id"),
        (
            ["--cluster-id", CLUSTER, "--termination", "signal"],
            "--termination and --grace are a preemption's",
        ),
        (["--cluster-id", CLUSTER, "--grace", "30"], "--termination and --grace are a preemption's"),
    ],
)
def test_arguments_a_remediation_cannot_take_are_refused_on_one_line(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]],
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    says: str,
) -> None:
    assert main(["drill", "--remediation", "vm-only", "--yes", *extra]) == ExitCode.ERROR
    [line] = capsys.readouterr().err.splitlines()
    assert says in line and fake_cluster[2] == []


def test_cluster_id_without_remediation_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drill", "--cluster-id", CLUSTER]) == ExitCode.ERROR
    assert "--cluster-id needs --remediation" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("state", "outcome", "code"),
    [
        ("SUCCEEDED", Outcome.SURVIVED, ExitCode.OK),
        ("SUCCEEDED", Outcome.NOT_REPLACED, ExitCode.NOT_SURVIVED),
        ("FAILED", Outcome.SURVIVED, ExitCode.ERROR),
    ],
)
def test_the_exit_code_follows_the_workloads_and_a_remediation_that_did_not_succeed_is_an_error(
    fake_cluster: tuple[AnyClassCore, FakeCompute, list[runner.DrillArgs]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    state: str,
    outcome: Outcome,
    code: ExitCode,
) -> None:
    row = WorkloadReport("Job", "ml", "train", 1, outcome, None, None, "")
    rem = RemediationReport("rem-1", "vm-only", CLUSTER, "i-1", state, ("PENDING", state), "host unreachable")

    def fake_run(api: Any, compute: Any, args: runner.DrillArgs, progress: Any) -> DrillReport:
        return DrillReport("remediation", "pre-1", "vm-only", (row,), remediation=rem)

    monkeypatch.setattr(runner, "run_remediation_drill", fake_run)
    assert main(["drill", "--remediation", "vm-only", "--cluster-id", CLUSTER, "--yes"]) == code
    captured = capsys.readouterr()
    assert "[PENDING -> " + state + "]" in captured.out  # the report is printed in every case
    if state == "FAILED":
        [line] = captured.err.splitlines()
        assert (
            line
            == "together-clusters drill: error: remediation rem-1 of pre-1 ended FAILED: host unreachable"
        )
