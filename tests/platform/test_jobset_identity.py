"""JobSet's identity in the Kubernetes API (group, version, kind, plural) is spelled once: the platform's
``JOBSET_API``. Every product module and the emulator derive from it; a new literal copy fails here, named by
file and line."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests._parsing import parse
from together_clusters.platform import JOBSET_API

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "together_clusters",
    "provider",
    "components",
    "cli",
    "emulator",
    "templates",
    "examples",
    "runtime",
)
"""The product's folders and the emulator's."""
HOME = ROOT / "together_clusters" / "platform" / "__init__.py"

# Any string holding the group (an apiVersion, a CRD name, a Kueue framework, a webhook path), or being the
# kind or the plural.
_GROUP = re.compile(r"jobset[.-]x-k8s[.-]io", re.IGNORECASE)
_NAMES = frozenset({"JobSet", "jobsets"})


def copies(source: str, filename: str = "<source>") -> Iterator[tuple[int, str]]:
    """(line, text) of every string in ``source`` that spells JobSet's identity, f-string parts included.
    Documentation (a string standing alone as a statement: docstrings) may name it."""
    tree = parse(source, filename)
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    strings = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose
    ]
    for node in sorted(strings, key=lambda n: (n.lineno, n.col_offset)):
        if _GROUP.search(node.value) or node.value in _NAMES:
            yield node.lineno, node.value


def _home_lines() -> range:
    """The lines of the one definition (``JOBSET_API = CustomKind(...)``)."""
    for node in parse(HOME.read_text(), str(HOME)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "JOBSET_API" for t in node.targets
        ):
            return range(node.lineno, (node.end_lineno or node.lineno) + 1)
    raise AssertionError(f"JOBSET_API is not defined in {HOME.relative_to(ROOT)}")


def test_jobsets_identity_is_spelled_only_in_the_platform_vocabulary() -> None:
    files = [
        path
        for folder in SOURCES
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    ]
    assert len(files) > 100, "the product's and the emulator's modules were not found"
    home = _home_lines()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r}"
        for path in files
        for line, text in copies(path.read_text(), str(path))
        if not (path == HOME and line in home)
    ]
    assert not found, (
        "JobSet's identity spelled outside together_clusters.platform.JOBSET_API (derive it from there):\n"
        + "\n".join(found)
    )


def test_the_search_sees_every_spelling_and_leaves_documentation_alone() -> None:
    source = (
        '"""A JobSet of jobset.x-k8s.io."""\n'
        'API = "jobset.x-k8s.io/v1alpha2"\n'
        'if kind == "JobSet":\n'
        '    path = f"/mutate-jobset-x-k8s-io-{v}-jobset"\n'
        'call(group, version, "jobsets")\n'
        'LABEL = "jobset.sigs.k8s.io/jobset-name"\n'
        'X = 1\n"""Attribute documentation naming jobsets.jobset.x-k8s.io."""\n'
    )
    assert [line for line, _ in copies(source)] == [2, 3, 4, 5]


def test_the_identity_derives_the_names_clients_use() -> None:
    assert (JOBSET_API.group, JOBSET_API.version, JOBSET_API.kind, JOBSET_API.plural) == (
        "jobset.x-k8s.io",
        "v1alpha2",
        "JobSet",
        "jobsets",
    )
    assert JOBSET_API.api_version == "jobset.x-k8s.io/v1alpha2"
    assert JOBSET_API.crd_name == "jobsets.jobset.x-k8s.io"
