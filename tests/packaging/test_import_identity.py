"""One import identity: the subpackages are ``together_clusters.<name>`` and nothing else.

From the repository root the top-level folders (``provider/``, ``components/``, ...) are on the path as
packages of their own. Imported that way, each would be a second copy with its own module state (the
settings' client cache) and another class path for the pickled provider, which the stability promise of
``provider/resource.py`` forbids. So ``import provider``, and ``python -m`` of the ``emulator`` folder, fail
at once, with a one-line message that names the import or command to use instead; and nothing in the
repository imports or runs a top-level folder as a package.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import _engine
from tests._parsing import parse

from .conftest import checkout_names

ROOT = _engine.ROOT
TOP_LEVEL = ("provider", "components", "emulator", "drift", "templates")
RUNNABLE = ("emulator", "drift", "templates")


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


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_importing_a_top_level_folder_as_its_own_package_fails_at_once(name: str) -> None:
    program = (
        "import sys\n"
        f"try:\n    import {name}\nexcept ImportError as error:\n    print(type(error).__name__, error)\n"
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {TOP_LEVEL!r} + ('pulumi',)))\n"
    )
    done = _python("-c", program)
    assert done.returncode == 0, done.stderr
    refusal, loaded = done.stdout.splitlines()
    assert refusal.startswith("ImportError "), refusal
    assert f"import together_clusters.{name} instead" in refusal
    # Before any module of the second copy, or Pulumi, is loaded.
    assert loaded == "[]"


@pytest.mark.parametrize("module", [*RUNNABLE, "emulator.kubernetes.reaper"])
def test_running_a_top_level_folder_as_a_module_names_the_command_to_run(module: str) -> None:
    done = _python("-m", module, "--help")
    assert done.returncode == 1
    assert done.stdout == ""
    # One line, no traceback: runpy reports an ImportError of the module it is looking for that way.
    (line,) = done.stderr.splitlines()
    assert f"run python -m together_clusters.{module} instead" in line
    assert "Traceback" not in done.stderr


def test_the_namespaced_package_imports_and_pickles_the_provider_by_its_one_class_path() -> None:
    program = (
        "import together_clusters.provider, together_clusters.components, together_clusters.drift.cli\n"
        "import together_clusters.emulator.server, together_clusters.templates\n"
        "from together_clusters.provider.resource import ClusterProvider\n"
        "print(ClusterProvider.__module__)\n"
    )
    done = _python("-c", program)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "together_clusters.provider.resource"
    done = _python("-m", "together_clusters.emulator", "--help")
    assert done.returncode == 0, done.stderr


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
