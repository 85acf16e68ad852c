"""The documentation site builds with ``mkdocs build --strict`` (a broken link, a missing snippet, an
object mkdocstrings cannot find, or a reference page that lost its generated part fail it), and its
reference is generated from the code: every input of ``schema.FIELDS`` and every output of
``OUTPUT_NAMES`` is on the built ``Cluster`` page, every subcommand and flag of the parser and every exit
code on the command-line page, every field of the components' args dataclasses on theirs.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from together_clusters import components
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.main import build_parser
from together_clusters.provider.schema import FIELDS, OUTPUT_NAMES

ROOT = Path(__file__).resolve().parents[2]

# The components' args as the package exports them (the names the components reference documents).
ARGS_CLASSES = ("BatchJobArgs", "SweepArgs", "TrainingRunArgs", "BatchInferenceArgs", "CheckpointStoreArgs")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``mkdocs build --strict`` makes it from the checkout, documenting the checkout's code."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def page_text(site: Path, page: str) -> str:
    """The visible text of a built page's article, tags dropped."""
    document = (site / page / "index.html").read_text()
    article = document[document.index("<article") : document.index("</article>")]
    return html.unescape(re.sub(r"<[^>]+>", " ", article))


def test_the_site_builds_strict(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "reference" / "cluster" / "index.html").is_file()


def test_every_schema_field_and_output_is_in_the_cluster_reference(site: Path) -> None:
    document = (site / "reference" / "cluster" / "index.html").read_text()
    words = set(page_text(site, "reference/cluster").split())
    missing_inputs = [name for name in FIELDS if name not in words or f'id="input-{name}"' not in document]
    missing_outputs = [
        name for name in OUTPUT_NAMES if name not in words or f'id="output-{name}"' not in document
    ]
    assert not missing_inputs and not missing_outputs, (missing_inputs, missing_outputs)
    # The table says what a change does, as the schema does.
    for name, spec in FIELDS.items():
        row = re.search(rf'id="input-{name}".*?</tr>', document, re.S)
        assert row and spec.on_change.value in row.group(0), name


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def test_every_subcommand_and_flag_is_in_the_command_line_reference(site: Path) -> None:
    document = html.unescape((site / "reference" / "cli" / "index.html").read_text())
    commands = _subparsers(build_parser())
    assert commands, "the parser has no subcommands"
    for name, sub in commands.items():
        start = document.find(f'<h2 id="{name}"')
        assert start >= 0, f"no section for the subcommand {name!r}"
        end = document.find("<h2", start + 1)
        section = document[start : end if end >= 0 else None]
        # A command of actions (remediations list, approve...): each action's own section, within it.
        parts = {f"{name} {action}": nested for action, nested in _subparsers(sub).items()} or {name: sub}
        for title, parser in parts.items():
            part = section
            if title != name:
                heading = section.find(f'<h3 id="{title.replace(" ", "-")}"')
                assert heading >= 0, f"no section for {title!r}"
                following = section.find("<h3", heading + 1)
                part = section[heading : following if following >= 0 else None]
            flags = [
                flag
                for action in parser._actions
                if not isinstance(action, argparse._HelpAction)
                for flag in action.option_strings
                if flag.startswith("--")
            ]
            assert flags, title
            missing = [flag for flag in flags if f"<code>{flag}</code>" not in part]
            assert not missing, (title, missing)


def test_every_exit_code_is_in_the_command_line_reference(site: Path) -> None:
    document = (site / "reference" / "cli" / "index.html").read_text()
    text = " ".join(page_text(site, "reference/cli").split())
    for code in ExitCode:
        assert f'id="exit-{int(code)}"' in document, code
        assert " ".join(code.meaning.split()) in text, code


def _dataclasses_used_by(root: type) -> list[type]:
    """``root`` and every dataclass its fields' annotations name, at any depth."""
    found: list[type] = []
    pending = [root]
    while pending:
        current = pending.pop()
        if current in found:
            continue
        found.append(current)
        hints = list(typing.get_type_hints(current).values())
        while hints:
            hint = hints.pop()
            hints += typing.get_args(hint)
            if isinstance(hint, type) and dataclasses.is_dataclass(hint):
                pending.append(hint)
    return found


def test_every_field_of_the_components_args_is_in_their_reference(site: Path) -> None:
    document = (site / "reference" / "components" / "index.html").read_text()
    for class_name in ARGS_CLASSES:
        for args_class in _dataclasses_used_by(getattr(components, class_name)):
            anchor = f"{args_class.__qualname__}"
            documented = f'{anchor}"' in document
            assert documented, f"{args_class.__qualname__} is not documented"
            missing = [
                f.name
                for f in dataclasses.fields(args_class)
                if not re.search(rf'id="[\w.]*\.{anchor}\.{f.name}"', document)
            ]
            assert not missing, (args_class.__qualname__, missing)
