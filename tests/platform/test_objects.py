"""What a Kubernetes object read as plain data says, in one home (issue 40, part 6): the platform's
:mod:`together_clusters.platform.objects`, which the fleet's dispatcher ships in its ConfigMap and the command
line imports. Its functions on plain dicts, and a check that no other product module reads a condition's
status itself (named by file and line)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests._parsing import parse
from together_clusters.platform import GPU_RESOURCE, PREEMPTIBLE
from together_clusters.platform.objects import condition, condition_true, free_gpus_by_node

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("together_clusters", "provider", "components", "cli", "templates", "examples", "runtime")
"""The product's folders (the emulator reads the Kubernetes client's typed objects, not plain data)."""
HOME = ROOT / "together_clusters" / "platform" / "objects.py"
NOT_A_STATUS = {
    "components/guard.py": "a Job's podFailurePolicy rule (onPodConditions), not the status of an object",
}
"""Files that compare a ``status`` with ``"True"`` for another reason than reading an object's condition."""


def with_conditions(*conditions: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"name": "x"}, "status": {"conditions": list(conditions)}}


def test_a_condition_is_found_by_type_whatever_its_status() -> None:
    workload = with_conditions({"type": "QuotaReserved", "status": "False", "reason": "Pending"})
    assert condition(workload, "QuotaReserved") == {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
    }
    assert condition(workload, "Admitted") is None
    assert condition({}, "Ready") is None
    assert condition({"status": None}, "Ready") is None


def test_a_condition_is_true_only_when_its_status_says_true() -> None:
    assert condition_true(with_conditions({"type": "Ready", "status": "True"}), "Ready")
    assert not condition_true(with_conditions({"type": "Ready", "status": "False"}), "Ready")
    assert not condition_true(with_conditions({"type": "Ready", "status": "Unknown"}), "Ready")
    assert not condition_true(with_conditions({"type": "Finished", "status": "True"}), "Ready")
    assert not condition_true({}, "Ready")


def node(name: str, gpus: int, *, cordoned: bool = False) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": {"together.ai/compute-class": PREEMPTIBLE}},
        "spec": {"unschedulable": True} if cordoned else {},
        "status": {"allocatable": {GPU_RESOURCE: str(gpus)}},
    }


def pod(on: str, gpus: int, phase: str = "Running") -> dict[str, object]:
    container = {"name": "c", "resources": {"limits": {GPU_RESOURCE: str(gpus)}}}
    return {"spec": {"nodeName": on, "containers": [container]}, "status": {"phase": phase}}


def test_free_gpus_are_allocatable_less_the_pods_not_finished_and_none_on_a_cordoned_node() -> None:
    nodes = [node("a", 8), node("b", 8), node("c", 8, cordoned=True)]
    pods = [pod("a", 4), pod("a", 2, "Succeeded"), pod("b", 8), pod("c", 1), pod("elsewhere", 8)]
    assert free_gpus_by_node(nodes, pods) == {"a": 4, "b": 0}


def status_checks(source: str, filename: str) -> Iterator[int]:
    """Lines of ``source`` comparing a condition's status (``x.get("status")``, ``x.status`` or a name
    ``status``) with ``"True"``."""
    for found in ast.walk(parse(source, filename)):
        if not isinstance(found, ast.Compare):
            continue
        operands = [found.left, *found.comparators]
        if not any(isinstance(o, ast.Constant) and o.value == "True" for o in operands):
            continue
        for operand in operands:
            is_get = (
                isinstance(operand, ast.Call)
                and isinstance(operand.func, ast.Attribute)
                and operand.func.attr == "get"
                and operand.args
                and isinstance(operand.args[0], ast.Constant)
                and operand.args[0].value == "status"
            )
            is_attribute = isinstance(operand, ast.Attribute) and operand.attr == "status"
            if is_get or is_attribute or (isinstance(operand, ast.Name) and operand.id == "status"):
                yield found.lineno
                break


def test_no_product_module_but_the_platforms_reads_a_conditions_status_itself() -> None:
    found = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            if path == HOME or relative in NOT_A_STATUS:
                continue
            found += [f"{relative}:{line}" for line in status_checks(path.read_text(), relative)]
    assert not found, (
        "a condition's status read outside together_clusters/platform/objects.py (use condition or "
        f"condition_true): {found}"
    )


def test_the_check_finds_what_it_looks_for() -> None:
    planted = (
        'ok = c.get("status") == "True"\nalso = "True" != cond.status\nother = x.get("phase") == "True"\n'
        'status = c.get("status")\nthen = status == "True"\n'
    )
    assert list(status_checks(planted, "planted.py")) == [1, 2, 5]
    assert list(status_checks(HOME.read_text() if HOME.exists() else "", "objects.py"))
