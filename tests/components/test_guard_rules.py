"""Every rule in the guard's table is triggered by the layout it exists to refuse."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from together_clusters.components import (
    guard,
    manifests,
)
from together_clusters.components.checkpoint import contract
from together_clusters.components.platform import CRITICAL_LABEL
from together_clusters.platform import PLACEMENT_LABEL, ComputeClass

from .guarded import good_job, long_grace_on_standard_nodes


def changed(change: Callable[[dict[str, Any], dict[str, Any]], None]) -> Callable[[], dict[str, Any]]:
    """A Job changed by ``change(job, pod_spec)``."""

    def build() -> dict[str, Any]:
        obj = good_job()
        change(obj, obj["spec"]["template"]["spec"])
        return obj

    return build


def main_env(pod: dict[str, Any], name: str, value: str) -> None:
    container = pod["containers"][0]
    container["env"] = [e for e in container.get("env", []) if e["name"] != name] + [
        {"name": name, "value": value}
    ]


def bare_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": good_job()["spec"]["template"]["spec"],
    }


TRIGGERS: dict[str, tuple[Callable[[], dict[str, Any]], str]] = {
    "plain_secret": (
        changed(lambda _, pod: main_env(pod, contract.ENV_S3_ACCESS_KEY_ID, "AKIA")),
        "plain-secret",
    ),
    "node_name": (changed(lambda _, pod: pod.update(nodeName="gpu-node-1")), "node-name"),
    "grace_period_is_seconds": (
        changed(lambda _, pod: pod.update(terminationGracePeriodSeconds="soon")),
        "grace-period",
    ),
    "pre_stop_within_grace": (
        changed(
            lambda _, pod: pod["containers"][0].update(lifecycle={"preStop": {"sleep": {"seconds": 300}}})
        ),
        "pre-stop",
    ),
    "critical_off_preemptible": (
        changed(
            lambda obj, _: obj["spec"]["template"]["metadata"]["labels"].update({CRITICAL_LABEL: "true"})
        ),
        "critical-on-preemptible",
    ),
    "fallback_yields": (
        changed(
            lambda obj, _: obj["spec"]["template"]["metadata"]["labels"].update(
                {PLACEMENT_LABEL: ComputeClass.PREEMPTIBLE_FIRST.value}
            )
        ),
        "fallback-priority",
    ),
    "grace_period_within_limit": (
        changed(lambda _, pod: pod.update(terminationGracePeriodSeconds=600)),
        "grace-period",
    ),
    "no_bare_pod": (bare_pod, "bare-pod"),
    "disruption_ignored_first": (
        changed(lambda obj, _: obj["spec"]["podFailurePolicy"]["rules"].pop(0)),
        "disruption-rule",
    ),
    "sigterm_exit_ignored": (
        changed(lambda obj, _: obj["spec"]["podFailurePolicy"]["rules"].pop(1)),
        "sigterm-exit-rule",
    ),
    "restart_policy_never": (changed(lambda _, pod: pod.update(restartPolicy="OnFailure")), "restart-policy"),
    "checkpoint_storage": (lambda: good_job(checkpoint=None), "checkpoint-storage"),
    "save_budget_within_grace": (
        changed(lambda _, pod: main_env(pod, contract.ENV_SAVE_BUDGET, "9999")),
        "save-budget",
    ),
}
"""For each rule of guard.RULES (by its function's name): a layout that breaks it, and the violation's rule."""


def test_every_rule_of_the_table_has_a_layout_that_triggers_it() -> None:
    assert [rule.name for rule in guard.RULES] == list(TRIGGERS)
    assert all(rule.check.__doc__ for rule in guard.RULES)


@pytest.mark.parametrize("rule", guard.RULES, ids=lambda rule: rule.name)
def test_each_rule_alone_refuses_its_layout(rule: guard.Rule, monkeypatch: pytest.MonkeyPatch) -> None:
    build, violation_rule = TRIGGERS[rule.name]
    assert guard.check_manifest(good_job()) == []
    monkeypatch.setattr(guard, "RULES", (rule,))
    violations = guard.check_manifest(build())
    assert [v.rule for v in violations] == [violation_rule]
    assert all("\n" not in str(v) and "Fix: " in str(v) for v in violations)


def test_the_rules_of_preemptible_jobs_leave_standard_pods_alone() -> None:
    standard = manifests.batch_job("ft", long_grace_on_standard_nodes())
    assert guard.check_manifests(standard) == []
