"""One table of exit codes for every command (``together_clusters.cli.exit_codes.ExitCode``): each code has one
meaning across ``drift``, ``status`` and ``drill``, every code a command can return is a row of the table,
and ``together-clusters --help`` prints the table.

The source of the ``cli`` package is read (no command runs): a module of its own defining ``EXIT_*``
numbers, or a command's entry point returning a bare number, would be a code outside the table.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

from tests._parsing import parse

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli"
TABLE = CLI / "exit_codes.py"
# The functions a command's exit code leaves through: each command's ``run`` and the console script's ``main``.
ENTRY_POINTS = ("run", "main")


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(CLI.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path, parse(path.read_text(), str(path))


def _numbers(node: ast.AST | None) -> list[int]:
    """The integer literals an expression can evaluate to (``0``, ``4 if stalled else 0``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return [node.value]
    if isinstance(node, ast.IfExp):
        return _numbers(node.body) + _numbers(node.orelse)
    return []


def _exit_constants() -> list[tuple[str, str, int]]:
    """(file, name, value) of every module-level ``EXIT_... = <int>`` of the package."""
    found = []
    for path, tree in _modules():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                    for value in _numbers(node.value):
                        found.append((str(path.relative_to(ROOT)), target.id, value))
    return found


def _table() -> dict[int, str]:
    """code -> name, as ``exit_codes.ExitCode`` has it (empty when there is no table)."""
    if not TABLE.is_file():
        return {}
    exit_codes = importlib.import_module("together_clusters.cli.exit_codes")
    return {int(code): code.name for code in exit_codes.ExitCode}


def test_no_code_has_two_meanings() -> None:
    meanings: dict[int, set[str]] = {}
    for code, name in _table().items():
        meanings.setdefault(code, set()).add(f"ExitCode.{name}")
    for where, name, value in _exit_constants():
        meanings.setdefault(value, set()).add(f"{name} ({where})")
    twice = {code: sorted(names) for code, names in meanings.items() if len(names) > 1}
    assert not twice, f"exit codes with more than one meaning: {twice}"


def test_the_table_is_the_one_home_of_exit_codes() -> None:
    elsewhere = [f"{where}: {name} = {value}" for where, name, value in _exit_constants()]
    assert not elsewhere, "exit codes defined outside cli/exit_codes.py:\n" + "\n".join(elsewhere)
    assert _table(), "cli/exit_codes.py has no ExitCode table"


def test_every_code_a_command_returns_is_a_row_of_the_table() -> None:
    """A command's entry point returns members of the table (or what a function of the package computed from
    them), never a bare number; and every member a command's subpackage names lists that command."""
    bare = []
    for path, tree in _modules():
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef) and function.name in ENTRY_POINTS:
                for node in ast.walk(function):
                    if isinstance(node, ast.Return) and _numbers(node.value):
                        bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: return {ast.unparse(node.value)}")
        for node in ast.walk(tree):
            # sys.exit(3), raise SystemExit(3), parser.exit(3, ...)
            if isinstance(node, ast.Call) and node.args and _numbers(node.args[0]):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in ("exit", "SystemExit", "_exit"):
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not bare, "exit codes outside the table:\n" + "\n".join(bare)

    table = importlib.import_module("together_clusters.cli.exit_codes").ExitCode
    main = importlib.import_module("together_clusters.cli.main")
    commands = sorted(main.COMMANDS)
    assert commands == sorted(main.build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    shared = {
        node.attr
        for path in (CLI / "main.py", CLI / "arguments.py")
        for node in ast.walk(parse(path.read_text(), str(path)))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ExitCode"
    }
    for command in commands:
        named = {
            node.attr
            for path in sorted((CLI / command).rglob("*.py"))
            for node in ast.walk(parse(path.read_text(), str(path)))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ExitCode"
        }
        unknown = sorted(named - set(table.__members__))
        assert not unknown, f"{command} names exit codes the table does not have: {unknown}"
        not_listed = sorted(name for name in named if command not in table[name].commands)
        assert not not_listed, f"{command} returns {not_listed}, whose rows do not list it"
        listed = {code.name for code in table if command in code.commands}
        never = sorted(listed - named - shared)
        assert not never, f"the table says {command} returns {never}, which it never names"


def test_each_code_has_one_line_that_says_what_it_means() -> None:
    table = importlib.import_module("together_clusters.cli.exit_codes").ExitCode
    assert [int(code) for code in table] == list(range(len(table))), "the codes are 0, 1, 2, ... in order"
    for code in table:
        assert code.meaning and "\n" not in code.meaning, code
        assert code.commands, code


def test_the_help_shows_the_table() -> None:
    from together_clusters.cli.exit_codes import ExitCode
    from together_clusters.cli.main import build_parser

    shown = " ".join(build_parser().format_help().split())
    for code in ExitCode:
        assert " ".join(f"{int(code)} {code.label}".split()) in shown, code
        assert " ".join(code.meaning.split()) in shown, code


def test_the_drill_that_did_not_survive_has_a_code_of_its_own() -> None:
    from together_clusters.cli.exit_codes import ExitCode

    assert ExitCode.NOT_SURVIVED.commands == ("drill",)
    assert ExitCode.PENDING.commands == ("drift",)
    assert ExitCode.NOT_SURVIVED != ExitCode.PENDING
