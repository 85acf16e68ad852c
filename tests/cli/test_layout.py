"""The command line's layout: one subpackage per command (``cli/<command>/``, its ``command`` module holding
``add_parser`` and ``run``) over the shared modules of ``cli/``. A command's subpackage imports the shared
modules and its own, never another command's; a shared module imports no command's subpackage (``main``,
which builds the top parser from the commands, and ``__main__`` aside)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests._parsing import parse
from together_clusters.cli import main

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli"
PACKAGE = "together_clusters.cli"
DISPATCHERS = {f"{PACKAGE}.main", f"{PACKAGE}.__main__"}


def _module_name(path: Path) -> tuple[str, bool]:
    parts = path.relative_to(CLI).with_suffix("").parts
    if parts[-1] == "__init__":
        return ".".join((PACKAGE, *parts[:-1])), True
    return ".".join((PACKAGE, *parts)), False


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of the package's modules, relative ones resolved, at any depth; a
    ``from X import y`` counts as ``X.y`` (``y`` may be a submodule)."""
    module, is_package = _module_name(path)
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.startswith(PACKAGE + ".")]


def _owner(module: str) -> str | None:
    """The command whose subpackage holds ``module``; ``None`` for a shared module."""
    first = module.removeprefix(PACKAGE + ".").partition(".")[0]
    return first if first in main.COMMANDS else None


def test_each_command_is_a_subpackage_with_its_command_module() -> None:
    subpackages = sorted(p.parent.name for p in CLI.glob("*/__init__.py"))
    assert subpackages == sorted(main.COMMANDS), "one subpackage per command, and nothing else"
    for name, module in main.COMMANDS.items():
        assert module.__name__ == f"{PACKAGE}.{name}.command"
        assert callable(module.add_parser) and callable(module.run), name


def test_no_command_imports_another_and_no_shared_module_imports_a_command() -> None:
    paths = sorted(p for p in CLI.rglob("*.py") if "__pycache__" not in p.parts)
    assert len(paths) > 30, "the command line's modules were not found"
    wrong = []
    for path in paths:
        module, _ = _module_name(path)
        importer = _owner(module)
        for line, imported in _imports(path):
            target = _owner(imported)
            if target is None or target == importer or (importer is None and module in DISPATCHERS):
                continue
            who = f"the {importer} command" if importer else "a shared module"
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {who} imports {imported}")
    assert not wrong, "imports across the commands' subpackages:\n" + "\n".join(wrong)
