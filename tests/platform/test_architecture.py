"""The layering the design promises, checked on the import graph of the installed package.

Layers, bottom to top (a module imports its own layer or a lower one, never a higher one):

====  ==========  =================================================================================
rank  layer       modules
====  ==========  =================================================================================
0     runtime     ``together_clusters.components.checkpoint.*``: the in-container checkpoint runtime
                  (its own distribution, which training images install alone)
1     facts       ``together_clusters`` (the package), ``errors``, ``_extras``, ``platform.*``: the
                  platform's facts and the error tree, standard library only
1b    sequences   ``together_clusters.sequences.*``: the preemption sequence on the Kubernetes API
2     client      the compute API client inside ``together_clusters.provider`` (:data:`CLIENT`): no
                  Pulumi
3     provider    the rest of ``together_clusters.provider.*``: the ``Cluster`` and ``Volume`` resources
4     components  ``together_clusters.components.*`` (the runtime aside)
5     cli         ``together_clusters.cli.*`` and ``together_clusters.templates.*``
5     plugin      ``together_clusters.provider.native.*`` and ``provider.package_schema``: the plugin
                  ``together``, a front door beside the command line (it serves the components by
                  ``construct``, and its schema describes them), so it sits above them
----  ----------  ---------------------------------------------------------------------------------
      emulator    ``together_clusters.emulator.*``, beside the others: it imports the runtime, the facts
                  and the sequences only, and no other module imports it
====  ==========  =================================================================================

Every import counts, at any depth (an import inside a function runs too, later), except those under
``if TYPE_CHECKING:``, which never run. An import names one module: ``import a.b.c`` and ``from a.b import c``
(``c`` a submodule) are an edge to ``a.b.c`` alone, although Python runs the parents' ``__init__`` first; the
``__init__`` modules are nodes of the graph like any other and obey the same rules. The graph has no cycle,
not even within one layer: the import order of a cycle depends on which module a caller happens to load first.

The checker is a handful of functions over a mapping of module names to source files, so the tests at the end
run it on a planted package in a temporary folder, where it must find the cycle and the upward imports that
were put there, and nothing else.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import subprocess
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._parsing import parse

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "together_clusters"
RUNTIME_PACKAGE = "together_clusters.components.checkpoint"


# --- the layers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layer:
    order: int
    """Bottom to top; the emulator's is its own (it sits beside the others, see :func:`may_import`)."""
    label: str

    def __str__(self) -> str:
        return self.label


RUNTIME = Layer(0, "0 runtime")
FACTS = Layer(1, "1 facts")
SEQUENCES = Layer(2, "1b sequences")
API_CLIENT = Layer(3, "2 client")
PROVIDER = Layer(4, "3 provider")
COMPONENTS = Layer(5, "4 components")
CLI = Layer(6, "5 cli")
PLUGIN = Layer(6, "5 plugin")
EMULATOR = Layer(-1, "emulator")

CLIENT = frozenset(
    f"together_clusters.provider.{name}"
    for name in (
        "client",  # the httpx client: one object over the three families of calls below
        "api_session",  # its HTTP session: auth, retries, the error of each status
        "cluster_calls",  # the clusters and the regions
        "storage_calls",  # the shared volumes
        "remediation_calls",  # the node remediations
        "environment",  # the environment variables that name the key and the endpoint
        "errors",  # the provider's errors (the error tree's, named once)
        "models",  # the API's requests and replies (pydantic)
        "retry",  # the retry policy and Retry-After
        "vocabulary",  # the API's enumerations
    )
)
"""The compute API client: the modules of ``together_clusters.provider`` that know nothing of Pulumi."""

# (prefix, layer): a module is in the layer of the longest prefix it equals or starts with (followed by a dot).
PREFIXES: tuple[tuple[str, Layer], ...] = (
    (RUNTIME_PACKAGE, RUNTIME),
    ("together_clusters.errors", FACTS),
    ("together_clusters._extras", FACTS),
    ("together_clusters.platform", FACTS),
    ("together_clusters.sequences", SEQUENCES),
    *((name, API_CLIENT) for name in sorted(CLIENT)),
    ("together_clusters.provider", PROVIDER),
    # The plugin serves the components too (construct), and its schema describes them: a front door.
    ("together_clusters.provider.native", PLUGIN),
    ("together_clusters.provider.package_schema", PLUGIN),
    ("together_clusters.components", COMPONENTS),
    # The command line is one layer by prefix, however its subpackages are arranged.
    ("together_clusters.cli", CLI),
    ("together_clusters.templates", CLI),
    ("together_clusters.emulator", EMULATOR),
)
EXACT: dict[str, Layer] = {PACKAGE: FACTS}
"""Modules in a layer by their name alone: the package's ``__init__`` (its submodules each have their own)."""


def layer_of(module: str) -> Layer | None:
    """The layer of a module of the package; ``None`` for one no rule places (a new top-level module)."""
    if module in EXACT:
        return EXACT[module]
    matches = [
        (len(prefix), layer)
        for prefix, layer in PREFIXES
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches, key=lambda match: match[0])[1] if matches else None


def may_import(importer: Layer, imported: Layer) -> bool:
    """Whether a module of ``importer``'s layer may import one of ``imported``'s."""
    if importer == EMULATOR:
        return imported in (EMULATOR, RUNTIME, FACTS, SEQUENCES)
    if imported == EMULATOR:
        return False  # product code never imports the emulator
    return imported.order <= importer.order


# --- the graph -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    path: Path
    is_package: bool


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    path: Path
    line: int

    @property
    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _shown(path: Path) -> str:
    real = path.resolve()  # the editable install's tree links to the repository's files
    return str(real.relative_to(ROOT)) if real.is_relative_to(ROOT) else str(path)


def installed_modules() -> dict[str, Source]:
    """Every module of the installed package and of the checkpoint runtime, by name, with its source file.

    ``walk_packages`` imports each package to list its modules: an error there is the test's failure, not a
    package silently left out.
    """
    modules: dict[str, Source] = {}

    def fail(name: str) -> None:
        raise ImportError(f"cannot import {name} to list its modules") from sys.exc_info()[1]

    roots = [importlib.import_module(PACKAGE), importlib.import_module(RUNTIME_PACKAGE)]
    for root in roots:
        modules[root.__name__] = Source(Path(str(root.__file__)), True)
        for info in pkgutil.walk_packages(root.__path__, root.__name__ + ".", onerror=fail):
            spec = importlib.util.find_spec(info.name)
            assert spec is not None and spec.origin, f"{info.name} has no source file"
            modules[info.name] = Source(Path(spec.origin), info.ispkg)
    return modules


def modules_in_folder(folder: Path, package: str) -> dict[str, Source]:
    """The modules of a package tree on disk (the planted package of the tests of the test)."""
    modules: dict[str, Source] = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        if parts[-1] == "__init__":
            modules[".".join((package, *parts[:-1]))] = Source(path, True)
        else:
            modules[".".join((package, *parts))] = Source(path, False)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node at any depth, except the bodies of ``if TYPE_CHECKING:`` (their ``else:`` runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(reversed(node.orelse))
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _relative(name: str, package: str, level: int) -> str:
    parts = package.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imported_names(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str, tuple[str, ...]]]:
    """What each import statement of a module names, as ``(line, module, names)``: ``names`` the names of a
    ``from ... import`` (submodules or attributes, not yet told apart), empty for an ``import``. Relative
    imports are resolved; literal ``importlib.import_module("...")`` and ``__import__("...")`` count too.

    A module that calls ``import_module`` with a computed name (a package's lazy ``__getattr__`` over a table
    of its names' modules) may import any module its string constants name: each such constant, resolved
    against the package when it begins with a dot, is reported as an ``import`` of it, and
    :func:`import_graph` keeps those that name a module exactly."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str, tuple[str, ...]]] = []
    computed = False
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                name = _relative(node.module or "", package, node.level)
            else:
                name = node.module or ""
            found.append((node.lineno, name, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called not in ("import_module", "__import__"):
                continue
            first = node.args[0]
            if (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and not first.value.startswith(".")
            ):
                found.append((node.lineno, first.value, ()))
            else:
                computed = True
    if computed:
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.strip("."):
                value = node.value
                level = len(value) - len(value.lstrip("."))
                named = _relative(value.lstrip("."), package, level) if level else value
                found.append((node.lineno, named, (COMPUTED,)))
    return found


COMPUTED = "<computed>"
"""The names of a string constant's "import" (see :func:`imported_names`): it counts only if it names a module
exactly."""


def _known(name: str, modules: Mapping[str, Source]) -> str | None:
    """The module an import of ``name`` loads last: ``name``, else its longest prefix that is a module."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(modules: Mapping[str, Source]) -> dict[str, list[Edge]]:
    """Each module's imports of the package's modules (one edge per import statement and module named)."""
    graph: dict[str, list[Edge]] = {}
    for module, source in sorted(modules.items()):
        tree = parse(source.path.read_text(), str(source.path))
        edges: list[Edge] = []
        for line, name, names in imported_names(tree, module, source.is_package):
            if names == (COMPUTED,):
                targets = [name if name in modules else None]
            elif names:
                # ``from m import a, b``: a submodule is the module it names; anything else is an attribute of m.
                targets = [
                    f"{name}.{n}" if f"{name}.{n}" in modules else _known(name, modules) for n in names
                ]
            else:
                targets = [_known(name, modules)]
            for target in dict.fromkeys(targets):
                if target is not None and target != module:
                    edges.append(Edge(module, target, source.path, line))
        graph[module] = edges
    return graph


# --- the checks ------------------------------------------------------------------------------------


def unplaced(graph: Mapping[str, list[Edge]]) -> list[str]:
    """Modules no layer rule places."""
    return sorted(module for module in graph if layer_of(module) is None)


def upward_imports(graph: Mapping[str, list[Edge]]) -> list[str]:
    """Every import a module may not make: ``file:line: importer (layer) -> imported (layer)``."""
    found = []
    for edges in graph.values():
        for edge in edges:
            importer, imported = layer_of(edge.importer), layer_of(edge.imported)
            if importer is None or imported is None:
                continue  # reported by unplaced()
            if not may_import(importer, imported):
                found.append(f"{edge.where}: {edge.importer} ({importer}) -> {edge.imported} ({imported})")
    return found


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def cycles(graph: Mapping[str, list[Edge]]) -> list[tuple[str, ...]]:
    """One cycle per set of modules that import each other, as the chain ``a, b, ..., a``: the shortest one
    through the set's first module (breaking it may leave another, which the next run shows)."""
    targets = {module: {edge.imported for edge in edges} for module, edges in graph.items()}
    found = []
    for component in _strongly_connected(targets):
        if len(component) < 2:
            continue
        members = set(component)
        start = component[0]
        came_from: dict[str, str] = {}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if start in targets[node]:
                chain = [node]
                while chain[-1] != start:
                    chain.append(came_from[chain[-1]])
                found.append((*reversed(chain), start))
                break
            for successor in sorted(targets[node] & members):
                if successor not in came_from and successor != start:
                    came_from[successor] = node
                    queue.append(successor)
    return found


def describe_cycle(chain: tuple[str, ...], graph: Mapping[str, list[Edge]]) -> str:
    """A cycle with the line of each of its imports, then every other import among the modules that import
    each other with it (breaking the cycle shown may leave another among them)."""
    steps = []
    for importer, imported in zip(chain, chain[1:], strict=False):
        where = next(edge.where for edge in graph[importer] if edge.imported == imported)
        steps.append(f"  {importer} -> {imported}  ({where})")
    targets = {module: {edge.imported for edge in edges} for module, edges in graph.items()}
    (tangle,) = (set(c) for c in _strongly_connected(targets) if chain[0] in c)
    shown = set(zip(chain, chain[1:], strict=False))
    others = [
        f"  {edge.importer} -> {edge.imported}  ({edge.where})"
        for module in sorted(tangle)
        for edge in graph[module]
        if edge.imported in tangle and (edge.importer, edge.imported) not in shown
    ]
    if others:
        steps += ["  and among the same modules:", *others]
    return "\n".join(steps)


# --- the package -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Edge]]:
    return import_graph(installed_modules())


def test_the_graph_holds_every_part_of_the_package(graph: dict[str, list[Edge]]) -> None:
    layers = {layer_of(module) for module in graph}
    assert {RUNTIME, FACTS, SEQUENCES, API_CLIENT, PROVIDER, COMPONENTS, CLI, PLUGIN, EMULATOR} <= layers, layers
    assert len(graph) > 100, "the package's modules were not found"
    assert CLIENT <= set(graph), f"the client's modules are not all there: {sorted(CLIENT - set(graph))}"
    assert not unplaced(graph), f"modules in no layer (place them in PREFIXES): {unplaced(graph)}"


def test_no_module_imports_up_a_layer(graph: dict[str, list[Edge]]) -> None:
    found = upward_imports(graph)
    assert not found, f"{len(found)} import(s) up a layer:\n" + "\n".join(found)


def test_the_import_graph_has_no_cycle(graph: dict[str, list[Edge]]) -> None:
    found = cycles(graph)
    assert not found, f"{len(found)} import cycle(s):\n" + "\n\n".join(
        " -> ".join(chain) + "\n" + describe_cycle(chain, graph) for chain in found
    )


def test_the_platform_facts_load_only_the_standard_library_and_the_runtime() -> None:
    """What the facts load when imported, in a fresh interpreter: the standard library and the checkpoint
    runtime's contract and errors (the grace limit's home; the runtime package's ``__init__`` loads its names
    on first use, so not blake3), nothing else: no Pulumi, no HTTP client, none of the layers above."""
    facts = sorted(module for module in installed_modules() if layer_of(module) == FACTS)
    probe = (
        "import importlib, json, sys\n"
        "before = set(sys.modules)\n"
        f"for name in {facts!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    loaded = json.loads(out)
    assert "together_clusters.platform" in loaded and "together_clusters.errors" in loaded
    foreign = [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names | {PACKAGE}]
    assert not foreign, f"importing the platform's facts loads more than the standard library: {foreign}"
    runtime_parents = {RUNTIME_PACKAGE.rsplit(".", n)[0] for n in range(1, RUNTIME_PACKAGE.count("."))}
    ours = [m for m in loaded if m.split(".")[0] == PACKAGE]
    beyond = [m for m in ours if layer_of(m) not in (FACTS, RUNTIME) and m not in runtime_parents]
    assert not beyond, f"importing the platform's facts loads modules above them: {beyond}"


def test_examples_and_template_programs_never_import_the_emulator() -> None:
    """The programs beside the package (examples/, the templates' Pulumi programs) are product code too."""
    programs = [
        path
        for folder in (ROOT / "examples", ROOT / "templates")
        for path in sorted(folder.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]
    assert len(programs) > 5, "the examples were not found"
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: imports {name}"
        for path in programs
        for line, name, _ in imported_names(parse(path.read_text(), str(path)), "examples.program", False)
        if name == "together_clusters.emulator" or name.startswith("together_clusters.emulator.")
    ]
    assert not offenders, "product code imports the emulator:\n" + "\n".join(offenders)


# --- the checker itself, on a planted package -------------------------------------------------------

PLANTED = {
    "__init__.py": "",
    "errors.py": "class TogetherError(Exception):\n    pass\n",
    "platform/__init__.py": (
        "GPUS_PER_NODE = 8\n"
        "\n"
        "\n"
        "def probe():\n"
        "    from together_clusters import cli  # up: facts -> cli\n"
        "    return cli\n"
    ),
    "provider/__init__.py": "from .client import Client\n",
    "provider/client.py": (
        "from together_clusters.errors import TogetherError\n"
        "\n"
        "from . import models\n"
        "\n"
        "\n"
        "class Client:\n"
        "    pass\n"
    ),
    "provider/models.py": (
        "class Cluster:\n"
        "    pass\n"
        "\n"
        "\n"
        "def parse():\n"
        "    from .client import Client  # the cycle, hidden in a function\n"
        "    return Client\n"
    ),
    "provider/resource.py": "from together_clusters.provider import client\nfrom ..platform import GPUS_PER_NODE\n",
    "components/__init__.py": (
        "import importlib\n"
        "\n"
        "_EXPORTS = {'create': '.kube'}\n"
        "\n"
        "\n"
        "def __getattr__(name):\n"
        "    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)\n"
    ),
    "components/kube.py": (
        "from __future__ import annotations\n"
        "\n"
        "from typing import TYPE_CHECKING\n"
        "\n"
        "from together_clusters.provider.resource import *  # noqa\n"
        "\n"
        "if TYPE_CHECKING:\n"
        "    from together_clusters.cli import main  # never runs: not an edge\n"
        "    import together_clusters.emulator\n"
        "else:\n"
        "    import together_clusters.errors\n"
    ),
    "cli/__init__.py": "",
    "cli/main.py": (
        "import importlib\n"
        "\n"
        "from together_clusters.components import kube\n"
        "\n"
        "\n"
        "def serve():\n"
        "    return importlib.import_module('together_clusters.emulator.app')  # product code -> emulator\n"
    ),
    "emulator/__init__.py": "",
    "emulator/app.py": "from together_clusters.platform import GPUS_PER_NODE\nfrom ..provider import resource  # up\n",
}
"""A package with one cycle (``provider.client -> provider.models -> provider.client``, through an import
in a function), three imports the layers forbid (in a function of the facts, a computed ``import_module`` of
the command line, a relative import of the emulator) and imports that are no edges."""


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, list[Edge]]:
    for name, text in PLANTED.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(modules_in_folder(tmp_path / PACKAGE, PACKAGE))


def test_the_checker_finds_the_planted_cycle_through_a_function_level_import(
    planted: dict[str, list[Edge]],
) -> None:
    assert cycles(planted) == [
        (
            "together_clusters.provider.client",
            "together_clusters.provider.models",
            "together_clusters.provider.client",
        )
    ]
    message = describe_cycle(cycles(planted)[0], planted)
    assert "provider/client.py:3" in message and "provider/models.py:6" in message


def test_the_checker_finds_exactly_the_planted_upward_imports(
    planted: dict[str, list[Edge]], tmp_path: Path
) -> None:
    root = tmp_path / PACKAGE
    assert upward_imports(planted) == [
        f"{root / 'cli/main.py'}:7: together_clusters.cli.main (5 cli) -> together_clusters.emulator.app (emulator)",
        f"{root / 'emulator/app.py'}:2: together_clusters.emulator.app (emulator) -> "
        "together_clusters.provider.resource (3 provider)",
        f"{root / 'platform/__init__.py'}:5: together_clusters.platform (1 facts) -> together_clusters.cli (5 cli)",
    ]


def test_the_checker_passes_the_planted_package_once_its_faults_are_removed(tmp_path: Path) -> None:
    fixed = dict(PLANTED)
    fixed["platform/__init__.py"] = "GPUS_PER_NODE = 8\n"
    fixed["provider/models.py"] = "class Cluster:\n    pass\n"
    fixed["cli/main.py"] = "from together_clusters.components import kube\n"
    fixed["emulator/app.py"] = "from together_clusters.platform import GPUS_PER_NODE\n"
    for name, text in fixed.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    graph = import_graph(modules_in_folder(tmp_path / PACKAGE, PACKAGE))
    assert (cycles(graph), upward_imports(graph), unplaced(graph)) == ([], [], [])


def test_imports_under_type_checking_are_not_edges_and_submodules_are_their_own(
    planted: dict[str, list[Edge]],
) -> None:
    def edges(module: str) -> set[str]:
        return {edge.imported for edge in planted[module]}

    # The star import names provider.resource; the else branch of TYPE_CHECKING runs.
    assert edges("together_clusters.components.kube") == {
        "together_clusters.provider.resource",
        "together_clusters.errors",
    }
    # ``from together_clusters.provider import client``: the submodule, not the package's __init__.
    assert edges("together_clusters.provider.resource") == {
        "together_clusters.provider.client",
        "together_clusters.platform",
    }
    # A package's __init__ is a node like any other: its imports, static or through a table of names.
    assert edges("together_clusters.provider") == {"together_clusters.provider.client"}
    assert edges("together_clusters.components") == {"together_clusters.components.kube"}
    assert not unplaced(planted)


def test_the_import_check_resolves_relative_and_function_level_imports() -> None:
    tree = parse("def f():\n    from ..emulator.kubernetes import nodes\n")
    assert (2, "together_clusters.emulator.kubernetes", ("nodes",)) in imported_names(
        tree, "together_clusters.cli.drill", False
    )
    assert imported_names(parse("from . import x\n"), "together_clusters.cli", True) == [
        (1, "together_clusters.cli", ("x",))
    ]


def test_every_module_has_a_layer_and_the_layers_allow_what_the_design_says() -> None:
    assert layer_of("together_clusters") == FACTS
    assert layer_of("together_clusters.components.checkpoint.contract") == RUNTIME
    assert layer_of("together_clusters.components.kube") == COMPONENTS
    assert layer_of("together_clusters.provider.client") == API_CLIENT
    assert layer_of("together_clusters.provider.resource") == PROVIDER
    assert layer_of("together_clusters.cli.drill.runner") == CLI
    assert layer_of("together_clusters.provider.native.provider") == PLUGIN
    assert may_import(PLUGIN, COMPONENTS) and not may_import(COMPONENTS, PLUGIN)
    assert not may_import(PROVIDER, PLUGIN)
    assert layer_of("together_clusters.something_new") is None
    assert may_import(EMULATOR, SEQUENCES) and may_import(EMULATOR, RUNTIME)
    assert not may_import(EMULATOR, API_CLIENT) and not may_import(CLI, EMULATOR)
    assert may_import(FACTS, RUNTIME) and not may_import(RUNTIME, FACTS)
    assert may_import(PROVIDER, API_CLIENT) and not may_import(API_CLIENT, PROVIDER)
