"""MkDocs hooks: the reference pages generated from the code at build time, so they cannot fall behind.

A reference page holds a marker comment, ``<!-- generated: NAME -->``, which is replaced by the
Markdown that ``GENERATORS[NAME]`` builds from the code itself: the ``Cluster`` inputs from
``together_clusters.provider.schema.FIELDS``, its outputs from ``OUTPUT_NAMES`` (their types from the
``Cluster`` class's annotations), the command line from ``together_clusters.cli.main.build_parser()``, its
exit codes from ``together_clusters.cli.exit_codes.ExitCode``, and the components' args as mkdocstrings blocks, one per exported ``*Args`` dataclass and per type its fields
use (mkdocstrings then renders each from its source).
Nothing generated is committed. A marker with no generator, or a generator whose marker is missing
from the page that should hold it, fails the build.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->")

# The docstrings are written for Sphinx (``:class:`X```); Markdown renders the role's name as text
# before the code. The rendered pages drop it, so the docstrings stay as they are.
SPHINX_ROLE = re.compile(r":(?:class|data|func|meth|mod|attr|exc|obj):(?=<code>)")

# argparse wraps its help to the terminal's width: fix it so the pages do not depend on who builds them.
HELP_COLUMNS = "100"


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(value: Any) -> str:
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def cluster_inputs() -> str:
    """One row per ``FieldSpec`` of the schema, in the schema's order."""
    from together_clusters.provider.schema import FIELDS, OnChange

    rows = [
        "| input | on change | required | default | server default | read back | catalog | checked at preview "
        "| description |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, spec in FIELDS.items():
        effect = spec.on_change.value
        if spec.on_change is OnChange.UPDATE and spec.replace_when is not None:
            effect += f"; replace when {_cell((spec.replace_when.__doc__ or spec.replace_when.__name__).strip())}"
        default = "" if spec.default is None else _code(spec.default)
        flags = ["yes" if flag else "" for flag in (spec.required, spec.server_default, spec.read_back, spec.catalog)]
        rows.append(
            f"| `{name}` {{ #input-{name} }} | {_cell(effect)} | {flags[0]} | {default} | {flags[1]} | {flags[2]} "
            f"| {flags[3]} | {_cell(spec.constraint)} | {_cell(spec.doc)} |"
        )
    return "\n".join(rows) + "\n"


def _type_name(hint: Any) -> str:
    """``pulumi.Output[int]`` -> ``int``: the type a stack reads from the output.

    The annotations are read as written (the module has postponed annotations, and evaluating them
    would need the names of ``Resource``'s own annotations too).
    """
    text = hint if isinstance(hint, str) else getattr(hint, "__name__", str(hint))
    match = re.fullmatch(r"(?:pulumi\.)?Output\[(.*)\]", text)
    return match.group(1) if match else text


def cluster_outputs() -> str:
    """One row per name of ``OUTPUT_NAMES``, its type from ``Cluster``'s annotations."""
    from together_clusters.provider.resource import Cluster
    from together_clusters.provider.schema import OUTPUT_NAMES, SECRET_OUTPUTS

    hints = vars(Cluster).get("__annotations__", {})
    rows = ["| output | type | secret |", "| --- | --- | --- |"]
    for name in OUTPUT_NAMES:
        kind = f"`{_cell(_type_name(hints[name]))}`" if name in hints else ""
        secret = "yes" if name in SECRET_OUTPUTS else ""
        rows.append(f"| `{name}` {{ #output-{name} }} | {kind} | {secret} |")
    return (
        "\n".join(rows)
        + "\n\n`cluster_id` is also the resource's id. The inputs are outputs too, with the values the "
        "provider last read or set.\n"
    )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options_table(parser: argparse.ArgumentParser) -> str:
    rows = ["| option | value | help |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        flags = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
        takes_value = action.nargs != 0
        value = f"`{action.metavar or action.dest.upper()}`" if takes_value and action.option_strings else ""
        if action.choices and not isinstance(action.choices, dict):
            value = " \\| ".join(f"`{choice}`" for choice in action.choices)
        rows.append(f"| {flags} | {value} | {_cell(action.help or '')} |")
    return "\n".join(rows) + "\n"


def cli() -> str:
    """The top-level usage, then one section per subcommand: its usage block and an options table."""
    from together_clusters.cli.main import build_parser

    os.environ["COLUMNS"] = HELP_COLUMNS
    parser = build_parser()
    parts = [f"```text\n{parser.format_help().rstrip()}\n```\n"]
    for name, sub in _subcommands(parser).items():
        parts.append(f"## {name}\n")
        if sub.description:
            parts.append(f"{sub.description.strip()}\n")
        parts.append(f"```text\n{sub.format_usage().rstrip()}\n```\n")
        parts.append(_options_table(sub))
        # A command with actions of its own (remediations list, approve...): one section per action.
        for action, nested in _subcommands(sub).items():
            parts.append(f"### {name} {action}\n")
            parts.append(f"```text\n{nested.format_usage().rstrip()}\n```\n")
            parts.append(_options_table(nested))
    return "\n".join(parts)


def exit_codes() -> str:
    """The exit codes' table, one row per code: every command's, each code one meaning."""
    from together_clusters.cli.exit_codes import markdown_table

    return markdown_table()


# The components in the order a reader meets them; a component added later comes after these.
COMPONENT_ORDER = ("BatchJob", "Sweep", "TrainingRun", "BatchInference", "CheckpointStore")


def _reachable_types(root: type, into: list[type]) -> None:
    """``root`` and every dataclass or enum its fields' annotations name, depth first, each once."""
    if root in into:
        return
    into.append(root)
    if dataclasses.is_dataclass(root):
        for hint in typing.get_type_hints(root).values():
            for named in _named_types(hint):
                _reachable_types(named, into)


def _named_types(hint: Any) -> list[type]:
    found = [hint] if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or issubclass(hint, Enum)) else []
    for argument in typing.get_args(hint):
        found += _named_types(argument)
    return found


def components_args() -> str:
    """A mkdocstrings block per component's args dataclass (each exported ``<Component>Args`` of
    ``together_clusters.components``), then one per dataclass or enum their fields use, wherever it is
    defined, so a nested piece added or moved later is documented without editing the page."""
    from together_clusters import components

    exported = {name: getattr(components, name) for name in components.__all__}
    args = [name for name in exported if name.endswith("Args") and dataclasses.is_dataclass(exported[name])]
    args.sort(key=lambda n: (COMPONENT_ORDER.index(n[:-4]) if n[:-4] in COMPONENT_ORDER else len(COMPONENT_ORDER), n))
    parts = []
    for name in args:
        parts.append(f"## {name[:-4]}\n\n::: together_clusters.components.{name}\n")
    nested: list[type] = []
    for name in args:
        _reachable_types(exported[name], nested)
    pieces = [t for t in nested if t not in {exported[n] for n in args}]
    parts.append("## Shared pieces\n\nThe types the args' fields take, wherever they are defined.\n")
    for piece in pieces:
        parts.append(f"::: {piece.__module__}.{piece.__qualname__}\n")
    return "\n".join(parts)


# The package's other commands, documented by their own --help (their parsers are built inside main()).
MODULE_COMMANDS = ("together_clusters.emulator", "together_clusters.templates")


def module_commands() -> str:
    """``python -m MODULE --help`` of each of the package's other commands, as it prints it."""
    parts = []
    for module in MODULE_COMMANDS:
        shown = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env={**os.environ, "COLUMNS": HELP_COLUMNS},
        )
        parts.append(f"### python -m {module}\n\n```text\n{shown.stdout.rstrip()}\n```\n")
    return "\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "module-commands": module_commands,
    "components-args": components_args,
    "cluster-inputs": cluster_inputs,
    "cluster-outputs": cluster_outputs,
    "cli": cli,
    "exit-codes": exit_codes,
}


_used: set[str] = set()


PACKAGE_TREE = "build/docs-package"
"""Where :func:`on_startup` lays the package out for mkdocstrings (``paths`` in mkdocs.yml names it)."""


def on_startup(command: str, dirty: bool) -> None:
    """Give mkdocstrings the package as a wheel lays it out (before any plugin reads its configuration:
    mkdocstrings starts its handlers in its own ``on_config``). The repository's folders are mapped into
    ``together_clusters`` by pyproject.toml's ``package-dir`` (and the checkpoint runtime comes from
    ``runtime/``), so no folder of the checkout holds the whole package, and griffe follows the editable
    install's links back to the folders. The tree is copied, from the one mapping, into PACKAGE_TREE."""
    import shutil
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    tree = root / PACKAGE_TREE
    shutil.rmtree(tree, ignore_errors=True)
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    runtime = {"together_clusters.components.checkpoint": "runtime/together_clusters/components/checkpoint"}
    for package, folder in sorted({**mapping, **runtime}.items()):  # parents before their subpackages
        target = tree.joinpath(*package.split("."))
        shutil.copytree(root / folder, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))


def on_pre_build(config: Any) -> None:
    _used.clear()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each marker of a page with what its generator builds from the code."""

    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_path}: no generator for marker {name!r}; known: {sorted(GENERATORS)}")
        _used.add(name)
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Drop the Sphinx role names that mkdocstrings leaves in front of rendered code."""
    return SPHINX_ROLE.sub("", html)


def on_post_build(config: Any) -> None:
    """A generator no page asked for means a reference page lost its marker: fail rather than omit it."""
    unused = sorted(set(GENERATORS) - _used)
    if unused:
        raise PluginError(f"no page holds the marker of {unused}: a generated reference would be missing")
