"""Upstream's tuning is never dropped silently (issue 40, part 1).

Each chart the package installs is rendered with our values next to the pinned chart's own default
``values.yaml`` (committed verbatim under ``tests/components/charts/``, so no network at test time), as Helm
merges them: maps merged key by key, anything else replaced. Every default we drop or change must have its
reason written beside our configuration (:data:`~together_clusters.components.controllers.releases.CHART_DEFAULTS_CHANGED`),
and every reason written there must still be for a default we change. Kueue's manager configuration is one
YAML string in its chart, replaced whole by ours, so it is compared key by key on its own
(:data:`~together_clusters.components.controllers.releases.KUEUE_CONFIG_DEFAULTS_CHANGED`), for every Kueue the
package installs: a single cluster's, a fleet manager's (with its ``multiKueue`` section) and a worker's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from together_clusters.components import ClusterControllersArgs
from together_clusters.components.controllers.releases import (
    CHART_DEFAULTS_CHANGED,
    KUEUE_CONFIG_DEFAULTS_CHANGED,
    KueueSettings,
    kueue_manager_config,
    release_values,
)
from together_clusters.components.manifests import fleet_queue as fleet_builder
from together_clusters.platform import JOBSET_API
from together_clusters.platform.charts import CHARTS, KUEUE, ChartFacts, Controller

from . import test_cluster_controllers as controller_tests

CHART_VALUES = Path(__file__).parent / "charts"
KUEUE_CONFIG = ("managerConfig", "controllerManagerConfigYaml")
EVERY_CONTROLLER = ClusterControllersArgs(jobset=True, kueue=True, descheduler=True)
MISSING = object()


def chart_defaults(facts: ChartFacts) -> dict[str, Any]:
    """The pinned chart's default values (the committed copy of its ``values.yaml``)."""
    path = CHART_VALUES / f"{facts.chart_name}-{facts.version}-values.yaml"
    assert path.is_file(), f"no copy of {facts.chart_name} {facts.version}'s values.yaml at {path}: add it"
    return dict(yaml.safe_load(path.read_text()))


def helm_merged(defaults: Mapping[str, Any], ours: Mapping[str, Any]) -> dict[str, Any]:
    """``ours`` over ``defaults`` as Helm coalesces values: maps key by key, a null deletes, the rest replaces."""
    merged = dict(defaults)
    for key, value in ours.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = helm_merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def leaves(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every leaf of ``tree`` by dotted path (a list or an empty map is one leaf)."""
    found: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            found.update(leaves(value, f"{path}."))
        else:
            found[path] = value
    return found


def at(tree: Any, path: str) -> Any:
    """The value at dotted ``path`` of ``tree`` (keys may hold dots themselves: the longest key wins)."""
    if path == "":
        return tree
    if not isinstance(tree, Mapping):
        return MISSING
    for key in sorted(tree, key=len, reverse=True):
        if path == key or path.startswith(f"{key}."):
            return at(tree[key], path[len(key) + 1 :])
    return MISSING


def changed_defaults(defaults: Mapping[str, Any], effective: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Each default leaf whose effective value differs: path -> (the chart's, ours; ``MISSING`` if dropped)."""
    changed = {}
    for path, default in leaves(defaults).items():
        ours = at(effective, path)
        if ours != default:
            changed[path] = (default, "dropped" if ours is MISSING else ours)
    return changed


def unexplained(changed: Mapping[str, Any], reasons: Mapping[str, str]) -> list[str]:
    return [
        f"{path}: the chart's {old!r}, ours {new!r}"
        for path, (old, new) in changed.items()
        if path not in reasons
    ]


def stale(changed: Mapping[str, Any], reasons: Mapping[str, str]) -> list[str]:
    return [path for path in reasons if path not in changed]


# --- the charts' values --------------------------------------------------------------------------------


@pytest.mark.parametrize("facts", CHARTS.values(), ids=lambda f: f.chart_name)
def test_every_chart_default_we_drop_or_change_has_its_reason_beside_our_values(facts: ChartFacts) -> None:
    defaults = chart_defaults(facts)
    changed = changed_defaults(defaults, helm_merged(defaults, release_values(facts, EVERY_CONTROLLER)))
    reasons = CHART_DEFAULTS_CHANGED[facts.controller]
    problems = unexplained(changed, reasons)
    assert not problems, (
        f"{facts.chart_name} {facts.version}: chart defaults dropped or changed with no reason in "
        "CHART_DEFAULTS_CHANGED:\n  " + "\n  ".join(problems)
    )
    assert stale(changed, reasons) == [], "reasons for defaults we no longer change: remove them"
    assert all(reason.strip() for reason in reasons.values())


# --- Kueue's manager configuration, replaced whole ------------------------------------------------------

KUEUE_INSTALLS = {
    "single-cluster": None,
    "fleet-manager": fleet_builder.multikueue_settings(300, True),
    "fleet-worker": None,
}


def rendered_kueue_config(multikueue: Mapping[str, Any] | None) -> dict[str, Any]:
    """The manager configuration a release of Kueue carries, as the chart's value (a YAML string)."""
    values = release_values(KUEUE, EVERY_CONTROLLER, multikueue)
    text = values["managerConfig"]["controllerManagerConfigYaml"]
    return dict(yaml.safe_load(text))


def chart_kueue_config() -> dict[str, Any]:
    text = chart_defaults(KUEUE)["managerConfig"]["controllerManagerConfigYaml"]
    return dict(yaml.safe_load(text))


@pytest.mark.parametrize("multikueue", KUEUE_INSTALLS.values(), ids=list(KUEUE_INSTALLS))
def test_every_kueue_keeps_the_charts_configuration_or_says_why_not(
    multikueue: Mapping[str, Any] | None,
) -> None:
    changed = changed_defaults(chart_kueue_config(), rendered_kueue_config(multikueue))
    problems = unexplained(changed, KUEUE_CONFIG_DEFAULTS_CHANGED)
    assert not problems, (
        "Kueue 0.17.0's chart configuration dropped or changed with no reason in KUEUE_CONFIG_DEFAULTS_CHANGED:"
        "\n  " + "\n  ".join(problems)
    )
    assert stale(changed, KUEUE_CONFIG_DEFAULTS_CHANGED) == [], "reasons for defaults we keep: remove them"


def test_the_chart_configuration_is_what_the_test_reads() -> None:
    # The comparison is only as good as the copy: the chart's concurrency is there, in the format Kueue reads.
    concurrency = chart_kueue_config()["controller"]["groupKindConcurrency"]
    assert concurrency["Workload.kueue.x-k8s.io"] == 5
    assert concurrency["Job.batch"] == 5
    assert changed_defaults({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}) == {"a.c": (2, "dropped")}


def test_jobsets_reconciler_runs_as_many_workers_as_jobs() -> None:
    # controller-runtime's builder reads GroupKindConcurrency[GroupKind.String()]: "<Kind>.<group>".
    concurrency = kueue_manager_config(KueueSettings())["controller"]["groupKindConcurrency"]
    assert concurrency[f"{JOBSET_API.kind}.{JOBSET_API.group}"] == concurrency["Job.batch"] == 5
    assert "JobSet.jobset.x-k8s.io" in concurrency


def test_kueue_is_given_the_request_budget_for_the_load_the_package_creates() -> None:
    connection = kueue_manager_config(KueueSettings())["clientConnection"]
    assert connection["qps"] > chart_kueue_config()["clientConnection"]["qps"]
    assert connection["burst"] >= connection["qps"]


def test_the_fleet_manager_differs_from_a_worker_only_by_its_multikueue_section() -> None:
    """And by the ``waitForPodsReady`` it does without: it runs no pod of its workloads (issue 40, part 2)."""
    manager = rendered_kueue_config(KUEUE_INSTALLS["fleet-manager"])
    assert "multiKueue" in manager
    manager.pop("multiKueue")
    worker = rendered_kueue_config(None)
    assert "waitForPodsReady" in worker and "waitForPodsReady" not in manager
    worker.pop("waitForPodsReady")
    assert manager == worker


def test_every_chart_is_covered() -> None:
    assert set(CHART_DEFAULTS_CHANGED) == set(Controller)


@pytest.mark.parametrize("facts", CHARTS.values(), ids=lambda f: f.chart_name)
def test_the_committed_copy_is_the_pinned_charts_values(facts: ChartFacts) -> None:
    # Where the pinned chart is on disk (Go's module cache or the twin's copy; skipped elsewhere, failed with
    # CI=true), the committed copy below its header is that chart's values.yaml, byte for byte.
    chart = controller_tests.pinned_chart(facts)
    copy = (CHART_VALUES / f"{facts.chart_name}-{facts.version}-values.yaml").read_text()
    assert copy.split("# ---\n", 1)[1] == (chart / "values.yaml").read_text()
