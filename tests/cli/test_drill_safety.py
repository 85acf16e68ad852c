"""The drill's safety before it touches a cluster, on a fake Kubernetes client: the pre-check that refuses
when no other node could take the preempted pods, --dry-run, the confirmation naming the context, the
twin's termination mode read from the emulator, and the exit code of a drill a workload did not survive."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from kubernetes import client

from together_clusters.cli.drill import command, runner, safety
from together_clusters.cli.drill.report import DrillReport, Outcome, WorkloadReport
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.main import main

PREEMPTIBLE_TAINT = {"key": "together.ai/compute-class", "value": "preemptible", "effect": "NoSchedule"}
TOLERATION = {
    "key": "together.ai/compute-class",
    "operator": "Equal",
    "value": "preemptible",
    "effect": "NoSchedule",
}


def node(
    name: str, klass: str, gpus: int = 8, created: str = "2026-12-01T09:00:00Z", **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"together.ai/compute-class": klass},
            "creationTimestamp": created,
        },
        "spec": {"taints": [PREEMPTIBLE_TAINT] if klass == "preemptible" else [], **spec},
        "status": {
            "allocatable": {"cpu": "224", "memory": "2Ti", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, on: str, gpus: int = 8, owner: str | None = "Job", namespace: str = "ml"
) -> dict[str, Any]:
    refs = (
        []
        if owner is None
        else [
            {
                "apiVersion": "batch/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": f"u-{name}",
                "controller": True,
            }
        ]
    )
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": f"pod-{name}", "ownerReferences": refs},
        "spec": {
            "nodeName": on,
            "nodeSelector": {"together.ai/compute-class": "preemptible"},
            "tolerations": [TOLERATION],
            "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def model(data: dict[str, Any], kind: str) -> Any:
    """A dict as the client would deserialize it from the API."""
    return client.ApiClient().deserialize(json.dumps(data), kind, "application/json")


class FakeCore:
    """What CoreV1Api answers for these nodes and pods; records every write (there must be none)."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.nodes, self.pods, self.writes = nodes, pods, []

    def list_node(self, label_selector: str = "", **_: Any) -> Any:
        wanted = dict(kv.split("=") for kv in label_selector.split(",") if kv)
        items = [n for n in self.nodes if all(n["metadata"]["labels"].get(k) == v for k, v in wanted.items())]
        return model({"items": items}, "V1NodeList")

    def list_pod_for_all_namespaces(self, **_: Any) -> Any:
        return model({"items": self.pods}, "V1PodList")

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("patch", "create", "delete", "replace")):
            return lambda *a, **k: self.writes.append(name)
        raise AttributeError(name)


def plan_of(core: FakeCore, victim: str = "pre-1") -> safety.Plan:
    return safety.read_plan(
        core,
        context="prod-east",
        server="https://k8s.example",
        mode="game-day",
        node=victim,
        termination="eviction",
        watched_namespace=None,
        grace_seconds=300,
        timeout_seconds=900,
    )


def test_one_preemptible_node_is_refused_naming_the_pod_and_why() -> None:
    core = FakeCore([node("std-1", "standard"), node("pre-1", "preemptible")], [pod("train-0", "pre-1")])
    refusal = plan_of(core).refusal
    assert refusal.startswith(
        "refusing to drill pre-1: no other node could take pod ml/train-0 of Job/train-0-owner"
    )
    assert "std-1: taint" not in refusal  # the standard node has no taint; it lacks the label
    assert "std-1: not labelled together.ai/compute-class=preemptible" in refusal
    assert "\n" not in refusal


def test_a_full_second_node_is_refused_with_its_free_gpus() -> None:
    core = FakeCore(
        [node("pre-1", "preemptible"), node("pre-2", "preemptible")],
        [pod("train-0", "pre-1"), pod("other", "pre-2", gpus=4)],
    )
    assert "pre-2: 4 of 8 nvidia.com/gpu free" in plan_of(core).refusal


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        (node("pre-2", "preemptible", unschedulable=True), "pre-2: cordoned"),
        (
            node("pre-2", "preemptible", taints=[{"key": "gpu-broken", "effect": "NoExecute"}]),
            "pre-2: taint gpu-broken:NoExecute not tolerated",
        ),
    ],
)
def test_a_node_that_takes_no_pods_does_not_count(second: dict[str, Any], expected: str) -> None:
    core = FakeCore([node("pre-1", "preemptible"), second], [pod("train-0", "pre-1")])
    assert expected in plan_of(core).refusal


def test_a_second_node_with_room_passes_and_two_pods_cannot_share_its_last_gpus() -> None:
    nodes = [node("pre-1", "preemptible"), node("pre-2", "preemptible")]
    assert plan_of(FakeCore(nodes, [pod("train-0", "pre-1")])).refusal == ""
    two = [pod("a", "pre-1", gpus=4), pod("b", "pre-1", gpus=4), pod("c", "pre-2", gpus=4)]
    assert "1 other" not in plan_of(FakeCore(nodes, two)).refusal
    assert plan_of(FakeCore(nodes, two)).refusal.startswith(
        "refusing to drill pre-1: no other node could take pod ml/"
    )


def test_daemonset_and_finished_pods_are_not_taken_and_bare_pods_need_no_room() -> None:
    daemon = pod("agent", "pre-1", gpus=0, owner="DaemonSet")
    done = {**pod("old", "pre-1"), "status": {"phase": "Succeeded"}}
    bare = pod("debug", "pre-1", owner=None)
    plan = plan_of(FakeCore([node("pre-1", "preemptible")], [daemon, done, bare]))
    assert [p.name for p in plan.pods] == ["debug"] and plan.refusal == ""
    assert "ml/debug: a bare pod: lost, nothing replaces it" in safety.plan_text(plan)


class FakeApi:
    """The Kubernetes ApiClient a drill opens, as far as the command uses it: its host and a ``with``."""

    configuration = SimpleNamespace(host="https://k8s.example")

    def __enter__(self) -> FakeApi:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCore:
    core = FakeCore(
        [node("pre-1", "preemptible", created="2026-12-01T08:00:00Z"), node("pre-2", "preemptible")],
        [pod("train-0", "pre-1")],
    )
    monkeypatch.setattr(command, "connect", lambda kubeconfig, context: (FakeApi(), context or "prod-east"))
    monkeypatch.setattr(client, "CoreV1Api", lambda api: core)
    ran: list[runner.DrillArgs] = []
    core.ran = ran  # type: ignore[attr-defined]

    def fake_run(api: Any, args: runner.DrillArgs, progress: Any) -> Any:
        ran.append(args)
        return runner.DrillReport(mode="game-day", node=args.node or "", termination="eviction", workloads=())

    monkeypatch.setattr(runner, "run_drill", fake_run)
    return core


def test_dry_run_prints_the_plan_and_changes_nothing(
    fake_cluster: FakeCore, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["drill", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "context:  prod-east (https://k8s.example)" in out
    assert "node:     pre-1" in out
    assert "ml/train-0: replaced by Job/train-0-owner, room on pre-2" in out
    assert "cordon pre-1" in out
    assert fake_cluster.writes == [] and fake_cluster.ran == []  # type: ignore[attr-defined]


def test_dry_run_of_a_refused_drill_exits_1(
    fake_cluster: FakeCore, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cluster.nodes.pop()
    assert main(["drill", "--dry-run"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("together-clusters drill: error: refusing to drill pre-1")


def test_a_refused_game_day_changes_nothing(
    fake_cluster: FakeCore, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_cluster.nodes.pop()
    assert main(["drill", "--yes"]) == 1
    assert "no other node could take pod ml/train-0" in capsys.readouterr().err
    assert fake_cluster.writes == [] and fake_cluster.ran == []  # type: ignore[attr-defined]


def test_without_yes_a_non_interactive_stdin_is_refused_naming_yes(
    fake_cluster: FakeCore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["drill", "--context", "prod-east"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert "context prod-east" in line and "--yes" in line
    assert fake_cluster.ran == []  # type: ignore[attr-defined]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code", "runs"), [("y\n", 0, 1), ("\n", 1, 0), ("no\n", 1, 0)])
def test_the_prompt_names_the_context_and_only_yes_goes_on(
    fake_cluster: FakeCore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    code: int,
    runs: int,
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    assert main(["drill"]) == code
    assert "Preempt node pre-1 in context prod-east? [y/N]" in capsys.readouterr().err
    assert len(fake_cluster.ran) == runs  # type: ignore[attr-defined]


def test_yes_runs_the_drill_of_the_planned_node_and_namespace(fake_cluster: FakeCore) -> None:
    assert main(["drill", "--yes", "-n", "ml"]) == 0
    [args] = fake_cluster.ran  # type: ignore[attr-defined]
    assert (args.node, args.namespace, args.twin_url) == ("pre-1", "ml", None)


def test_twin_mode_takes_the_emulators_termination_mode(
    fake_cluster: FakeCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def get(url: str, **_: Any) -> httpx.Response:
        seen.append(url)
        return httpx.Response(200, json={"termination": "delete"}, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", get)
    assert main(["drill", "--twin", "http://127.0.0.1:8700/"]) == 0
    [args] = fake_cluster.ran  # type: ignore[attr-defined]
    assert args.termination.value == "delete" and seen == ["http://127.0.0.1:8700/_emulator/kubernetes"]
    assert main(["drill", "--twin", "http://127.0.0.1:8700", "--termination", "signal"]) == 0
    assert fake_cluster.ran[-1].termination.value == "signal"  # type: ignore[attr-defined]


def test_a_twin_dry_run_shows_a_full_cluster_but_does_not_refuse(
    fake_cluster: FakeCore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the twin the emulator refills what it preempts, so the check informs and does not refuse."""
    fake_cluster.nodes.pop()
    assert main(["drill", "--twin", "http://127.0.0.1:8700", "--termination", "delete", "--dry-run"]) == 0
    assert "check:    no node has room now, the emulator's refill may bring one" in capsys.readouterr().out


@pytest.mark.parametrize("outcome", [Outcome.FAILED, Outcome.NOT_REPLACED])
def test_a_workload_that_did_not_survive_exits_with_its_own_code(
    fake_cluster: FakeCore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], outcome: Outcome
) -> None:
    lost = WorkloadReport("Job", "ml", "train-0-owner", 1, outcome, None, None, "BackoffLimitExceeded")

    def fake_run(api: Any, args: runner.DrillArgs, progress: Any) -> DrillReport:
        return DrillReport(mode="game-day", node=args.node or "", termination="eviction", workloads=(lost,))

    monkeypatch.setattr(runner, "run_drill", fake_run)
    code = main(["drill", "--yes"])
    assert code == ExitCode.NOT_SURVIVED == 5, capsys.readouterr()
    # Not drift's "changes pending" any more (it was 3 before 0.2).
    assert code != ExitCode.PENDING
    assert "a workload did not survive" in capsys.readouterr().out
