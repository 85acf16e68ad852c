"""Readers for rendered Kubernetes objects."""

from __future__ import annotations

from typing import Any


def pod_template(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod template of a Job, Deployment, ... or of the one Job in a JobSet (a BatchJob's layout)."""
    if obj.get("kind") == "JobSet":
        (replicated,) = obj["spec"]["replicatedJobs"]
        obj = replicated["template"]
    template: dict[str, Any] = obj["spec"]["template"]
    return template


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = pod_template(obj)["spec"]
    return spec


def main_container(obj: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec(obj)["containers"]
    assert container["name"] == "main"
    return container


def env_of(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in main_container(obj).get("env", [])}


def env_values(obj: dict[str, Any]) -> dict[str, str]:
    return {k: v["value"] for k, v in env_of(obj).items() if "value" in v}


def env_names(obj: dict[str, Any]) -> list[str]:
    return [e["name"] for e in main_container(obj).get("env", [])]


def required_terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = pod_spec(obj)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms: list[dict[str, Any]] = affinity["nodeSelectorTerms"]
    return terms
