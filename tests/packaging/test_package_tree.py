"""One package tree: the repository's folders are ``together_clusters.<name>``, mapped by pyproject.toml's
``package-dir`` (no symbolic link anywhere), and nothing else.

The editable install (setuptools' strict mode: a tree of links under ``build/``, generated, so type checkers
and editors see the package), a wheel, and a ``pytest`` run from the checkout's root all import the same
files under the same names. The pickled provider's class path stays ``together_clusters.provider.resource``
(the stability promise of ``provider/resource.py``), and nothing in the repository imports a top-level folder
as a package of its own (``import provider`` would load a second copy).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests import _engine
from tests._parsing import parse

from .conftest import checkout_names

ROOT = _engine.ROOT
TOP_LEVEL = ("provider", "components", "emulator", "cli", "drift", "templates", "runtime")


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    """The interpreter, started in the repository root with nothing else on the path."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_no_tracked_file_is_a_symbolic_link() -> None:
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True)
    links = [line.split("\t", 1)[1] for line in listed.stdout.splitlines() if line.startswith("120000 ")]
    assert links == [], f"tracked symbolic links (mode 120000): {links}"


def _declared_packages(pyproject: Path) -> tuple[dict[str, Path], list[str]]:
    setuptools = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]
    folders = {
        package: pyproject.parent / folder for package, folder in setuptools.get("package-dir", {}).items()
    }
    return folders, list(setuptools["packages"])


def _package_folders(pyproject: Path) -> dict[str, Path]:
    """Every folder holding an ``__init__.py`` under the mapped folders, by the package name it becomes."""
    folders, packages = _declared_packages(pyproject)
    if not folders:  # the runtime's pyproject: the folder tree is the package tree
        folders = {p.split(".")[0]: pyproject.parent / p.split(".")[0] for p in packages}
    found: dict[str, Path] = {}
    for package, top in folders.items():
        for init in top.rglob("__init__.py"):
            if "__pycache__" in init.parts:
                continue
            parts = init.parent.relative_to(top).parts
            found[".".join([package, *parts])] = init.parent
    return found


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "runtime/pyproject.toml"])
def test_every_package_folder_is_declared_and_every_declared_package_exists(pyproject: str) -> None:
    """``packages`` is explicit (find cannot follow package-dir): a folder missing from it would be left out of
    the wheel without a word, so the list is checked against the tree."""
    _, declared = _declared_packages(ROOT / pyproject)
    on_disk = _package_folders(ROOT / pyproject)
    assert sorted(set(on_disk) - set(declared)) == [], "package folders missing from packages"
    assert sorted(set(declared) - set(on_disk)) == [], "declared packages without a folder"


def test_the_namespaced_package_imports_and_pickles_the_provider_by_its_one_class_path() -> None:
    program = (
        "import together_clusters.provider, together_clusters.components, together_clusters.cli.main\n"
        "import together_clusters.emulator.server, together_clusters.templates\n"
        "from together_clusters.provider.resource import ClusterProvider\n"
        "print(ClusterProvider.__module__)\n"
    )
    done = _python("-c", program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "together_clusters.provider.resource"
    done = _python("-m", "together_clusters.emulator", "--help")
    assert done.returncode == 0, done.stderr


WHERE = (
    "import json, together_clusters, together_clusters.errors, together_clusters.provider.resource as r,"
    " together_clusters.components.checkpoint.contract as c\n"
    "from pathlib import Path\n"
    "print(json.dumps([str(Path(m.__file__).resolve()) for m in"
    " (together_clusters, together_clusters.errors, r, c)]))\n"
)


def test_from_the_checkout_s_root_and_from_elsewhere_the_same_files_are_imported(tmp_path: Path) -> None:
    """The checkout's root is on the path when Python runs there (``python -m pytest``, a Pulumi program in the
    repository): its ``together_clusters/`` folder and the installed tree must be one package, the runtime's
    folder (another distribution) included."""
    outside = subprocess.run(
        [sys.executable, "-c", WHERE], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    inside = _python("-c", WHERE)
    assert outside.returncode == 0 and inside.returncode == 0, outside.stderr + inside.stderr
    assert outside.stdout == inside.stdout
    assert [Path(p).relative_to(ROOT).as_posix() for p in __import__("json").loads(inside.stdout)] == [
        "together_clusters/__init__.py",
        "together_clusters/errors.py",
        "provider/resource.py",
        "runtime/together_clusters/components/checkpoint/contract.py",
    ]


# Text that imports a module of the user's own on purpose, named like ours: (file, the constant holding it).
USERS_OWN_MODULES = {("tests/packaging/test_templates_engine.py", "USER_PROGRAM")}
RUN_AS_MODULE = re.compile(r"-m\s+(" + "|".join(TOP_LEVEL) + r")(?![\w-])")


def _tracked_files() -> list[Path]:
    return [ROOT / name for name in checkout_names() if (ROOT / name).is_file()]


def _is_top_level(module: str | None) -> bool:
    return module is not None and module.partition(".")[0] in TOP_LEVEL


def _imports_of(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each absolute import of a top-level folder, and of each ``"-m", "<folder>"``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if _is_top_level(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_top_level(node.module):
            found.append((node.lineno, str(node.module)))
        elif isinstance(node, ast.List | ast.Tuple):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            for flag, module in zip(words, words[1:], strict=False):
                if flag == "-m" and isinstance(module, str) and _is_top_level(module):
                    found.append((node.lineno, module))
    return found


def _python_in_strings(tree: ast.AST, exempt: set[str]) -> list[tuple[int, str]]:
    """The same, in string constants that are Python programs (``python -c``, files written by tests)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in exempt for t in node.targets
        ):
            skipped |= {id(n) for n in ast.walk(node.value)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            try:
                program = parse(node.value)
            except SyntaxError:
                continue
            found += [(node.lineno, module) for _, module in _imports_of(program)]
    return found


def test_nothing_in_the_repository_imports_or_runs_a_top_level_folder_as_a_package() -> None:
    offences: list[str] = []
    for path in _tracked_files():
        relative = path.relative_to(ROOT).as_posix()
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        offences += [
            f"{relative}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
            for m in RUN_AS_MODULE.finditer(text)
        ]
        if path.suffix == ".py":
            tree = parse(text, filename=relative)
            exempt = {name for file, name in USERS_OWN_MODULES if file == relative}
            offences += [
                f"{relative}:{line}: {module}"
                for line, module in _imports_of(tree) + _python_in_strings(tree, exempt)
            ]
    assert offences == [], "use together_clusters.<name>:\n" + "\n".join(offences)
