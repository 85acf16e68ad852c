"""README.md stays short (at most 25 KB: the rest is the documentation site) and every shell command it
shows is one that works as written.

Each command of README's ``bash``/``sh`` blocks (pipelines, ``&&`` chains and ``$(...)`` included) is
checked here without side effects:

- ``python -m together_clusters.templates [NAME]`` runs for real (it only prints);
- ``together-clusters SUBCOMMAND --flags`` is parsed by the command's own parser
  (``together_clusters.cli.main.build_parser()``), so a subcommand or flag that does not exist fails;
- ``python -m together_clusters.emulator --flags``: every flag is one its ``--help`` lists;
- ``python -m MODULE``: the module is importable (``build``, ``pip``);
- ``pulumi SUBCOMMAND --flags``: the engine's ``pulumi SUBCOMMAND --help`` accepts them (when the
  engine is built);
- ``scripts/NAME`` and ``.venv/bin/NAME``: the program exists and is executable.

The commands with effects run in full elsewhere: ``python -m build`` and ``pip install dist/*.whl`` in
``tests/packaging`` (which builds the wheel with the standard front end and installs it into a fresh
virtualenv), ``pulumi new`` from a template's path, ``pulumi up`` and the drift check in
``tests/packaging/test_templates_engine.py``, ``.venv/bin/mkdocs build --strict`` in
``tests/docs/test_site.py``; ``scripts/up`` and ``scripts/test`` are what CI itself runs (``.ci/run``
calls ``scripts/test``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from together_clusters.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_BYTES = 25 * 1024

# Programs README expects the reader to have (its stated prerequisites) and shell builtins.
PREREQUISITES = {"python", "python3", "pip", "pulumi", "mkdir", "cd", "export", "eval", "source"}
# The virtualenvs README's own commands make (the install block's, the project's of `pulumi new`).
VENV_BIN = re.compile(r"^(?:~/\.together|venv|\.venv)/bin/(?P<program>[\w.-]+)$")
ENGINE = ROOT / ".engine" / "bin" / "pulumi"


def readme_commands(text: str) -> list[str]:
    """Each line of a ``bash``/``sh`` block, continuation lines joined, with its comment dropped."""
    commands = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(line)
    return commands


def simple_commands(line: str) -> Iterator[list[str]]:
    """The simple commands of one shell line: split on ``&&``, ``||``, ``;``, ``|`` and ``&``, with the
    commands of each ``"$(...)"`` substitution, and without redirections or variable assignments."""
    for inner in re.findall(r"\$\(([^()]*)\)", line):
        yield from simple_commands(inner)
    line = re.sub(r"\$\(([^()]*)\)", "SUBSTITUTED", line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    command: list[str] = []
    for token in lexer:
        if token and set(token) <= set(";&|"):
            if command:
                yield command
            command = []
        else:
            command.append(token)
    if command:
        yield command


def _strip_assignments(words: list[str]) -> list[str]:
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        words = words[1:]
    return words


def _python_module(args: list[str]) -> list[str] | None:
    """``-m MODULE ARGS`` of a python command line, else None."""
    return args[args.index("-m") + 1 :] if "-m" in args else None


def check_command(words: list[str]) -> None:
    """Fail when ``words`` names a program, module, subcommand or flag that does not exist."""
    words = _strip_assignments(words)
    if not words:
        return
    program, args = words[0], words[1:]
    if program.startswith(("scripts/", ".venv/")):
        path = ROOT / program
        assert path.is_file() and os.access(path, os.X_OK), f"{program}: no such executable in the repository"
        if program == "scripts/pulumi":
            check_pulumi(args)
        if program.startswith("scripts/"):
            return
    venv = VENV_BIN.match(program)
    if venv:
        program = venv.group("program")
    if program == "together-clusters":
        check_together_clusters(args)
    elif program in {"python", "python3"}:
        check_python(args)
    elif program == "pip":
        assert args[:1] == ["install"], words
    elif program == "pulumi":
        check_pulumi(args)
    elif program == "mkdocs":
        assert args[:1] in (["build"], ["serve"]), words
    else:
        assert program in PREREQUISITES, f"{' '.join(words)}: {program!r} is neither a prerequisite nor ours"


def check_together_clusters(args: list[str]) -> None:
    parser = build_parser()
    try:
        parser.parse_args(args)
    except SystemExit as exit:
        pytest.fail(f"together-clusters {' '.join(args)}: refused by its parser (exit {exit.code})")


def check_python(args: list[str]) -> None:
    module = _python_module(args)
    assert module, f"python {' '.join(args)}: README runs modules (-m) only"
    name, rest = module[0], module[1:]
    if name == "together_clusters.templates":
        ran = run_python("-m", name, *rest)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip(), f"python -m {name} {' '.join(rest)} printed nothing"
    elif name == "together_clusters.emulator":
        listed = run_python("-m", name, "--help")
        assert listed.returncode == 0, listed.stderr
        flags = [word for word in rest if word.startswith("-")]
        missing = [
            flag for flag in flags if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", listed.stdout)
        ]
        assert not missing, f"python -m {name}: no such flags {missing}"
    elif name == "together_clusters.cli":
        check_together_clusters(rest)
    else:
        assert importlib.util.find_spec(name) is not None, f"python -m {name}: no such module"


def check_pulumi(args: list[str]) -> None:
    if not ENGINE.exists():
        return  # the engine is not built here; tests/packaging runs these commands under it
    # pulumi's parser refuses unknown subcommands and flags before it prints a command's help.
    flags = [word for word in args if word.startswith("--")]
    subcommand = []
    for word in args:
        if word.startswith("-"):
            break
        subcommand.append(word)
    if subcommand[:1] in (["new"], ["import"]):
        # `pulumi new TEMPLATE`, `pulumi import TYPE NAME ID`: arguments, not subcommands
        subcommand = subcommand[:1]
    if subcommand[:2] == ["config", "set"]:
        subcommand = ["config", "set"]
    ran = subprocess.run(
        [str(ENGINE), *subcommand, *(f.split("=")[0] for f in flags), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"},
    )
    assert ran.returncode == 0, f"pulumi {' '.join(args)}: {ran.stderr.strip()}"
    # An unknown subcommand gets the top-level help: the usage names the subcommand only when it exists.
    usage = ran.stdout.split("Usage:", 1)[-1].split("\n\n", 1)[0]
    assert f"pulumi {' '.join(subcommand)}".strip() in usage, f"pulumi {' '.join(args)}: no such subcommand"


def run_python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_readme_is_at_most_25_kb() -> None:
    size = README.stat().st_size
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; move content into docs/ (the site)"


def test_readme_keeps_the_two_commands() -> None:
    text = README.read_text()
    section = text[text.index("## The two commands") :]
    assert re.search(r"^scripts/up\b", section, re.M) and re.search(r"^scripts/test\b", section, re.M)


def test_the_command_checker_refuses_what_does_not_exist() -> None:
    """The checks below are worth something only if they fail on a wrong command."""
    for wrong in (
        "together-clusters drfit --stack prod",
        "venv/bin/together-clusters drift --stak prod",
        "python -m together_clusters.emulator --sped 60",
        "python -m together_clusters.templates finetuning",
        "python -m no_such_module_here",
        "scripts/nothing-here",
        "curl https://example.com",
        *(
            (
                "pulumi uup",
                "scripts/pulumi up --bogus",
                "pulumi import together:index:Cluster gpus c-1 --bogus",
            )
            if ENGINE.exists()
            else ()
        ),
    ):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            for command in simple_commands(wrong):
                check_command(command)


def test_every_shell_command_in_readme_exists_as_written() -> None:
    lines = readme_commands(README.read_text())
    assert lines, "README shows no shell commands"
    checked = 0
    for line in lines:
        for command in simple_commands(line):
            check_command(command)
            checked += 1
    assert checked >= len(lines)


@pytest.mark.parametrize(
    ("line", "commands"),
    [
        ("a --x && b | c; d &", [["a", "--x"], ["b"], ["c"], ["d"]]),
        ('pulumi new "$(p -m t finetune)"', [["p", "-m", "t", "finetune"], ["pulumi", "new", "SUBSTITUTED"]]),
        ("export A=1 B=2   # a comment", [["export", "A=1", "B=2"]]),
    ],
)
def test_shell_lines_are_split_into_their_commands(line: str, commands: list[list[str]]) -> None:
    assert list(simple_commands(line)) == commands
