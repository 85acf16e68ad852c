"""How the drill reads where a replacement resumed (cli/drill/runner.py ``_resumed``): a kubelet refuses the log
of a container that has only just started (HTTP 400, "waiting to start"), so a refusal within the wait is tried
again, as a missing ``resumed step=`` line is; only a log still refused at the deadline is reported as none."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.cli.drill import runner
from together_clusters.components.checkpoint.contract import REPORT_PREFIX


def _pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="default"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="main")]),
    )


class _Kubelet:
    """Serves each pod's log after refusing it ``refusals`` times, as a kubelet does while a container starts."""

    def __init__(self, logs: dict[str, str], refusals: int) -> None:
        self.logs = logs
        self.refusals = dict.fromkeys(logs, refusals)
        self.containers: list[str] = []

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str, **_: Any) -> str:
        self.containers.append(container)
        if self.refusals[name] > 0:
            self.refusals[name] -= 1
            raise ApiException(status=400, reason="Bad Request: container main is waiting to start")
        return self.logs[name]


def test_a_log_refused_while_the_container_starts_is_read_once_served() -> None:
    kubelet = _Kubelet({"train-0": f"{REPORT_PREFIX} resumed step=13 checkpoint=/ckpt/step-13\n"}, refusals=2)

    resumed, note = runner._resumed(kubelet, [_pod("train-0")], wait_seconds=30)  # type: ignore[arg-type]

    assert resumed is not None and (resumed.step, resumed.checkpoint) == (13, "/ckpt/step-13"), note
    assert note == "" and set(kubelet.containers) == {"main"}


def test_a_log_never_served_is_reported_with_the_apis_status_once_the_wait_is_over() -> None:
    kubelet = _Kubelet({"train-0": ""}, refusals=10**6)

    resumed, note = runner._resumed(kubelet, [_pod("train-0")], wait_seconds=0)  # type: ignore[arg-type]

    assert resumed is None
    assert note.startswith("no pod log (HTTP 400") and "waiting to start" in note, note


def test_every_replacement_is_read_and_the_lowest_step_wins_when_they_disagree() -> None:
    kubelet = _Kubelet(
        {
            "train-0": f"{REPORT_PREFIX} resumed step=13 checkpoint=/ckpt/step-13\n",
            "train-1": f"{REPORT_PREFIX} resumed step=9 checkpoint=/ckpt/step-9\n",
        },
        refusals=1,
    )

    resumed, note = runner._resumed(kubelet, [_pod("train-0"), _pod("train-1")], wait_seconds=30)  # type: ignore[arg-type]

    assert resumed is not None and resumed.step == 9
    assert "different steps [9, 13]" in note
